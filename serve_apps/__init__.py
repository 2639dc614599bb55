"""Ray Serve deployments: the verifier (+ HTTP ingress) and the policy."""
