"""What the static gate allows and denies, by name: modules, paths, attributes, builtins, Triton's language.

Names are the first filter; the gate then follows every path to the real object it reaches
(gate_objects) and decides on that object, so a name missing here is still judged by what it is.
"""

from __future__ import annotations

import re

# Modules a candidate may import (exactly these, or as `from <module> import <name>`; the imported
# name is then checked like an attribute of the module).
ALLOWED_MODULES = frozenset(
    {
        "torch",
        "torch.nn",
        "torch.nn.functional",
        "torch.nn.init",
        "torch.nn.parameter",
        "torch.autograd",
        "torch.cuda",
        "torch.npu",
        "torch_npu",  # honest Ascend kernels import it to register the device; its APIs meet the same rules
        "triton",
        "triton.language",
        "triton.language.math",
        "triton.language.extra",
        "triton.language.extra.libdevice",
        "triton.language.extra.cuda",
        "triton.language.extra.cuda.libdevice",
        "triton.language.extra.hip",
        "triton.language.extra.hip.libdevice",
        "torch.utils.checkpoint",
        "math",
        "functools",
        "typing",
        "__future__",
        "itertools",
        "collections",
        "collections.abc",
        "random",
    }
)
# Dotted paths (and everything under them) that stay closed although their root module is allowed.
DENIED_PATHS = (
    "torch.compile",
    "torch.jit",
    "torch.utils",
    "torch.hub",
    "torch.library",
    "torch.load",
    "torch.save",
    "torch.multiprocessing",
    "torch.distributed",
    "torch.autograd.profiler",
    "torch.autograd.graph",
    "torch.package",
    "torch.export",
    "torch.fx",
    "torch.onnx",
    "torch.testing",
    "torch.random",
    "torch.seed",
    "torch.overrides",
    "torch.profiler",
    "torch.classes",
    "torch.cuda.memory",
    "torch.cuda.tunable",  # TunableOp reads and writes result files at any path (set_filename, read_file, ...)
    "torch.cuda.gds",  # cuFile: GdsFile opens any path
    "torch.cuda.list_gpu_processes",  # every process on the device: the pids of the judge and reference runner
    "torch.npu.memory",
    "torch_npu.npu.memory",
    "torch_npu.utils",
    "torch_npu.contrib",
    "torch_npu.dynamo",
    "torch_npu.distributed",
    "torch_npu.multiprocessing",
    "torch_npu.testing",
    "triton.knobs",
    "triton.runtime",
    "triton.compiler",
    "triton.compile",
    "triton.testing",
    "triton.tools",
    "triton.backends",
    "triton.profiler",
    "triton.language.extra.libdevice.inline_asm_elementwise",
    "torch.serialization",
    "torch.from_file",
    "torch.ops.import_module",
    "torch.ops.load_library",
    "torch.storage",
    "torch.UntypedStorage.from_file",
    "torch.TypedStorage.from_file",
    # process-wide numerics and execution switches: eager matmuls in TF32/bf16 against an fp32 reference,
    # kernels compiled or threaded outside the harness's sight (issue 34)
    "torch.backends",
    "torch.compiler",
    "torch.nn.parallel",
    "torch.nn.DataParallel",
    "torch.set_float32_matmul_precision",
    "torch.set_default_dtype",
    "torch.set_default_tensor_type",
    "torch.set_default_device",
    "torch.set_flush_denormal",
    "torch.use_deterministic_algorithms",
    "torch.set_deterministic_debug_mode",
    "torch.set_num_threads",
    "torch.set_num_interop_threads",
    "torch.cuda.set_device",
    "torch.cuda.jiterator",
    # native loaders, writers and TorchScript entry points at torch's top level (red team N2)
    "torch.PyTorchFileWriter",
    "torch.PyTorchFileReader",
    "torch.import_ir_module",
    "torch.import_ir_module_from_buffer",
    "torch.parse_ir",
    "torch.fork",
    "torch.wait",
    "torch.Future",
    "torch.FileCheck",
    "torch.CompilationUnit",
    "torch.ScriptFunction",
    "torch.ScriptModule",
    "torch.set_anomaly_enabled",
    "torch.autograd.set_detect_anomaly",
    "torch.autograd.detect_anomaly",
    "torch.init_num_threads",
    # Triton objects that make a kernel, or run Python in one, outside a gated `@triton.jit` def
    "triton.JITFunction",
    "triton.KernelInterface",
    "triton.constexpr_function",
    "triton.set_allocator",
    "triton.AsyncCompileMode",
    "triton.FutureKernel",
    "triton.MockTensor",
    "functools.cached_property",
    "functools.update_wrapper",  # copies attributes named by the caller (assigned=/updated=)
    "collections.namedtuple",  # fields named by strings (a `data_ptr` field on an object handed to a launch)
    "torch.cuda.nccl",
    "torch.cuda.comm",
)
OPEN_UNDER_DENIED = ("torch.utils.checkpoint.", "torch.utils.checkpoint")  # recomputation only
# Attribute names closed on any object: streams and graphs (work the harness's events do not see,
# replayed results), hook and mode machinery, profilers, seeds, native loading, frame objects.
DENIED_ATTRS = frozenset(
    {
        "Stream",
        "ExternalStream",
        "StreamContext",
        "stream",
        "set_stream",
        "wait_stream",
        "CUDAGraph",
        "graph",
        "graphs",
        "make_graphed_callables",
        "TorchFunctionMode",
        "TorchDispatchMode",
        "overrides",
        "profiler",
        "record_function",
        "cpp_extension",
        "load_inline",
        "load_library",
        "knobs",
        "launch_enter_hook",
        "launch_exit_hook",
        "initial_seed",
        "get_rng_state",
        "set_rng_state",
        "manual_seed",
        "settrace",
        "setprofile",
        "f_back",
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_code",
        "tb_frame",
        "tb_next",
        "gi_frame",
        "gi_code",
        "cr_frame",
        "cr_code",
        "ag_frame",
        "ag_code",
        "inline_asm_elementwise",
        "get_device_module",
        "get_type_hints",
        "get_args",
        "get_origin",
        "mro",
        # files and loaders on any object (`ndarray.tofile`, `Storage.from_file`, `torch.ops.import_module`)
        "tofile",
        "fromfile",
        "from_file",
        "dump",
        "dumps",
        "save",
        "import_module",
        "ctypes",
        # the candidate's device-memory cap (candidate_process) is the harness's to set
        "set_per_process_memory_fraction",
        # numerics switches on any object that carries them (torch.backends.*.matmul, cudnn, ...)
        "allow_tf32",
        "allow_fp16_reduced_precision_reduction",
        "allow_bf16_reduced_precision_reduction",
        "allow_fp16_accumulation",
        "fp32_precision",
        "set_float32_matmul_precision",
        "preferred_blas_library",
        "preferred_linalg_library",
        "preferred_rocm_fa_library",
        "set_default_dtype",
        "set_default_device",
        "set_flush_denormal",
        "parallel_apply",
        "data_parallel",
        "DataParallel",
        # eager ops in reduced precision: a context left open (a generator that yields inside it) keeps it on
        "autocast",
    }
)
# Attribute-name patterns closed on any object: hooks, and switches of autocast's global state.
DENIED_ATTR_PATTERN = re.compile(r"register_.*hook|register_module_|set_autocast|_set_autocast")
# Prefixes any name built at run time could grow into (a computed getattr name whose literal head is a
# prefix of one of these could spell it).
DENIED_PREFIXES = ("register_", "set_autocast")
# Private library helpers honest PyTorch code calls (nn.Linear's own init recipe, conv argument helpers).
ALLOWED_PRIVATE = frozenset(
    {
        "torch.nn.init._calculate_fan_in_and_fan_out",
        "torch.nn.init._calculate_correct_fan",
        "torch.nn.modules.utils._pair",
        "torch.nn.modules.utils._single",
        "torch.nn.modules.utils._triple",
        "torch.nn.modules.utils._ntuple",
    }
)
# Functions of a denied module re-exported where honest code calls them (read-only or cache release).
ALLOWED_REEXPORTS = frozenset(
    {
        "torch.cuda.empty_cache",
        "torch.cuda.memory_allocated",
        "torch.cuda.max_memory_allocated",
        "torch.cuda.memory_reserved",
        "torch.cuda.max_memory_reserved",
        "torch.cuda.mem_get_info",
    }
)
# Modules an attribute path may pass through or name (red-team issue 34, F1/F2: any torch submodule used to be
# reachable, and some hold getattr-by-string helpers: torch.ao...getattr_from_fqn, operator.attrgetter re-exports).
# Measured: the honest corpora and 1,717 external LLM-written kernels pass through only these.
TRAVERSABLE_MODULES = ALLOWED_MODULES | {
    "torch.linalg",
    "torch.fft",
    "torch.special",
    "torch.ops",
    "torch.ops.aten",
    "torch.nn.modules",
    "torch.nn.modules.utils",
    "torch.utils",  # only to reach torch.utils.checkpoint: everything else under it is a denied path
    "triton.language.extra.cuda",
    "triton.language.extra.hip",
}
# Where a function or class reached through those may be defined: a module here or under one (".": a prefix).
# Not here, so refused: operator (attrgetter), weakref (finalize runs code later), enum/functools.cached_property
# style descriptors, torch.utils/testing/overrides/ao/fx/jit/_dynamo/func/_utils (classproperty) helpers, types.
CALLABLE_HOMES = frozenset(
    {
        "torch",
        "torch._C",
        "torch._C.",
        "torch._tensor",
        "torch._tensor_str",
        "torch._ops",
        "torch._ops.",
        "torch.functional",
        "torch.return_types",
        "torch.types",
        "torch._jit_internal",
        "torch._linalg_utils",
        "torch._lowrank",
        "torch._lobpcg",
        "torch.nn",
        "torch.nn.modules.",
        "torch.nn.parameter",
        "torch.nn.init",
        "torch.nn.functional",
        "torch.autograd",
        "torch.autograd.function",
        "torch.autograd.grad_mode",
        "torch.autograd.variable",
        "torch.cuda",
        "torch.cuda.streams",  # Event (Stream and ExternalStream are denied by name)
        "torch.linalg",
        "torch.fft",
        "torch.special",
        "torch.utils.checkpoint",
        "torch_npu",
        "torch_npu.",
        "triton",
        "triton.language",
        "triton.language.",
        "triton.runtime.jit",
        "triton.runtime.autotuner",
        "triton.runtime.interpreter",
        "triton.runtime.errors",
        "triton.errors",
        "triton.compiler.errors",
        "triton._C.libtriton.ir",
        "typing",
        "typing_extensions",
        "math",
        "collections",
        "_collections",
        "_collections_abc",
        "collections.abc",
        "random",
        "_random",
        "itertools",
        "functools",
        "_functools",
        "builtins",
        "abc",
        "_abc",
        "numbers",
    }
)
# Builtins that run code, reach namespaces or files, read/write attributes by name or create classes,
# however they are reached (a module attribute bound to one of these hides it from the name rules).
DANGEROUS_BUILTINS = (
    "eval",
    "exec",
    "compile",
    "open",
    "globals",
    "locals",
    "vars",
    "breakpoint",
    "__import__",
    "__build_class__",
    "getattr",
    "setattr",
    "delattr",
    "hasattr",
    "type",
    "input",
    "property",
)
# Builtins that evaluate code, reach namespaces or files, or read/write attributes by computed name.
DENIED_BUILTINS = frozenset(
    {"eval", "exec", "compile", "open", "globals", "locals", "vars", "breakpoint", "__import__", "__build_class__"}
)
ATTR_BUILTINS = frozenset({"getattr", "setattr", "delattr", "hasattr"})
# The builtins a candidate may name without binding them; any other name it reads must be bound in its own
# source (a name put into its globals by a library call, e.g. functools.update_wrapper(f, g, updated=("__globals__",)),
# would otherwise be a module or builtin no rule saw).
SAFE_BUILTINS = frozenset(
    {
        *("abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr", "classmethod"),
        *("complex", "dict", "divmod", "enumerate", "filter", "float", "format", "frozenset", "hex"),
        *("int", "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "object", "oct"),
        *("ord", "pow", "print", "range", "repr", "reversed", "round", "set", "slice", "sorted", "staticmethod"),
        *("str", "sum", "super", "tuple", "zip", "NotImplemented", "Ellipsis"),
        *("BaseException", "Exception", "ArithmeticError", "AssertionError", "AttributeError", "IndexError"),
        *("KeyError", "LookupError", "NotImplementedError", "OverflowError", "RuntimeError", "StopIteration"),
        *("TypeError", "ValueError", "ZeroDivisionError", "ImportError", "MemoryError", "RecursionError"),
        *("FloatingPointError", "Warning", "UserWarning", "DeprecationWarning", "RuntimeWarning", "SystemExit"),
    }
)
# (id and hash are not here: an object's address is what a Triton pointer, which the CPU interpreter does not bound
# in the candidate's process, would need to write into it; red team F6.)
# What Triton's interpreter duck-types a launch argument by and calls inside the launch (red team F7): a candidate
# object may not carry them (no def, class attribute, attribute store or setattr of these names).
TENSOR_PROTOCOL = frozenset({"data_ptr", "untyped_storage", "new_empty", "storage_offset"})
# Builtins refused in any use: `property(...)` makes a class attribute run code on every read.
REFUSED_NAMES = frozenset({"property"})
# What Triton's code generator resolves inside a jit body (CodeGenerator.builtin_namespace, Triton 3.x),
# less getattr/hasattr/print: the only builtins a kernel body may name, and all the replay gives it.
JIT_BUILTINS = frozenset({"len", "list", "range", "float", "int", "isinstance", "min", "max"})
# Methods of triton.language.tensor and tensor descriptors: the only calls on a local value in a jit body.
TENSOR_METHODS = frozenset(
    {
        "abs",
        "advance",
        "argmax",
        "argmin",
        "associative_scan",
        "atomic_add",
        "atomic_and",
        "atomic_cas",
        "atomic_load",
        "atomic_max",
        "atomic_min",
        "atomic_or",
        "atomic_poll",
        "atomic_store",
        "atomic_xchg",
        "atomic_xor",
        "broadcast_to",
        "cast",
        "cdiv",
        "ceil",
        "cos",
        "cumprod",
        "cumsum",
        "erf",
        "exp",
        "exp2",
        "expand_dims",
        "flip",
        "floor",
        "gather",
        "histogram",
        "item",
        "log",
        "log2",
        "logical_and",
        "logical_or",
        "max",
        "min",
        "permute",
        "ravel",
        "reduce",
        "reduce_or",
        "reshape",
        "rsqrt",
        "sigmoid",
        "sin",
        "softmax",
        "sort",
        "split",
        "sqrt",
        "sqrt_rn",
        "store",
        "load",
        "scatter",
        "sum",
        "to",
        "trans",
        "view",
        "xor_sum",
    }
)
# Attributes a kernel body may read on a Triton value (tensor, dtype, constexpr, descriptor), besides its methods.
JIT_VALUE_ATTRS = frozenset(
    {
        "T",
        "dtype",
        "shape",
        "numel",
        "type",
        "value",
        "element_ty",
        "name",
        "scalar",
        "primitive_bitwidth",
        "int_bitwidth",
        "int_signedness",
        "fp_mantissa_width",
        "exponent_bias",
        "get_int_max_value",
        "get_int_min_value",
        "is_bf16",
        "is_block",
        "is_bool",
        "is_floating",
        "is_fp16",
        "is_fp32",
        "is_fp64",
        "is_fp8",
        "is_int",
        "is_int1",
        "is_int8",
        "is_int16",
        "is_int32",
        "is_int64",
        "is_int_signed",
        "is_int_unsigned",
        "is_ptr",
        "is_standard_floating",
        "is_uint8",
        "is_uint16",
        "is_uint32",
        "is_uint64",
    }
)
# Modules whose names a kernel body may use: Triton's language (and its libdevice wrappers) and math.
JIT_MODULES = frozenset(
    {
        "triton.language",
        "triton.language.math",
        "triton.language.extra",
        "triton.language.extra.libdevice",
        "triton.language.extra.cuda",
        "triton.language.extra.cuda.libdevice",
        "triton.language.extra.hip",
        "triton.language.extra.hip.libdevice",
        "math",
    }
)
JIT_HOST_CALLS = frozenset({"triton.cdiv", "triton.next_power_of_2"})
# Triton operations that call a function they are handed: (its position, its keyword); it must be one of
# the file's jit functions (the interpreter calls `.fn` of whatever it gets, as plain Python).
JIT_FUNCTION_SLOTS = {
    "triton.language.core.reduce": (2, "combine_fn"),
    "triton.language.core.associative_scan": (2, "combine_fn"),
    "triton.language.core.map_elementwise": (0, "scalar_fn"),
}
JIT_METHOD_SLOTS = {"reduce": (1, "combine_fn"), "associative_scan": (1, "combine_fn")}
# Kernel names that imitate library kernels as the profiler shows them (cuBLAS/cuDNN/CUTLASS GEMMs,
# Inductor, NCCL): a candidate kernel so named could claim a library kernel's time by name.
# Only identifiers can collide exactly; ATen's templated names (`void at::native::...<...>`) cannot.
LIBRARY_KERNEL_NAME = re.compile(
    r"^(nvjet_|sm\d+_|ampere_|volta_|turing_|hopper_|blackwell_|cutlass|xmma|"
    r"triton_(poi|red|per|tem)_|ncclDevKernel)"
)
GLOBAL_CLASSES = frozenset(
    {
        "torch.Tensor",
        "torch.nn.Module",
        "torch.nn.Parameter",
        "torch.autograd.Function",
        "torch.nn.modules.Module",
        "torch.nn.modules.module.Module",
        "triton.JITFunction",
        "triton.language.tensor",
    }
)
TENSOR_CLASSES = frozenset({"torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase"})
# Receivers that are the candidate's own module/function objects (private attributes allowed; no rebinding).
OWN_RECEIVERS = frozenset({"self", "ctx"})
FRESH_BUILTINS = frozenset({"list", "dict", "set", "tuple", "object", "int", "float", "str", "bool", "range"})
DUNDER_DEFS = frozenset({"__init__"})  # the only dunder a measured honest corpus defines or calls

# Triton's launch machinery calls these candidate functions inside a launch (so inside the kernel time the
# CPU interpreter measures): (positional parameters allowed, keywords that take a function). Each function
# must be a lambda of scalar arithmetic on its arguments (SCALAR_HOOK_CALLS, SCALAR_HOOK_METHODS).
# Calls whose extra arguments name attributes to copy (functools.wraps' assigned=/updated=): at most this many
# positional arguments and no keywords.
PLAIN_CALLS = {"functools.wraps": 1}
LAUNCH_HOOKS = {
    "triton.runtime.autotuner.autotune": (2, ("prune_configs_by", "pre_hook", "post_hook", "do_bench")),
    "triton.runtime.autotuner.Config": (4, ("pre_hook",)),
    "triton.runtime.autotuner.heuristics": (1, ()),
}
SCALAR_HOOK_CALLS = frozenset({"min", "max", "int", "float", "bool", "len", "abs", "round"})
SCALAR_HOOK_METHODS = frozenset({"numel", "stride", "size", "dim", "element_size", "is_contiguous"})
