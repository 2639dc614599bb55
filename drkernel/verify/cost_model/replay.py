"""The CPU cost model's trusted side (issue 13): replay the candidate's reported forward, count it, price it.

A child of its own (sandboxed: it runs the candidate's jit bodies in the interpreter) that never imports
the candidate's module. Before any candidate code runs it loads the reference, draws inputs from a seed
the candidate never saw, and runs the reference under an aten counter (one launch per operator eager
PyTorch dispatches). Then it rebuilds only the gated @triton.jit functions from the candidate's source
(re-gated), and replays the trace (drkernel.verify.cost_model.trace) on those inputs: aten events through
torch.ops.aten under the same counter, launches in the interpreter under drkernel.perfmodel's Triton
counter, which also refuses any access outside the buffers the trace reported. The replay's outputs must
equal the reference's; only then are the counted launches priced on the GPU profile. So nothing the
candidate's process measured or claimed can raise a reward: omitted work, work hidden in host code,
data-dependent literals and lies about buffers all make the replay wrong.
"""

from __future__ import annotations
import __future__

import ast
import builtins
import contextlib
import hashlib
import math
import os
import re
from types import ModuleType, SimpleNamespace
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from drkernel.config.verifier import VerifyOptions
from drkernel.perfmodel import LaunchCount, ModelledTime, get_profile, model_time
from drkernel.perfmodel.aten_count import AtenCounter
from drkernel.perfmodel.triton_count import OutsideBuffers, Race, TritonCounter, Unsupported
from drkernel.verify.harness import gpu_dot, problem
from drkernel.verify.judging import tensors
from drkernel.verify.judging.selections import SelectionCapture
from drkernel.verify.process import protocol
from drkernel.verify.process.child_spec import ChildSpec
from drkernel.verify.static import gate
from drkernel.verify.static.gate_kernel import jit_object_problem
from drkernel.verify.static.gate_objects import MISSING, REAL
from drkernel.verify.static.gate_policy import JIT_BUILTINS, JIT_MODULES

MAX_PROGRAMS = 1 << 20  # programs of one replayed launch
CONSTEXPR_VALUES = (bool, int, float, str, type(None), torch.dtype)  # what a launch may hand a tl.constexpr
# Not replayed as aten events: files and process state, and anything that hands out uninitialised memory
# (a block the reference's outputs were freed from could hold the answer): allocations come as "alloc"
# events, which fill the buffer first.
DENIED_ATEN = re.compile(r"file|save|load|print|_local_scalar|set_|record_stream|_assert|pin_memory|share|empty|resize")
NAN_FILL = 0xFF  # fresh buffers start as NaN (floats) / -1 (integers): unwritten scratch never reads as a result


# aten operators a trace may use besides pointwise ones (torch.Tag.pointwise) and those with a flop formula
# (torch.utils.flop_counter): their cost grows with the bytes they touch, which is how they are priced. Any
# other operator could hide superlinear work behind a bytes-only price (a matmul through cdist), so it fails.
LINEAR_ATEN = frozenset(
    {
        "sum",
        "mean",
        "amax",
        "amin",
        "max",
        "min",
        "argmax",
        "argmin",
        "prod",
        "var",
        "std",
        "var_mean",
        "std_mean",
        "norm",
        "linalg_vector_norm",
        "logsumexp",
        "_softmax",
        "_log_softmax",
        "softmax",
        "log_softmax",
        "native_layer_norm",
        "native_group_norm",
        "native_batch_norm",
        "_native_batch_norm_legit_no_training",
        "_native_batch_norm_legit",
        "copy_",
        "clone",
        "_to_copy",
        "cat",
        "stack",
        "fill_",
        "zero_",
        "zeros",
        "ones",
        "full",
        "zeros_like",
        "ones_like",
        "full_like",
        "new_zeros",
        "new_ones",
        "new_full",
        "arange",
        "cumsum",
        "cumprod",
        "gather",
        "scatter",
        "scatter_add",
        "index_select",
        "index",
        "index_put_",
        "index_add",
        "masked_fill",
        "masked_fill_",
        "where",
        "constant_pad_nd",
        "repeat",
        "flip",
        "roll",
        "tril",
        "triu",
        "any",
        "all",
        "topk",
        "sort",
        "embedding",
        "max_pool2d_with_indices",
        "avg_pool2d",
        "avg_pool1d",
        "adaptive_avg_pool2d",
        "_adaptive_avg_pool2d",
        "slice_scatter",
        "select_scatter",
        "split_with_sizes_copy",
        "contiguous",
        "rand",
        "randn",
        "rand_like",
        "randn_like",
        "bernoulli_",
        "native_dropout",
        "count_nonzero",
        # red-team note N4 (issue 35): linear in their bytes too (3-D pooling like 2-D, windows from cache), reached by
        # KernelBench references a candidate may keep part of
        "hardswish",
        "glu",
        "prelu",
        "_prelu_kernel",
        "log_sigmoid_forward",
        "max_pool3d_with_indices",
        "avg_pool3d",
        "_adaptive_avg_pool3d",
        "adaptive_max_pool2d",
        "adaptive_max_pool3d",
        "upsample_nearest1d",
        "upsample_nearest2d",
        "upsample_nearest3d",
        "upsample_bilinear2d",
        "pixel_shuffle",
        "mse_loss",
        "smooth_l1_loss",
        "huber_loss",
        "nll_loss_forward",
        "binary_cross_entropy",
        "kl_div",
        "unsafe_split",
    }
)


