"""Where a job's actors and replicas landed: how many nodes host those that reserve resources, and which of them
sit on the head node (logged once, at the first batch; the two-node test reads it)."""

from __future__ import annotations

import ray

from drkernel.log import get_logger

log = get_logger("train")


def nodes_used(apps: list[str]) -> int:
    """Nodes hosting this job's actors and the replicas of its Serve `apps` that reserve resources; 0 when the
    cluster cannot say (no dashboard, no state API)."""
    from ray.util.state import list_actors

    context = ray.get_runtime_context()
    job_id = context.get_job_id()
    if not ray._private.worker.get_dashboard_url():  # no state API: asking would wait on retries, or elsewhere
        log.info("actor placement unknown (this cluster runs no dashboard)")
        return 0
    try:  # this job's cluster by its own address: without it the state API may pick another cluster on the host
        alive = list_actors(address=context.gcs_address, filters=[("state", "=", "ALIVE")], limit=10_000, detail=True)
    except Exception as e:  # the state API needs the dashboard; placement is only reported
        log.info("actor placement unknown (Ray state API unavailable: %s)", type(e).__name__)
        return 0
    heads = {n["NodeID"] for n in ray.nodes() if n["Alive"] and "node:__internal_head__" in n["Resources"]}
    mine = [
        a
        for a in alive
        if (a.job_id == job_id or any(app in (a.name or "") for app in apps))
        and any(v > 0 for v in (a.required_resources or {}).values())
    ]
    nodes = {a.node_id for a in mine}
    on_head = sorted(a.class_name for a in mine if a.node_id in heads)
    log.info("%d actors and replicas of this job on %d node(s); on the head node: %s", len(mine), len(nodes), on_head)
    return len(nodes)
