"""`drkernel serve verifier`: run the verifier HTTP endpoint on Ray Serve until Ctrl-C.

Starts its own local Ray unless `--address` names a cluster to join (it never picks up some Ray
that happens to run on the machine); deploys serve_apps.verifier_app; blocks; on SIGINT/SIGTERM
removes what it started (Serve and its Ray, or only its own app on a joined cluster). Every setting
(config file, flags, `--set key=value`, host and port, whether the port is free) is checked before
Ray starts, and each problem is one line and exit status 2. It refuses to deploy over a verifier app
it did not deploy, and reports "listening" only once the endpoint answers on that port.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from drkernel.config.base import ConfigError, apply_overrides
from drkernel.log import get_logger, serve_logging_config
from drkernel.placement import resolve_kind
from pipelines.cli import UsageError

log = get_logger("serve")

APP_IMPORT_PATH = "serve_apps.verifier_app:build_app"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("app", choices=["verifier"], help="the application to serve")
    parser.add_argument("--config", type=Path, help="Serve config file (configs/serve_verifier.yaml): its args")
    parser.add_argument(
        "--host", help=f"address to listen on (default {DEFAULT_HOST}; the endpoint runs untrusted code)"
    )
    parser.add_argument("--port", type=int, help=f"HTTP port (default {DEFAULT_PORT})")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda", "npu"], help="device kind of each replica")
    parser.add_argument("--replicas", type=int, help="fixed number of verifier replicas (min = max)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one VerifierServeConfig field, e.g. --set autoscaling.max_replicas=4",
    )
    parser.add_argument(
        "--address",
        "--ray-address",
        dest="address",
        help="Ray cluster to join (e.g. 127.0.0.1:6379); default: start a new local Ray",
    )
    parser.add_argument("--num-cpus", type=float, help="CPUs of a newly started local Ray")
    parser.add_argument("--verbose", action="store_true", help="log a line per request (Serve access log)")


def _from_config_file(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(app args, http_options) of the verifier application in a Serve config file."""
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise UsageError(f"drkernel serve: cannot read {path}: {e}") from None
    apps = (data or {}).get("applications") or []
    for app in apps:
        if app.get("import_path") == APP_IMPORT_PATH:
            return dict(app.get("args") or {}), dict(data.get("http_options") or {})
    raise UsageError(f"drkernel serve: {path} has no application with import_path {APP_IMPORT_PATH}")


def _settings(args: argparse.Namespace) -> tuple[dict[str, Any], str, int]:
    app_args, http = _from_config_file(args.config) if args.config else ({}, {})
    if args.device:
        app_args["device"] = args.device
    if args.replicas is not None:
        if args.replicas < 1:
            raise UsageError("drkernel serve: --replicas must be at least 1")
        app_args["autoscaling"] = {
            **app_args.get("autoscaling", {}),
            "min_replicas": args.replicas,
            "max_replicas": args.replicas,
        }
    try:
        app_args = apply_overrides(app_args, args.overrides)
    except ConfigError as e:
        raise UsageError(f"drkernel serve: {e}") from None
    host = args.host or http.get("host") or DEFAULT_HOST
    port = args.port if args.port is not None else int(http.get("port") or DEFAULT_PORT)
    return app_args, host, port


def _resolve_device(app_args: dict[str, Any]) -> None:
    """`auto` (or unset) becomes the accelerator the Ray cluster offers: cuda, then npu, then cpu."""
    import ray

    if app_args.get("device", "auto") != "auto":
        return
    app_args["device"] = resolve_kind("auto", ray.cluster_resources())


def _check_listen(host: str, port: int) -> None:
    """One-line usage errors for a port out of range or an address this machine cannot listen on."""
    if not 1 <= port <= 65535:
        raise UsageError(f"drkernel serve: --port must be between 1 and 65535, got {port}")
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        raise UsageError(f"drkernel serve: cannot resolve --host {host!r}: {e.strerror}") from None
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the Serve proxy binds it
        try:
            s.bind(addr)
        except OSError as e:
            raise UsageError(
                f"drkernel serve: cannot listen on {host}:{port}: {e.strerror}"
                f"{' (another server, maybe a verifier, has it)' if e.errno == 98 else ''}"
            ) from None