def priced(op: Any) -> bool:
    from drkernel.perfmodel.aten_count import flop_formula

    base = op._schema.name.removeprefix("aten::")
    return (
        torch.Tag.pointwise in op.tags
        or flop_formula(op) is not None
        or base in LINEAR_ATEN
        or bool(getattr(op, "is_view", False))
    )


class ReplayFailed(Exception):
    """The trace does not reproduce the reference: the candidate's model fails."""


# -- rebuilding the kernels ------------------------------------------------------------------------------
def rebuild_source(source: str) -> tuple[str, list[str]]:
    """The candidate's module-level @triton.jit functions, and nothing else: no decorator (autotune and
    heuristics run only in the candidate's process: the trace names the constexprs each launch used), no
    annotation but `tl.constexpr`, written `constexpr` (under postponed evaluation, as Triton's interpreter
    compiles it too, an annotation is only text: nothing evaluates it), only literal defaults (the gate
    refuses others). Imports and constants are not rebuilt from text: load_kernels binds them."""
    text, constexprs = _rebuild(gate.kernel_parts(source))
    return text, list(constexprs)


def _rebuild(parts: gate.KernelParts) -> tuple[str, dict[str, list[str]]]:
    """The text, and each function's constexpr parameters."""
    body: list[ast.stmt] = []
    constexprs: dict[str, list[str]] = {}
    for fn in parts.functions:
        args = fn.args
        constexprs[fn.name] = []
        for a in args.posonlyargs + args.args + args.kwonlyargs:
            if a.annotation is not None:  # the gate let through only tl.constexpr
                constexprs[fn.name].append(a.arg)
                a.annotation = ast.Name("constexpr", ast.Load())
        body.append(ast.FunctionDef(name=fn.name, args=args, body=fn.body, decorator_list=[], returns=None))
    text = ast.unparse(ast.fix_missing_locations(ast.Module(body=body, type_ignores=[])))
    return text + "\n", constexprs


def _namespace(parts: gate.KernelParts) -> dict[str, Any]:
    """The globals the rebuilt kernels run with, all made here: Triton's builtins only, the candidate's
    aliases of triton.language/math (its `triton` alias reduced to cdiv/next_power_of_2 and the language)
    and its literal constants. Nothing of the candidate's is evaluated to make it."""
    import triton
    import triton.language as tl

    names: dict[str, Any] = {"__builtins__": {n: getattr(builtins, n) for n in JIT_BUILTINS}}
    for name, path in parts.aliases.items():
        if path == "triton":
            names[name] = SimpleNamespace(cdiv=triton.cdiv, next_power_of_2=triton.next_power_of_2, language=tl)
            continue
        obj = REAL.get(path)
        if isinstance(obj, ModuleType) and obj.__name__ in JIT_MODULES:
            names[name] = obj
        elif obj is not MISSING and not isinstance(obj, ModuleType) and jit_object_problem(path) is None:
            names[name] = obj
    for name, node in parts.constants.items():
        if isinstance(node, ast.Call):  # tl.constexpr(literal), as the gate allows
            names[name] = tl.constexpr(ast.literal_eval(node.args[0]))
        else:
            names[name] = ast.literal_eval(node)
    return names


