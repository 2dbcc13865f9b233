"""``/healthz``, ``/readyz`` and ``/metrics``: for monitors, so no key and no ids.

They sit outside ``/v1``: no ``Memfs-Protocol``, no ``Authorization``, and an
``Origin`` header does not refuse them (they hold nothing a key guards; they send no
CORS headers, so a page in a browser still can't read them from another origin).
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from memfs.core import healing, metrics
from memfs.core.readiness import index_lag, readiness, runs_by_state
from memfs.core.store import Store
from memfs.errors import Unavailable
from memfs.http.context import Ctx

# Answered whatever the request's Origin (see the module docstring).
PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


async def healthz(ctx: Ctx) -> Response:
    ctx.allow_query()
    return JSONResponse({"status": "ok"})


def index_ready(store: Store) -> str | None:
    """Why this server can't answer from its index yet, or None when it can: the index
    is missing or being rebuilt (healing), or the log is ahead of it (readiness)."""
    if not healing.index_ready(store):
        return "the index is being rebuilt from the log"
    return readiness(store)


async def readyz(ctx: Ctx) -> Response:
    ctx.allow_query()
    reason = await run_in_threadpool(index_ready, ctx.store)
    if reason is not None:
        raise Unavailable(f"not ready: {reason}; retry shortly")
    return JSONResponse({"status": "ready"})


async def metrics_text(ctx: Ctx) -> Response:
    ctx.allow_query()
    store = ctx.store
    state = metrics.StateCollector(lambda: runs_by_state(store), lambda: index_lag(store))
    body = await run_in_threadpool(metrics.render, state)
    return Response(body, media_type=metrics.CONTENT_TYPE_LATEST)