def _start_ray(address: str | None, num_cpus: float | None) -> bool:
    """Join the cluster at `address`, or start a new local Ray; True when this process started it."""
    from serve_apps.runtime.ray_start import start_ray

    try:
        return start_ray(address, num_cpus=num_cpus, join_logging_level=logging.WARNING, checkout_on_path=False)
    except (ConnectionError, ValueError) as e:
        if address in (None, "local"):  # starting a private Ray failed: not a joining error
            raise
        raise UsageError(
            f"drkernel serve: cannot join the Ray cluster at {address}: "
            f"{str(e).strip().splitlines()[0]} (a cluster with token auth needs "
            "RAY_AUTH_MODE=token in this environment)"
        ) from None


def _answers(url: str, timeout_s: float) -> bool:
    """Whether the verifier's /healthz answers 200 at `url` within `timeout_s`."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    return False


def _validated(app_args: dict[str, Any]) -> Any:
    """VerifierServeConfig of `app_args`, or a one-line usage error naming each bad field."""
    from pydantic import ValidationError

    from drkernel.config.serve import VerifierServeConfig

    try:
        return VerifierServeConfig.model_validate(app_args)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: "
            f"{'unknown key' if err['type'] == 'extra_forbidden' else err['msg']}"
            for err in e.errors()
        )
        raise UsageError(f"drkernel serve: invalid verifier settings: {problems}") from None


def run(args: argparse.Namespace) -> int:
    from ray import serve

    from serve_apps.verifier import APP_NAME
    from serve_apps.verifier_app import build_app

    app_args, host, port = _settings(args)
    _validated({**app_args, "device": "cpu"} if app_args.get("device", "auto") == "auto" else app_args)
    if args.num_cpus is not None and args.num_cpus <= 0:
        raise UsageError(f"drkernel serve: --num-cpus must be positive, got {args.num_cpus:g}")
    _check_listen(host, port)

    import ray

    started_here = _start_ray(args.address, args.num_cpus)
    deployed = False
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        if not started_here and APP_NAME in serve.status().applications:
            raise UsageError(
                f"drkernel serve: the Ray cluster at {args.address} already runs a {APP_NAME!r} "
                "app that this process did not deploy; it is left alone (stop its owner first)"
            )
        _resolve_device(app_args)
        cfg = _validated(app_args)
        if host not in ("127.0.0.1", "localhost", "::1") and not os.environ.get(cfg.api_token_env):
            log.warning(
                "%s:%s runs untrusted kernel code for anyone who can reach it; set %s to require a bearer token",
                host,
                port,
                cfg.api_token_env,
            )
        quiet = serve_logging_config(args.verbose)
        serve.start(http_options={"host": host, "port": port}, logging_config=quiet)
        serve.run(build_app(cfg.model_dump()), name=APP_NAME, route_prefix="/", blocking=False, logging_config=quiet)
        deployed = True
        url = f"http://{host}:{port}"
        if not _answers(url, timeout_s=30):
            raise UsageError(
                f"drkernel serve: the app is deployed but nothing answers on {url} (Serve on this "
                "cluster was already started with other HTTP options?); removed it again"
            )
        log.info(
            "verifier (%s) listening on %s  [POST /verify, /verify/batch; GET /healthz, /stats, /openapi.json]"
            "  Ray cluster %s  Ctrl-C stops",
            cfg.device,
            url,
            ray.get_runtime_context().gcs_address,
        )
        stop.wait()
        log.info("stopping the verifier")
    finally:
        if started_here:
            serve.shutdown()
            ray.shutdown()
        elif deployed and ray.is_initialized():
            serve.delete(APP_NAME)
    return 0
