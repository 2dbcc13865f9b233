"""``memfs serve``: check the settings, make the admin key, run uvicorn.

Flags override ``MEMFS_*`` variables; the merged settings are handed to every
uvicorn worker through the environment, since workers are fresh processes that
build the app with ``memfs.http.app:create_app``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from memfs import config, sandbox
from memfs.errors import InvalidRequest
from memfs.keys import admin_key
from memfs.store import Store

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
        "--admin-key",
        dest="serve_admin_key",
        help="overrides $MEMFS_ADMIN_KEY (default: generated into data/admin.key)",
    )


def run(args: argparse.Namespace, store: Store) -> int:
    import uvicorn

    overrides: dict[str, object | None] = {
        name: getattr(args, f"serve_{name}") for name in (*_FLAGS, "admin_key", "allow_commands")
    }
    overrides["data"] = str(args.data)
    try:
        settings = config.load(os.environ, overrides)
    except InvalidRequest as exc:
        print(f"memfs: {exc.message}", file=sys.stderr)
        return 2
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
        "MEMFS_ALLOW_COMMANDS": "1" if settings.allow_commands else "0",
        "MEMFS_RUN_USER": settings.run_user,
    }
    if settings.admin_key:
        env["MEMFS_ADMIN_KEY"] = settings.admin_key
    os.environ.update(env)
    where = f"in {path} (mode 0600)" if path else "from MEMFS_ADMIN_KEY"
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
    uvicorn.run(
        "memfs.http.app:create_app",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=settings.workers if settings.workers > 1 else None,
        log_level="info",
        timeout_graceful_shutdown=30,
    )
    return 0


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)