def load_kernels(source: str, workdir: str) -> tuple[ModuleType, dict[str, frozenset[str]]]:
    """The rebuilt kernels as a module of interpreter-run jit functions (re-gated here: the replay trusts
    no earlier check). Only `def` statements with literal defaults execute, in a namespace made above.
    Returns the module and each kernel's tl.constexpr parameters."""
    import triton

    try:
        parts = gate.kernel_parts(source)
        text, constexprs = _rebuild(parts)
    except ValueError as err:
        raise ReplayFailed(f"the candidate does not pass the gate: {err}") from err
    path = os.path.join(workdir, "kernels.py")
    with open(path, "w") as f:
        f.write(text)
    module = ModuleType("replayed_kernels")
    module.__file__ = path
    module.__dict__.update(_namespace(parts))
    exec(compile(text, path, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True), module.__dict__)
    for name in constexprs:
        module.__dict__[name] = triton.jit(module.__dict__[name])
    return module, {name: frozenset(params) for name, params in constexprs.items()}


# -- the replay ----------------------------------------------------------------------------------------
class Replay:
    def __init__(
        self,
        trace: dict[str, Any],
        payload: bytes,
        committed: list[str],
        inputs: list[Any],
        kernels: ModuleType,
        kernel_names: dict[str, frozenset[str]],
        sector_bytes: int = 32,
    ) -> None:
        self.trace, self.kernels, self.kernel_names = trace, kernels, kernel_names
        self.storages: dict[int, torch.UntypedStorage] = {}
        self.counts: list[LaunchCount] = []
        self.aten = AtenCounter(sector_bytes)
        self.triton = TritonCounter(allowed=[], sector_bytes=sector_bytes)
        offset = 0
        state_ok = set(committed)
        for bid, buf in enumerate(trace["buffers"]):
            if buf["kind"] == "input":
                if buf["index"] >= len(inputs) or not isinstance(inputs[buf["index"]], torch.Tensor):
                    raise ReplayFailed(f"buffer {bid} names input {buf['index']}, which is not a tensor")
                self.storages[bid] = inputs[buf["index"]].untyped_storage()
            elif buf["kind"] in ("state", "literal"):
                n = buf["nbytes"]
                data = payload[offset : offset + n]
                offset += n
                if len(data) != n:
                    raise ReplayFailed("the payload is shorter than the state it declares")
                if buf["kind"] == "state" and hashlib.blake2b(data, digest_size=32).hexdigest() not in state_ok:
                    raise ReplayFailed(f"state buffer {bid} was not committed at load (made after the inputs?)")
                self.storages[bid] = (
                    torch.frombuffer(bytearray(data), dtype=torch.uint8).untyped_storage()
                    if n
                    else torch.UntypedStorage(0)
                )
        if offset != len(payload):
            raise ReplayFailed("the payload holds bytes no state buffer declares")
        self._allow()

    def _allow(self) -> None:
        self.triton.set_allowed(
            [(s.data_ptr(), s.data_ptr() + s.nbytes()) for s in self.storages.values() if s.nbytes()]
        )

    def view(self, ref: dict[str, Any]) -> torch.Tensor:
        storage = self.storages.get(ref["buf"])
        if storage is None:
            raise ReplayFailed(f"buffer {ref['buf']} used before anything made it")
        dtype = getattr(torch, ref["dtype"])
        item = torch.empty(0, dtype=dtype).element_size()
        if any(s < 0 for s in ref["stride"]):
            raise ReplayFailed("negative strides")
        if math.prod(ref["shape"]):
            last = ref["offset"] + sum((n - 1) * s for n, s in zip(ref["shape"], ref["stride"]))
            if (last + 1) * item > storage.nbytes():
                raise ReplayFailed(f"a view reaches past the end of buffer {ref['buf']}")
        t = torch.empty(0, dtype=dtype).set_(storage, ref["offset"], ref["shape"], ref["stride"])
        if ref.get("conj"):
            if not t.is_complex():
                raise ReplayFailed("a conjugate view of a real tensor")
            t = t.conj()
        return torch._neg_view(t) if ref.get("neg") else t

    def value(self, v: Any) -> Any:
        if not isinstance(v, dict):
            return v
        ((key, inner),) = v.items()
        if key == "t":
            return self.view(inner)
        if key == "list":
            return [self.value(x) for x in inner]
        if key == "float":
            return protocol.NON_FINITE[inner]
        if key == "device":
            return torch.device("cpu")
        if key in ("dtype", "memory_format", "layout"):
            obj = getattr(torch, inner, None)
            if not isinstance(obj, (torch.dtype, torch.memory_format, torch.layout)):
                raise ReplayFailed(f"unknown {key} {inner!r}")
            return obj
        raise ReplayFailed(f"unknown value {key!r}")

    def _bind(self, ref: dict[str, Any] | None, t: Any) -> None:
        if ref is None:
            return
        if not isinstance(t, torch.Tensor):
            raise ReplayFailed("an operator returned a non-tensor where the trace has a tensor")
        s = t.untyped_storage()
        held = self.storages.get(ref["buf"])
        if held is None:
            self.storages[ref["buf"]] = s
            self._allow()
        elif held.data_ptr() != s.data_ptr():
            raise ReplayFailed(f"an operator wrote somewhere other than buffer {ref['buf']}")
        if (list(t.shape), list(t.stride()), t.storage_offset(), str(t.dtype).removeprefix("torch."), _bits(t)) != (
            ref["shape"],
            ref["stride"],
            ref["offset"],
            ref["dtype"],
            (bool(ref.get("conj")), bool(ref.get("neg"))),
        ):
            raise ReplayFailed("an operator's output differs in layout from the trace's")

    def event(self, e: dict[str, Any]) -> None:
        if e["op"] == "alloc":
            if e["buf"] in self.storages:
                raise ReplayFailed(f"buffer {e['buf']} allocated twice")
            self.storages[e["buf"]] = torch.full((e["nbytes"],), NAN_FILL, dtype=torch.uint8).untyped_storage()
            self._allow()
        elif e["op"] == "aten":
            base, _, overload = e["name"].removeprefix("aten::").partition(".")
            if DENIED_ATEN.search(base):
                raise ReplayFailed(f"operator {e['name']} is not replayed")
            try:
                op = getattr(getattr(torch.ops.aten, base), overload or "default")
            except (AttributeError, RuntimeError) as err:
                raise ReplayFailed(f"unknown operator {e['name']}") from err
            if not priced(op):
                raise ReplayFailed(
                    f"{e['name']} has no cost model (neither pointwise, nor with a flop formula, nor "
                    "linear in its bytes)"
                )
            args = [self.value(a) for a in e["args"]]
            kwargs = {k: self.value(v) for k, v in e["kwargs"].items()}
            with self.aten:
                out = op(*args, **kwargs)
            outs = [x for x in tree_flatten(out)[0]]
            if len(outs) != len(e["outs"]):
                raise ReplayFailed(f"{e['name']} returned {len(outs)} values, the trace {len(e['outs'])}")
            for ref, t in zip(e["outs"], outs):
                self._bind(ref, t)
            self.counts.extend(self.aten.launches)
            self.aten.launches.clear()
        else:
            name = e["kernel"]
            kernel = getattr(self.kernels, name, None) if name in self.kernel_names else None
            if kernel is None:
                raise ReplayFailed(f"launch of {name}, which is not one of the candidate's gated jit functions")
            if math.prod(e["grid"]) > MAX_PROGRAMS:
                raise ReplayFailed("grid too large to replay")
            unknown = set(e["args"]) - set(kernel.arg_names)
            if unknown:
                raise ReplayFailed(f"{name} has no parameters {sorted(unknown)[:3]}")
            args = {k: self.value(v) for k, v in e["args"].items()}
            for param, value in sorted(args.items()):
                if isinstance(value, list) and any(isinstance(x, torch.Tensor) for x in tree_flatten(value)[0]):
                    raise ReplayFailed(
                        f"{name}'s {param} is a list holding tensors: a kernel gets tensors as plain pointer "
                        "arguments (the interpreter hands a list over as Python objects)"
                    )
            for param in sorted(self.kernel_names[name] & set(args)):
                if not isinstance(args[param], CONSTEXPR_VALUES):
                    raise ReplayFailed(
                        f"{name}'s tl.constexpr {param} is handed a {type(args[param]).__name__}: a constexpr is a "
                        "number, bool, string or dtype (the interpreter would run tensor operators on it as Python)"
                    )
            with self.triton:
                kernel[tuple(e["grid"])](**args)
            self.counts.extend(self.triton.launches)
            self.triton.launches.clear()

    def run(self) -> list[torch.Tensor]:
        for e in self.trace["events"]:
            try:
                self.event(e)
            except ReplayFailed:
                raise
            except Exception as err:
                raise ReplayFailed(_why(err)) from err
        return [self.view(r).clone() for r in self.trace["outputs"]]


