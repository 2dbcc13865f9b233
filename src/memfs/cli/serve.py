"""``memfs serve``: check the settings, make the admin key, run uvicorn.

Flags override ``MEMFS_*`` variables; the merged settings are handed to every
uvicorn worker through the environment, since workers are fresh processes that
build the app with ``memfs.http.app:create_app``.
"""

from __future__ import annotations

import argparse
import copy
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from memfs import config
from memfs.cli.base import Parser, command
from memfs.core import healing, sandbox
from memfs.core.keys import admin_key
from memfs.core.store import Store
from memfs.errors import InvalidRequest

# Read by prometheus_client when a worker imports it (memfs.core.metrics says why).
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

_FLAGS = {
    "host": str,
    "port": str,
    "workers": str,
    "page_items": str,
    "memory_bytes": str,
    "webhook_body_bytes": str,
    "webhook_tolerance_seconds": str,
    "run_concurrency": str,
    "retry_base_ms": str,
    "delivery_retention_hours": str,
    "header_timeout_seconds": str,
    "body_timeout_seconds": str,
    "max_connections": str,
    "shutdown_drain_seconds": str,
    "command_grace_seconds": str,
    "run_user": str,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for name in _FLAGS:
        env = f"MEMFS_{name.upper()}"
        parser.add_argument(
            f"--{name.replace('_', '-')}", dest=f"serve_{name}", help=f"overrides ${env}"
        )
    parser.add_argument(
        "--allow-commands",
        dest="serve_allow_commands",
        action="store_const",
        const=True,
        default=None,
        help="overrides $MEMFS_ALLOW_COMMANDS: let the admin key create command triggers",
    )
    parser.add_argument(
        "--console",
        dest="serve_console",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="overrides $MEMFS_CONSOLE: serve the read-only web console at /console"
        " (on by default; --no-console turns it off)",
    )
    parser.add_argument(
        "--admin-key",
        dest="serve_admin_key",
        help="overrides $MEMFS_ADMIN_KEY (default: generated into data/admin.key)",
    )


def settings_of(args: argparse.Namespace) -> config.Settings:
    """The server's settings from flags and ``MEMFS_*``; raises InvalidRequest.

    ``memfs`` calls it before it touches the data folder, so a bad value creates nothing.
    """
    overrides: dict[str, object | None] = {
        name: getattr(args, f"serve_{name}")
        for name in (*_FLAGS, "admin_key", "allow_commands", "console")
    }
    overrides["data"] = str(args.data)
    overrides["index"] = getattr(args, "index", None)
    overrides["objects"] = args.objects
    overrides["s3_endpoint"] = args.s3_endpoint
    overrides["s3_region"] = args.s3_region
    return config.load(os.environ, overrides)


def run(args: argparse.Namespace, store: Store) -> int:
    import uvicorn

    try:
        settings = settings_of(args)
    except InvalidRequest as exc:
        print(f"memfs: {exc.message}", file=sys.stderr)
        return 2
    # Once, before any worker starts: workers then find the index whole and caught up.
    healing.heal(store, progress=lambda note: print(note, file=sys.stderr, flush=True))
    store.close()
    key, path = admin_key(settings.data, settings.admin_key)
    env = {
        "MEMFS_DATA": str(settings.data.resolve()),
        "MEMFS_HOST": settings.host,
        "MEMFS_PORT": str(settings.port),
        "MEMFS_WORKERS": str(settings.workers),
        "MEMFS_PAGE_ITEMS": str(settings.page_items),
        "MEMFS_MEMORY_BYTES": str(settings.memory_bytes),
        "MEMFS_WEBHOOK_BODY_BYTES": str(settings.webhook_body_bytes),
        "MEMFS_WEBHOOK_TOLERANCE_SECONDS": str(settings.webhook_tolerance_seconds),
        "MEMFS_RUN_CONCURRENCY": str(settings.run_concurrency),
        "MEMFS_RETRY_BASE_MS": str(settings.retry_base_ms),
        "MEMFS_DELIVERY_RETENTION_HOURS": str(settings.delivery_retention_hours),
        "MEMFS_HEADER_TIMEOUT_SECONDS": str(settings.header_timeout_seconds),
        "MEMFS_BODY_TIMEOUT_SECONDS": str(settings.body_timeout_seconds),
        "MEMFS_MAX_CONNECTIONS": str(settings.max_connections),
        "MEMFS_SHUTDOWN_DRAIN_SECONDS": str(settings.shutdown_drain_seconds),
        "MEMFS_COMMAND_GRACE_SECONDS": str(settings.command_grace_seconds),
        "MEMFS_ALLOW_COMMANDS": "1" if settings.allow_commands else "0",
        "MEMFS_RUN_USER": settings.run_user,
        "MEMFS_CONSOLE": "1" if settings.console else "0",
    }
    if settings.admin_key:
        env["MEMFS_ADMIN_KEY"] = settings.admin_key
    if settings.index:
        env["MEMFS_INDEX"] = settings.index
    if settings.objects is not None:
        env["MEMFS_OBJECTS"] = settings.objects
        env["MEMFS_S3_REGION"] = settings.s3_region
        if settings.s3_endpoint is not None:
            env["MEMFS_S3_ENDPOINT"] = settings.s3_endpoint
    os.environ.update(env)
    where = f"in {path} (mode 0600)" if path else "from MEMFS_ADMIN_KEY"
    if settings.objects is not None:
        where += f"; objects on {settings.objects} (no local working tree)"
    print(
        f"memfs serving {settings.data.resolve()} on http://{settings.host}:{settings.port}"
        f" — admin key {where}",
        file=sys.stderr,
        flush=True,
    )
    del key
    sandbox.harden_server()
    warning = sandbox.start_warning(settings.allow_commands, settings.run_user)
    if warning:
        print(f"memfs: warning: {warning}", file=sys.stderr, flush=True)
    # After a graceful shutdown uvicorn re-raises the signal it caught; with the
    # default SIGTERM disposition a single-process server would then die with status
    # 143 instead of exiting 0 like the multi-worker supervisor does.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    metrics_dir = _metrics_folder(settings.workers)
    try:
        uvicorn.run(
            "memfs.http.app:create_app",
            factory=True,
            host=settings.host,
            port=settings.port,
            workers=settings.workers if settings.workers > 1 else None,
            log_level="info",
            timeout_graceful_shutdown=30,
            # Slow clients: headers within MEMFS_HEADER_TIMEOUT_SECONDS (the protocol), the
            # body within MEMFS_BODY_TIMEOUT_SECONDS (the app); connections beyond
            # MEMFS_MAX_CONNECTIONS are answered 503 at once.
            http="memfs.http.protocol:BoundedHTTPProtocol",
            limit_concurrency=settings.max_connections,
            log_config=log_config(),
        )
    finally:
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    return 0


def log_config() -> dict[str, Any]:
    """uvicorn's default logging settings, with the access line written by
    ``memfs.http.access_log.AccessFormatter`` (the same line for less CPU). The
    benchmarks' bare servers run with these too, so both sides log alike."""
    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["access"]["()"] = "memfs.http.access_log.AccessFormatter"
    return config


def _metrics_folder(workers: int) -> Path | None:
    """prometheus_client's multiprocess folder when several workers share /metrics.

    A new private (0700) folder per start, so no stale worker file of an earlier run
    is ever added up; it is named in the environment before the workers start, which
    is when prometheus_client reads it. One worker keeps its metrics in memory.
    """
    os.environ.pop(MULTIPROC_ENV, None)
    if workers <= 1:
        return None
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    folder = Path(tempfile.mkdtemp(prefix="memfs-metrics-", dir=base))
    os.environ[MULTIPROC_ENV] = str(folder)
    return folder


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


def cmd_serve(args: argparse.Namespace, store: Store) -> int:
    return run(args, store)


def add_commands(sub: argparse._SubParsersAction[Parser]) -> None:
    p = command(
        sub,
        "serve",
        cmd_serve,
        "serve the HTTP API on the data folder",
        "memfs serve --port 8750 --workers 2",
    )
    add_arguments(p)
    p.set_defaults(creates_data=True, precheck=settings_of)
