"""The training run's Ray-free parts: checkpoints and metric sinks."""