def _bits(t: torch.Tensor) -> tuple[bool, bool]:
    return t.is_conj(), t.is_neg()


def _why(err: BaseException) -> str:
    chain: list[BaseException] = []
    cur: BaseException | None = err
    while cur is not None and cur not in chain:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    for e in chain:
        if isinstance(e, (OutsideBuffers, Race, Unsupported)):
            return str(e)
    return f"{type(err).__name__}: {str(err)[:300]}"


def count_reference(
    model: Any, inputs: list[Any], capture: SelectionCapture | None = None
) -> tuple[list[Any], list[LaunchCount]]:
    """The reference's outputs and counted launches; `capture` also keeps what its selecting operators were given
    (drkernel.verify.judging.selections: index outputs over computed tensors), in the same forward."""
    counter = AtenCounter()
    with torch.no_grad(), counter, capture if capture is not None else contextlib.nullcontext():
        out = model(*inputs)
    return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in _flatten(out)], counter.launches


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _flatten(item)]
    return [value]


def model_candidate(
    trace: dict[str, Any],
    payload: bytes,
    committed: list[str],
    candidate_source: str,
    workdir: str,
    inputs: list[Any],
    ref_out: list[Any],
    ref_counts: list[LaunchCount],
    options: VerifyOptions,
    selection: list[Any] | None = None,
) -> dict[str, Any]:
    """The whole trusted judgement of one trace: replay, compare, price. Returns the "modelled" message. `selection`:
    what the reference's selecting operators were given, for index outputs only (never handed to the replay)."""
    profile = get_profile(options.gpu_profile)
    ref_time = model_time(ref_counts, profile)
    base = {
        "type": "modelled",
        "cand_s": 0.0,
        "ref_s": ref_time.seconds,
        "cand": {},
        "ref": _summary(ref_time),
        "launches": [],
    }
    try:
        kernels, names = load_kernels(candidate_source, workdir)
        inputs_copy = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        replay = Replay(trace, payload, committed, inputs_copy, kernels, names, profile.sector_bytes)
        with gpu_dot.emulated():  # tl.dot as the GPU computes it: priced at TF32, computed with TF32 operands
            out = replay.run()
    except ReplayFailed as err:
        return {**base, "verdict": "mismatch", "message": str(err)}
    ok, message, _ = tensors.compare(
        ref_out, out, options.atol, options.rtol, options.correctness, [*inputs, *(selection or [])]
    )
    if not ok:
        return {
            **base,
            "verdict": "mismatch",
            "message": f"the reported trace, replayed on inputs the candidate never saw, is wrong: {message}",
        }
    cand_time = model_time(replay.counts, profile)
    launches = [
        f"{c.kind} {c.name}: read {c.read_bytes} B, wrote {c.write_bytes} B, re-read {c.reread_bytes} B, "
        f"{sum(c.flops.values()):.4g} flop"
        for c in replay.counts[: protocol.MAX_LIST]
    ]
    return {
        **base,
        "verdict": "match",
        "message": "",
        "cand_s": cand_time.seconds,
        "cand": _summary(cand_time),
        "launches": launches,
    }


