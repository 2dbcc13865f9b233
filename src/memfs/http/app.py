"""The memfs ASGI application: conventions for every request, then one route.

Order per request: request id → ``Origin`` refused → route (404/405) →
``Memfs-Protocol`` → credentials → handler. Every error, expected or not, leaves as
the JSON envelope with ``Memfs-Request-Id``; nothing internal leaks into a 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from memfs import config, sandbox
from memfs.auth import authenticate
from memfs.errors import InvalidRequest, MemfsError
from memfs.http import agents, command, inspect, memories, tenant, triggers
from memfs.http.context import Ctx, Services
from memfs.http.envelope import error_response, internal_error
from memfs.http.openapi import spec
from memfs.http.routing import Route, Router
from memfs.keys import KeyRing, admin_key
from memfs.runner import Runner
from memfs.store import Store
from memfs.tokens import Signer

log = logging.getLogger("memfs.http")

PROTOCOL_VERSIONS = ("1",)
# The router tries routes in order, matching each pattern: the routes agents call most
# are tried first (about 15 us less per request than in the order of ROUTES). No two
# routes match the same method and path, so the order changes nothing else
# (tests/test_http_conventions.py); the OpenAPI document keeps the order of ROUTES.
HOT_ROUTES = ("getMemory", "listMemories", "putMemory")

ROUTES = [
    Route("PUT", "v1/tenant/keys/{keyId}", tenant.put_key, "putKey"),
    Route("GET", "v1/tenant/keys", tenant.list_keys, "listKeys"),
    Route("GET", "v1/tenant/keys/{keyId}", tenant.get_key, "getKey"),
    Route("DELETE", "v1/tenant/keys/{keyId}", tenant.delete_key, "revokeKey"),
    Route("GET", "v1/agents", agents.list_agents, "listAgents"),
    Route("PUT", "v1/agents/{agentId}", agents.put_agent, "putAgent"),
    Route("GET", "v1/agents/{agentId}", agents.get_agent, "getAgent"),
    Route("DELETE", "v1/agents/{agentId}", agents.delete_agent, "deleteAgent"),
    Route("GET", "v1/agents/{agentId}/memory", agents.summary, "getMemorySummary"),
    Route("POST", "v1/agents/{agentId}/memory:command", command.memory_command, "memoryCommand"),
    Route("GET", "v1/agents/{agentId}/memories", memories.list_memories, "listMemories"),
    Route("GET", "v1/agents/{agentId}/memories/{path*}", memories.get_memory, "getMemory"),
    Route("PUT", "v1/agents/{agentId}/memories/{path*}", memories.put_memory, "putMemory"),
    Route("DELETE", "v1/agents/{agentId}/memories/{path*}", memories.delete_memory, "deleteMemory"),
    Route("GET", "v1/agents/{agentId}/versions", memories.list_versions, "listVersions"),
    Route("POST", "v1/agents/{agentId}/memory:inspect", inspect.inspect_agent, "inspectAgent"),
    Route("POST", "v1/scopes/{scopeId}/memory:inspect", inspect.inspect_scope, "inspectScope"),
    Route("GET", "v1/agents/{agentId}/triggers", triggers.list_triggers, "listTriggers"),
    Route("PUT", "v1/agents/{agentId}/triggers/{triggerId}", triggers.put_trigger, "putTrigger"),
    Route("GET", "v1/agents/{agentId}/triggers/{triggerId}", triggers.get_trigger, "getTrigger"),
    Route(
        "DELETE",
        "v1/agents/{agentId}/triggers/{triggerId}",
        triggers.delete_trigger,
        "deleteTrigger",
    ),
    Route(
        "POST",
        "v1/agents/{agentId}/triggers/{triggerId}:rotateSecret",
        triggers.rotate_secret,
        "rotateTriggerSecret",
    ),
    Route(
        "POST",
        "v1/agents/{agentId}/triggers/{triggerId}:deliver",
        triggers.deliver,
        "deliverWebhook",
        protocol=False,
    ),
    Route("GET", "v1/agents/{agentId}/runs", triggers.list_runs, "listRuns"),
    Route("GET", "v1/agents/{agentId}/runs/{runId}", triggers.get_run, "getRun"),
    Route("POST", "v1/agents/{agentId}/runs/{runId}:retry", triggers.retry_run, "retryRun"),
]


class MemfsApp:
    """Plain ASGI: conventions, routing and the error envelope in one place."""

    def __init__(
        self, services: Services, routes: list[Route] | None = None, *, run_runs: bool = True
    ) -> None:
        self.services = services
        self.run_runs = run_runs  # execute runs in this process (off for some tests)
        routes = routes if routes is not None else ROUTES
        self.router = Router(sorted(routes, key=lambda r: r.name not in HOT_ROUTES))
        self._openapi = spec(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        request_id = "req_" + secrets.token_hex(8)
        try:
            response = await self._handle(Request(scope, receive), scope, request_id)
        except MemfsError as exc:
            response = error_response(exc, request_id)
        except Exception:
            log.exception("unhandled error in request %s", request_id)
            response = internal_error(request_id)
        response.headers["Memfs-Request-Id"] = request_id
        await response(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        stop = asyncio.Event()
        task: asyncio.Task[None] | None = None
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                if self.run_runs:
                    settings = self.services.settings
                    runner = Runner(
                        self.services.store,
                        self.services.keys,
                        base_url=f"http://{settings.host}:{settings.port}",
                        concurrency=settings.run_concurrency,
                        retry_base_s=settings.retry_base_ms / 1000,
                        retention_hours=settings.delivery_retention_hours,
                        allow_commands=settings.allow_commands,
                        run_user=settings.run_user,
                    )
                    self.services.runner = runner
                    task = asyncio.create_task(runner.run_forever(stop))
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                stop.set()
                if task is not None:
                    self.services.runner.wake.set()  # type: ignore[union-attr]
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(task, timeout=10)
                # Requests have ended; a new thread for a lifespan started again.
                self.services.writer.shutdown(wait=True)
                self.services.writer = ThreadPoolExecutor(1, thread_name_prefix="memfs-writer")
                self.services.store.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _handle(self, request: Request, scope: Scope, request_id: str) -> Response:
        if "origin" in request.headers:
            from memfs.errors import Forbidden

            raise Forbidden(
                "requests from browsers (with an Origin header) are refused; "
                "keys must stay on servers",
                field="Origin",
            )
        raw = scope.get("raw_path") or scope["path"].encode()
        raw_path = raw.decode("latin-1").split("?", 1)[0]
        if raw_path == "/openapi.json" and request.method in ("GET", "HEAD"):
            return JSONResponse(self._openapi)
        route, params = self.router.resolve(request.method, raw_path)
        if route.protocol:
            version = request.headers.get("memfs-protocol")
            if version not in PROTOCOL_VERSIONS:
                raise InvalidRequest(
                    f"header Memfs-Protocol is {'missing' if version is None else 'unsupported'};"
                    f" send Memfs-Protocol: {' or '.join(PROTOCOL_VERSIONS)}",
                    field="Memfs-Protocol",
                )
        ctx = Ctx(request, params, self.services, request_id)
        if route.protocol:
            ctx.principal = authenticate(
                request.headers, self.services.keys, self.services.admin_key
            )
        response: Response = await route.handler(ctx)
        return response


def build(settings: config.Settings) -> MemfsApp:
    store = Store(settings.data, memory_bytes=settings.memory_bytes)
    store.sync()  # apply what a crashed writer left in the log before serving
    key, _path = admin_key(settings.data, settings.admin_key)
    services = Services(
        store=store,
        keys=KeyRing(store.backend),
        signer=Signer.for_data_dir(settings.data),
        settings=settings,
        admin_key=key,
    )
    return MemfsApp(services)


def create_app() -> MemfsApp:
    """The uvicorn factory: settings from ``MEMFS_*`` (``memfs serve`` sets them)."""
    sandbox.harden_server()  # each uvicorn worker is a process of its own
    return build(config.load(os.environ, {}))


__all__ = ["MemfsApp", "Path", "build", "create_app"]
