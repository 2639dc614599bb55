"""Ray Serve deployments: the verifier (+ HTTP ingress) and the policy."""

from drkernel.log import quiet_libraries

quiet_libraries()  # every worker importing this layer drops library notices that say nothing to a user
