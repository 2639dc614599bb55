"""Multi-turn rollouts without Ray: the episode loop and the trajectory it produces."""
