"""DR.Kernel: the method itself (config, data, verification, RL maths, agent logic). No Ray imports."""

__version__ = "0.1.0"
