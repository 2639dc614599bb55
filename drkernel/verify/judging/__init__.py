"""The trusted judge: inputs, the comparison of outputs, timing and its stopping rule, and the device timers."""
