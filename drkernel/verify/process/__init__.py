"""An evaluation's children: the warm fork-server, spares, sandbox and seccomp, and the messages they exchange."""
