"""The trusted side of an evaluation: computes reference outputs and judges the candidate's.

It runs only the reference code, regenerates every input from its seed (so it never trusts the
candidate's copy), and compares what the candidate child sends. The reference output of the next
correctness seed is computed while the candidate is still busy, so comparison adds little latency.

Messages to the parent: ("ready", info), ("judged", phase, tag, record), ("infra", message).
"""

from __future__ import annotations

import traceback
from typing import Any

import torch

from drkernel.verify import problem, tensors
from drkernel.verify.devices import Backend, env_for, make_backend
from drkernel.verify.sandbox import capture_output, isolate


FINGERPRINT_ELEMENTS = 1 << 20


def _fingerprint(values: list[Any]) -> tuple[Any, ...]:
    """Cheap summary of outputs, to see whether distinct inputs gave distinct outputs.

    A strided sample of at most FINGERPRINT_ELEMENTS values: a float64 copy of a multi-gigabyte
    output would cost as much memory as the evaluation itself."""
    parts: list[Any] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            flat = v.detach().reshape(-1)
            d = flat[:: max(1, flat.numel() // FINGERPRINT_ELEMENTS)].double()
            parts.append((tuple(v.shape), float(torch.nan_to_num(d).sum()), float(torch.nan_to_num(d * d).sum())))
        else:
            parts.append(v)
    return tuple(parts)


class ReferenceJudge:
    def __init__(self, spec: dict[str, Any], backend: Backend) -> None:
        self.spec, self.backend = spec, backend
        self.module = problem.import_file(spec["reference_path"], "reference")
        args, kwargs = problem.init_inputs(self.module, backend)
        self.model = problem.build_model(getattr(self.module, spec["entry_point"]), args, kwargs, backend)
        self._cache: dict[int, tuple[list[Any], list[Any], bool, bool]] = {}
        self.cand_prints: dict[str, tuple[Any, ...]] = {}
        self.ref_prints: dict[str, tuple[Any, ...]] = {}

    def expected(self, seed: int) -> tuple[list[Any], list[Any], bool, bool]:
        """(reference outputs, pristine inputs, reference aliases its inputs, reference mutates them)."""
        if seed not in self._cache:
            self._cache = {}  # free the previous seed's tensors before making the next ones
            pristine = problem.make_inputs(self.module, seed, self.backend)
            work = [x.clone() if isinstance(x, torch.Tensor) else x for x in pristine]
            with torch.no_grad():
                out = tensors.flatten(self.model(*work))
            self.backend.synchronize()
            aliases = tensors.aliases_any(out, work)
            out = [o.clone() if isinstance(o, torch.Tensor) and aliases else o for o in out]
            self._cache = {seed: (out, pristine, aliases, not tensors.identical(pristine, work))}
        return self._cache[seed]

    def judge(self, tag: str, seed: int, packed_out: list[Any], packed_in: list[Any], cand_aliases: bool) -> dict[str, Any]:
        ref_out, pristine, ref_aliases, ref_mutates = self.expected(seed)
        cand_out = tensors.unpack(packed_out, self.backend.device)
        cand_in = tensors.unpack(packed_in, self.backend.device)
        ok, message, stats = tensors.compare(ref_out, cand_out, self.spec["atol"], self.spec["rtol"])
        record: dict[str, Any] = {"seed": seed, "passed": ok, "message": message, **stats}
        record["aliases_input"] = bool(cand_aliases and not ref_aliases)
        record["mutates_input"] = bool(not ref_mutates and not tensors.identical(pristine, cand_in))
        self.cand_prints[tag] = _fingerprint(cand_out)
        self.ref_prints[tag] = _fingerprint(ref_out)
        return record

    def distinct_outputs(self) -> tuple[bool, str]:
        """Two seeds whose reference outputs differ must not give the candidate the same outputs."""
        tags = list(self.cand_prints)
        for i, a in enumerate(tags):
            for b in tags[i + 1:]:
                if self.ref_prints[a] != self.ref_prints[b] and self.cand_prints[a] == self.cand_prints[b]:
                    return False, f"same candidate output for {a} and {b} while the reference outputs differ"
        return True, ""


def main(spec: dict[str, Any], parent: Any, candidate: Any) -> None:
    """Entry point of the trusted child."""
    try:
        isolate(spec["workdir"], on_accelerator=spec["device"] != "cpu", memory_limit_mb=None,
                env=env_for(spec["device"]))
        capture_output(spec["workdir"])
        backend = make_backend(spec["device"])
        judge = ReferenceJudge(spec, backend)
        judge.expected(spec["correct_seeds"][0])
    except Exception as e:
        parent.send(("infra", f"reference failed: {type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}"))
        return
    parent.send(("ready", {}))
    seeds = spec["correct_seeds"]
    try:
        while True:
            try:
                msg = candidate.recv()
            except EOFError:
                return
            kind, tag, seed, packed_out, packed_in, aliases = msg
            record = judge.judge(str(tag), seed, packed_out, packed_in, aliases)
            if kind == "reval":
                ok, why = judge.distinct_outputs()
                record["distinct_outputs"], record["distinct_message"] = ok, why
            parent.send(("judged", kind, tag, record))
            del packed_out, packed_in
            backend.release_memory()
            candidate.send(("ack", tag))
            if kind == "trial" and record["passed"] and tag + 1 < len(seeds):
                judge.expected(seeds[tag + 1])  # next reference output while the candidate works
    except Exception as e:
        parent.send(("infra", f"reference judge failed: {type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}"))
