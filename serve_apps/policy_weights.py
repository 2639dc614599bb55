"""A policy replica that (re)starts while a job trains catches up with the last published weights first.

Serve restarts a dead replica from the deployment's arguments, i.e. the SFT weights at version 0; nothing
would give it the weights the job has published since. So the job's weight publisher (actors/weight_sync.py)
keeps the latest push's bucket refs in a small named actor, the weight store (serve_apps/runtime/weight_store.py),
named after the policy app.
A replica starting looks the store up in its constructor, fetches those buckets from the object store and
loads them through the engine's `load_weights(version, buckets, manifest)` before Serve routes it any request.
A replica of an app that no job publishes to (no store) serves the weights it was started with.

The publisher writes the store before it broadcasts a version, so a replica starting during a push gets that
version either from the store or from the push's retry (the publisher re-broadcasts until every replica has
acknowledged). No window exists in which a replica could start on weights older than the last published ones.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import ray

from serve_apps.runtime.weight_store import STORE_NAMESPACE, store_name

log = logging.getLogger(__name__)


async def catch_up(engine: Any, app_name: str) -> int:
    """Load the store's latest published weights into `engine` when they are newer than its own; returns the
    version the engine holds afterwards (its own when there is no store or nothing newer).

    A store that exists but cannot be read raises: a replica must not start on weights it knows are stale.
    """
    try:
        store = ray.get_actor(store_name(app_name), namespace=STORE_NAMESPACE)
    except ValueError:
        return engine.version
    latest = await store.latest.remote()
    if latest is None:
        return engine.version
    version, bucket_refs, manifest = latest
    if version <= engine.version:
        return engine.version
    buckets = list(await asyncio.gather(*bucket_refs))
    await engine.load_weights(version, buckets, manifest)
    del buckets
    log.info("policy replica of %s started on published weights version %d", app_name, version)
    return engine.version
