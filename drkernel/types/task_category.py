"""The kinds of computation the task library sorts its tasks into (read by the library loader and the SFT
config, which picks categories to train on)."""

from typing import Literal

Category = Literal["elementwise", "reduction", "norm", "matmul", "fused"]
