"""Ray Serve deployments: the verifier (+ HTTP ingress) and the policy; runtime/ holds the Ray-side pieces that every
layer above drkernel shares (Ray start-up, the run series, the weight store)."""

from drkernel.log import quiet_libraries

quiet_libraries()  # every worker importing this layer drops library notices that say nothing to a user
