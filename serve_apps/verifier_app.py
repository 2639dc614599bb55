"""Builds the verifier application: HTTP ingress -> verifier replicas (one device each).

This is the `import_path` of configs/serve_verifier.yaml (`serve run` / `serve deploy`) and what
`drkernel serve verifier` runs; `args` are the fields of VerifierServeConfig.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import ValidationError
from ray.serve import Application

from drkernel.config.serve import VerifierServeConfig
from serve_apps.verifier import VerifierReplica
from serve_apps.verifier_http import VerifierIngress


def build_app(args: dict[str, Any]) -> Application:
    """The Serve application for `args` (unknown keys are errors)."""
    try:
        cfg = args if isinstance(args, VerifierServeConfig) else VerifierServeConfig.model_validate(args or {})
    except ValidationError as e:
        raise ValueError(f"invalid verifier app args: {e}") from None
    backpressure = {"status_code": 503, "retry_after_s": cfg.retry_after_s}
    verifier = VerifierReplica.options(
        ray_actor_options=cfg.replica_actor_options(),
        autoscaling_config=cfg.autoscaling.to_serve(),
        max_ongoing_requests=cfg.max_ongoing_requests,
        max_queued_requests=cfg.max_queued_requests,
        backpressure_config=backpressure,
    ).bind(cfg.model_dump())
    token = os.environ.get(cfg.api_token_env)
    ingress_actor: dict[str, Any] = {"num_cpus": 0}
    if token:  # the ingress replica may live in a worker that did not inherit this environment
        ingress_actor["runtime_env"] = {"env_vars": {cfg.api_token_env: token}}
    return VerifierIngress.options(
        num_replicas=1,  # one place holds the admission count and /stats
        ray_actor_options=ingress_actor,
        max_ongoing_requests=cfg.queue_limit + 16,  # room for /healthz and /stats beyond the admitted
        max_queued_requests=cfg.queue_limit,
        backpressure_config=backpressure,
    ).bind(verifier, cfg.model_dump())
