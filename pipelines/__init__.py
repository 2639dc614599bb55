"""Entry points: CLI, train, evaluate, prepare-data, sft, demo, serve."""
