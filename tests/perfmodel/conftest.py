"""The counters run real Triton kernels in the interpreter: the switch must precede `import triton`."""

import drkernel.verify.process.interpreter_env  # noqa: F401
