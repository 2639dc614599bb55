"""Ray actors: trajectory (staleness) queue, rollout workers, trainer group, weight publisher."""