def _summary(t: ModelledTime) -> dict[str, float]:
    """The modelled time's figures, and the Triton share of device time where there is device time (the coverage
    the judge uses under this model)."""
    share = t.triton_share
    return {k: float(v) for k, v in t.as_json().items()} | ({} if share is None else {"triton_share": share})


def prepare(device: str, workdir: str, memory_limit_mb: int, group_uid: int | None = None) -> None:
    """The replay child's sandbox (CPU only; it runs the candidate's trace), also what a spare applies ahead."""
    from drkernel.verify.judging.backends import env_for
    from drkernel.verify.process.sandbox import capture_output, isolate

    isolate(workdir, on_accelerator=False, memory_limit_mb=memory_limit_mb, env=env_for("cpu"))
    capture_output(workdir)


def main(spec: ChildSpec, conn: Any) -> None:
    """Entry point of the replay child (a fork of the warm fork-server): the reference on the judge's first
    order (its seed), then the candidate's trace on the second. A failure before the trace arrives is the
    reference's (infra); any after it, the candidate's."""
    from drkernel.verify.judging.backends import make_backend

    try:
        prepare(spec.device, spec.workdir, spec.memory_limit_mb)
        backend = make_backend("cpu")
        module = problem.import_file(spec.reference_path, "reference")
        args, kwargs = problem.init_inputs(module, backend)
        model = problem.build_model(getattr(module, spec.entry_point), args, kwargs, backend)
        with open(spec.candidate_path) as f:
            source = f.read()
        _, seed = conn.recv()  # ("reference", seed): before the trace, so nothing of the candidate's is here yet
        inputs = problem.make_inputs(module, seed, backend)
        capture = SelectionCapture()
        ref_out, ref_counts = count_reference(model, inputs, capture)
        del model
    except (EOFError, OSError):
        return
    except Exception as e:
        protocol.send(
            conn,
            {
                "type": "modelled",
                "verdict": "infra",
                "message": f"reference: {type(e).__name__}: {e}"[:500],
                "cand_s": 0.0,
                "ref_s": 0.0,
                "cand": {},
                "ref": {},
                "launches": [],
            },
        )
        return
    try:  # from here on every failure is the trace's: its payload, its kernels, its memory
        _, trace, payload, committed = conn.recv()
        reply = model_candidate(
            trace, payload, committed, source, spec.workdir, inputs, ref_out, ref_counts, spec.options, capture.sources
        )
    except Exception as e:  # a replay that breaks the trusted side's code is still the candidate's trace
        reply = {
            "type": "modelled",
            "verdict": "mismatch",
            "message": f"replay failed: {type(e).__name__}: {e}"[:500],
            "cand_s": 0.0,
            "ref_s": 0.0,
            "cand": {},
            "ref": {},
            "launches": [],
        }
    protocol.send(conn, reply)


