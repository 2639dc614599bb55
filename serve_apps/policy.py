"""The policy deployment: a fixed number of replicas, each one engine, concurrent requests batched (by
@serve.batch for the transformers engine, by vLLM's continuous batching for the vLLM engines).

In-cluster callers (rollout workers) use the handle; the trainer's weight publisher reaches every replica
with Serve's broadcast:

    handle = policy_handle(cfg.app_name)
    out = await handle.generate.remote(prompt_ids, SamplingParams(temperature=1.0))      # GenerateOutput
    acks = await handle.broadcast("load_weights", version, bucket_refs, manifest).results_async()
    assert len(acks) == cfg.num_replicas      # then, and only then, the version advances

`bucket_refs` is a list of ObjectRefs nested in a list, so Ray does not resolve them in transit: each replica
fetches them itself inside `load_weights` (timed), copies them in place and drops them. A push waits for the
batch that is running and blocks new ones meanwhile; the running batch finishes on the old weights and
is stamped with the old version (serve_apps/policy_engine.py). A replica (re)started while a job runs loads
the job's last published weights before it takes traffic (serve_apps/policy_weights.py).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import ray
from ray import serve
from ray.serve import Application
from ray.serve.handle import DeploymentHandle

from drkernel.config.train import PolicyConfig
from drkernel.placement import ray_options, resolve_kind
from drkernel.types.sampling import GenerateOutput, SamplingParams
from drkernel.types.weights import WeightsManifest
from serve_apps.policy_engine import make_engine
from serve_apps.policy_weights import catch_up
from serve_apps.runtime.run_series import POLICY_SERIES, RunGauges

DEPLOYMENT_NAME = "PolicyReplica"
CONTROL_SLOTS = 8  # request slots beyond two batches, so load_weights/version/stats never queue behind generation


def policy_handle(app_name: str) -> DeploymentHandle:
    """Handle to the policy replicas of app `app_name` (PolicyConfig.app_name), for callers in the cluster."""
    return serve.get_deployment_handle(DEPLOYMENT_NAME, app_name=app_name)


@serve.deployment(name=DEPLOYMENT_NAME)
class PolicyReplica:
    """One engine. With the transformers engine, requests arriving within `batch_wait_timeout_s` share one
    generate call; a vLLM engine takes each request as it comes and batches continuously."""

    async def __init__(self, config: dict[str, Any], model_path: str, run: str = "") -> None:
        self.config = PolicyConfig.model_validate(config)
        self._gauges = RunGauges("policy", POLICY_SERIES, run)
        self.engine = make_engine(self.config, model_path)
        # a replica (re)started mid-run loads the job's last push before Serve routes it any request
        self._started_version = await catch_up(self.engine, serve.get_replica_context().app_name)
        self._generate_batched.set_max_batch_size(self.config.max_batch_size)
        self._generate_batched.set_batch_wait_timeout_s(self.config.batch_wait_timeout_s)
        self._calls = 0  # generate calls of the engine (batches)
        self._requests = 0
        self._largest_batch = 0
        self._tokens = 0

    async def generate(self, prompt_ids: list[int], sampling: SamplingParams | dict[str, Any]) -> GenerateOutput:
        """One response; requests that arrive together run as one batch. Bad requests fail alone."""
        params = sampling if isinstance(sampling, SamplingParams) else SamplingParams.model_validate(sampling)
        prompt = [int(t) for t in prompt_ids]
        self.engine.check_request(prompt, params)
        if not self.engine.batches_itself:
            return await self._generate_batched(prompt, params)
        self._requests += 1
        self._calls += 1
        output = await self.engine.generate(prompt, params)
        self._tokens += len(output.token_ids)
        self._gauges.set({"tokens": self._tokens})
        return output

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.05)  # overridden from the config in __init__
    async def _generate_batched(
        self, prompts: list[list[int]], samplings: list[SamplingParams]
    ) -> list[GenerateOutput]:
        self._calls += 1
        self._requests += len(prompts)
        self._largest_batch = max(self._largest_batch, len(prompts))
        start = time.perf_counter()
        outputs = await self.engine.generate_batch(prompts, samplings)
        tokens = sum(len(o.token_ids) for o in outputs)
        self._tokens += tokens
        self._gauges.set(
            {
                "tokens_per_s": tokens / max(time.perf_counter() - start, 1e-9),
                "batch_size": len(prompts),
                "tokens": self._tokens,
            }
        )
        return outputs

    async def load_weights(
        self, version: int, bucket_refs: list[ray.ObjectRef], manifest: WeightsManifest
    ) -> dict[str, Any]:
        """Fetch the pushed buckets, copy them in once the running batch ends, and acknowledge.

        A repeat of the version already loaded (a publisher retrying after a partial failure) is acknowledged
        without copying; an older version is refused.
        """
        replica = serve.get_replica_context().replica_tag
        if version == self.engine.version:
            return {
                "version": version,
                "replica": replica,
                "loaded": False,
                "get_s": 0.0,
                "wait_s": 0.0,
                "load_s": 0.0,
                "bytes": 0,
            }
        start = time.perf_counter()
        buckets = list(await asyncio.gather(*bucket_refs))  # zero-copy views of the object store on this node
        fetched = time.perf_counter()
        load_s = await self.engine.load_weights(version, buckets, manifest)
        total = time.perf_counter() - fetched
        del buckets  # release the plasma pins now, not at garbage collection
        return {
            "version": version,
            "replica": replica,
            "loaded": True,
            "get_s": fetched - start,
            "wait_s": max(total - load_s, 0.0),
            "load_s": load_s,
            "bytes": manifest.total_bytes,
        }

    async def version(self) -> int:
        return self.engine.version

    async def state_checksum(self) -> str:
        """sha256 of this replica's parameters (equal to drkernel.model.weights.state_checksum of the trainer's)."""
        return await self.engine.state_checksum()

    def __del__(self) -> None:
        """Serve deletes a replica it stops: stop the engine (and a vLLM engine's child process) with it."""
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.close()

    async def check_health(self) -> None:
        """Serve's periodic probe: a dead vLLM engine child or a half-loaded push fails it, and Serve replaces
        the replica instead of letting requests wait on an engine that will never answer."""
        await self.engine.check_health()

    async def stats(self) -> dict[str, Any]:
        """Batching and load counters, for operators and tests."""
        return {
            "replica": serve.get_replica_context().replica_tag,
            "version": self.engine.version,
            "started_version": self._started_version,
            "generate_calls": self._calls,
            "requests": self._requests,
            "largest_batch": self._largest_batch,
            "tokens": self._tokens,
        }


def replica_actor_options(cfg: PolicyConfig) -> dict[str, Any]:
    """Ray resources of one replica: its CPUs and its device share; "auto" is what the cluster offers."""
    kind = resolve_kind(cfg.device, ray.cluster_resources(), "policy.device")
    return ray_options(kind, cfg.cpus_per_replica, cfg.accelerators_per_replica)


def max_ongoing_requests(cfg: PolicyConfig) -> int:
    """Requests one replica accepts at once: two batches for the transformers engine, the engine's running
    sequences for vLLM (it batches continuously), plus control slots so weight pushes never queue."""
    work = 2 * cfg.max_batch_size if cfg.engine == "transformers" else cfg.vllm.max_num_seqs
    return work + CONTROL_SLOTS


def build_policy_app(cfg: PolicyConfig, model_path: str | None = None, run: str = "") -> Application:
    """The policy Serve application: the OpenAI-compatible HTTP ingress in front of `cfg.num_replicas`
    replicas. Run it with `serve.run(app, name=cfg.app_name, route_prefix=cfg.route_prefix)`; it touches no
    other application. `run` tags the replicas' dashboard series."""
    from serve_apps.policy_http import PolicyIngress  # the ingress imports FastAPI; keep it off replica imports

    path = model_path or cfg.model_path
    if not path:
        raise ValueError("no model: pass model_path or set policy.model_path")
    replicas = PolicyReplica.options(
        num_replicas=cfg.num_replicas,
        ray_actor_options=replica_actor_options(cfg),
        max_ongoing_requests=max_ongoing_requests(cfg),
    ).bind(cfg.model_dump(), path, run)
    token_env = cfg.api_token_env
    ingress_actor: dict[str, Any] = {"num_cpus": 0}
    token = os.environ.get(token_env)
    if token:  # the ingress may start in a worker that did not inherit this environment
        ingress_actor["runtime_env"] = {"env_vars": {token_env: token}}
    return PolicyIngress.options(num_replicas=1, ray_actor_options=ingress_actor).bind(replicas, cfg.model_dump(), path)
