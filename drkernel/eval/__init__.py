"""Evaluation of a policy the way KernelBench and the DR.Kernel paper score one (no Ray in here)."""
