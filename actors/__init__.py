"""Ray actors: trajectory (staleness) queue, rollout workers, trainer group, weight publisher."""

from drkernel.log import quiet_libraries

quiet_libraries()  # every worker importing this layer drops library notices that say nothing to a user
