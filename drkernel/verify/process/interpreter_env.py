"""First module a CPU fork-server imports: Triton decides interpreter vs compiler when its standard
library (`tl.max`, `tl.sum`, ...) is decorated at import, so the switch must precede `import triton`."""

import os

os.environ["TRITON_INTERPRET"] = "1"