def trace_locally(
    reference_source: str,
    candidate_source: str,
    workdir: str,
    trace_seed: int = 1,
    replay_seed: int = 2,
    entry_point: str = "Model",
) -> dict[str, Any]:
    """Trace the candidate and count the reference in this process: the parts model_candidate takes. For
    benchmarks and tests of the model only (no isolation: only for candidates you trust); the verifier
    does the same across its sandboxed children."""
    from drkernel.verify.cost_model import trace as tracing
    from drkernel.verify.judging.backends import make_backend

    backend = make_backend("cpu")
    os.makedirs(workdir, exist_ok=True)
    paths = {name: os.path.join(workdir, f"{name}.py") for name in ("reference", "candidate")}
    for name, text in (("reference", reference_source), ("candidate", candidate_source)):
        with open(paths[name], "w") as f:
            f.write(text)
    ref_module = problem.import_file(paths["reference"], "reference")
    args, kwargs = problem.init_inputs(ref_module, backend)
    ref_model = problem.build_model(getattr(ref_module, entry_point), args, kwargs, backend)
    cand_module = problem.import_file(paths["candidate"], "candidate")
    cand_model = problem.build_model(getattr(cand_module, entry_point + "New"), args, kwargs, backend)
    committed, state = tracing.commit_state(cand_model, vars(cand_module))
    seen = problem.make_inputs(ref_module, trace_seed, backend)
    with gpu_dot.emulated():  # as in the verifier's candidate process (the fork-server installs it)
        header, payload = tracing.record(lambda: cand_model(*seen), seen, state, _flatten)
    trace = protocol.validate({"type": "trace", **header})
    unseen = problem.make_inputs(ref_module, replay_seed, backend)
    capture = SelectionCapture()
    ref_out, ref_counts = count_reference(ref_model, unseen, capture)
    os.makedirs(os.path.join(workdir, "replay"), exist_ok=True)
    return {
        "trace": {k: v for k, v in trace.items() if k not in ("type", "payload")},
        "payload": payload,
        "committed": committed,
        "candidate_source": candidate_source,
        "workdir": os.path.join(workdir, "replay"),
        "inputs": unseen,
        "ref_out": ref_out,
        "ref_counts": ref_counts,
        "selection": capture.sources,
    }


def model_locally(
    reference_source: str, candidate_source: str, workdir: str, options: VerifyOptions, **kwargs: Any
) -> dict[str, Any]:
    """trace_locally, then the trusted judgement of model_candidate."""
    return model_candidate(**trace_locally(reference_source, candidate_source, workdir, **kwargs), options=options)
