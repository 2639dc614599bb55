"""Multi-turn rollouts without Ray: the episode loop and its token bookkeeping (the trajectory it produces is a
drkernel.types type)."""
