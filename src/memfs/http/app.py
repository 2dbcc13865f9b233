"""The memfs ASGI application: conventions for every request, then one route.

Order per request: request id → ``Origin`` refused (not for /healthz, /readyz,
/metrics) → route (404/405) → ``Memfs-Protocol`` → credentials → handler. Every
error, expected or not, leaves as the JSON envelope with ``Memfs-Request-Id``;
nothing internal leaks into a 500. Each request is counted for ``/metrics`` by its
route template.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Message, Receive, Scope, Send

from memfs import config
from memfs.console.app import PREFIX as CONSOLE_PREFIX
from memfs.console.app import Console
from memfs.core import faults, healing, maintenance, metrics, objects, sandbox
from memfs.core.auth import Principal, authenticate, reads_storage
from memfs.core.keys import AdminKey, KeyRing
from memfs.core.runner import Runner
from memfs.core.store import Store
from memfs.core.tokens import Signer
from memfs.errors import Damaged, InvalidRequest, MemfsError, Unavailable
from memfs.http import agents, command, health, inspect, memories, search, tenant, triggers
from memfs.http.context import Ctx, Services, request_headers, writer_pool
from memfs.http.envelope import MethodNotAllowed, error_response, internal_error
from memfs.http.openapi import openapi_path, spec
from memfs.http.routing import Route, Router
from memfs.mcp import routes as mcp_routes

if TYPE_CHECKING:
    from memfs.mcp.server import HttpEndpoint

log = logging.getLogger("memfs.http")

PROTOCOL_VERSIONS = ("1",)
SWEEP_EVERY_S = 600.0  # how often crash temp files (older than TEMP_GRACE_S) are removed
# Where two candidate routes could both be tried (the router tries only those whose
# literal segments a path has, http/routing.py), the routes agents call most come
# first. No two routes match the same method and path, so the order changes nothing
# else (tests/test_http_conventions.py); the OpenAPI document keeps the order of ROUTES.
HOT_ROUTES = ("getMemory", "listMemories", "putMemory")
# The method label of /metrics: any other method a client sends is "other".
_METHODS = frozenset({"GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"})

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
    Route("POST", "v1/agents/{agentId}/memory:query", search.query_agent, "queryAgent"),
    Route("POST", "v1/scopes/{scopeId}/memory:query", search.query_scope, "queryScope"),
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
    # For monitors: no Memfs-Protocol, no key (protocol=False), no ids in the answers.
    Route("GET", "healthz", health.healthz, "getHealth", protocol=False),
    Route("GET", "readyz", health.readyz, "getReadiness", protocol=False),
    Route("GET", "metrics", health.metrics_text, "getMetrics", protocol=False),
]


def _request_id() -> str:
    """``req_`` and 16 hex digits: a correlation id, unique, not a secret, so drawn from
    the process's own generator (seeded from the OS at start) rather than a getrandom
    system call per request (about 2 % of a commit's CPU in the server)."""
    return f"req_{_IDS.getrandbits(64):016x}"


# Its own generator: nothing else draws from it, and a forked worker reseeds it (below).
_IDS = random.Random()
os.register_at_fork(after_in_child=_IDS.seed)


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
        self._templates = {r.name: openapi_path(r) for r in routes}  # the metrics' route label
        # The read-only console: its own cookie sessions, pages and headers (console/).
        self.console: Console | None = None
        if services.settings.console:
            self.console = Console(
                services.store,
                services.keys,
                services.admin_key,
                services.signer,
                services.settings,
            )
        # Set by SIGTERM: for shutdown_drain_seconds new requests get 503 (retryable)
        # while the listener is still open, instead of a reset connection.
        self.draining = False
        # MCP's Streamable HTTP at /mcp/agents/{agentId}, started at its first request:
        # a server nobody asks for MCP never loads the SDK (about 1 s of imports).
        self._mcp: HttpEndpoint | None = None
        self._mcp_task: asyncio.Task[None] | None = None
        self._mcp_stop = asyncio.Event()
        self._mcp_lock = asyncio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        request_id = _request_id()
        if self.draining:
            refusal = error_response(
                Unavailable("the server is shutting down; retry in a moment"), request_id
            )
            refusal.headers["Connection"] = "close"
            await refusal(scope, receive, send)
            return
        started = time.perf_counter()
        path = scope["path"]
        if self.console is not None and (
            path == CONSOLE_PREFIX or path.startswith(CONSOLE_PREFIX + "/")
        ):
            # Not /v1: a browser surface whose requests carry Origin by design; the
            # console answers them itself (sessions, CSRF, its own headers).
            status: list[int] = [500]

            async def send_noting_status(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status[0] = message["status"]
                await send(message)

            try:
                await self.console(scope, receive, send_noting_status)
            finally:
                method = scope["method"] if scope["method"] in _METHODS else "other"
                seconds = time.perf_counter() - started
                metrics.request_done(CONSOLE_PREFIX, method, status[0], seconds)
            return
        matched: list[Route] = []  # the route the request reached, for its metrics label
        try:
            response = await self._handle(Request(scope, receive), scope, request_id, matched)
        except MemfsError as exc:
            if isinstance(exc, Damaged) and not exc.known:
                await asyncio.to_thread(self.services.store.record_damage, exc)
            response = error_response(exc, request_id)
        except Exception as exc:
            translated = faults.translate(exc)
            if translated is None:
                log.exception("unhandled error in request %s", request_id)
                response = internal_error(request_id)
            else:
                log.warning("request %s: %s (%r)", request_id, translated.message, exc)
                if faults.index_gone(exc):
                    healing.rebuild_in_background(self.services.store)
                response = error_response(translated, request_id)
        # Appended to the raw list (what ``response.headers[...] =`` does after a scan
        # through a MutableHeaders made for it); an error envelope already carries it.
        raw_headers = response.raw_headers
        if not any(name == b"memfs-request-id" for name, _ in raw_headers):
            raw_headers.append((b"memfs-request-id", request_id.encode()))
        try:
            await response(scope, receive, send)
        finally:
            self._observe(scope, matched, response.status_code, time.perf_counter() - started)

    def _observe(self, scope: Scope, matched: list[Route], status: int, seconds: float) -> None:
        """Count the request under its route template, never its raw path."""
        method = scope["method"] if scope["method"] in _METHODS else "other"
        if matched:
            route = self._templates[matched[0].name]
            if matched[0].name == "deliverWebhook":
                metrics.delivery_answered(status)
        elif scope["path"] == "/openapi.json":
            route = "/openapi.json"
        elif mcp_routes.is_mcp(scope["path"]):
            route = mcp_routes.ROUTE_LABEL
        else:
            route = metrics.UNMATCHED
        metrics.request_done(route, method, status, seconds)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        stop = asyncio.Event()
        task: asyncio.Task[None] | None = None
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                metrics.set_agents_damaged(0)
                if self.run_runs:
                    settings = self.services.settings
                    runner = Runner(
                        self.services.store,
                        self.services.keys,
                        base_url=f"http://{settings.host}:{settings.port}",
                        concurrency=settings.run_concurrency,
                        retry_base_s=settings.retry_base_ms / 1000,
                        retention_hours=settings.delivery_retention_hours,
                        command_grace_s=settings.command_grace_seconds,
                        allow_commands=settings.allow_commands,
                        run_user=settings.run_user,
                    )
                    self.services.runner = runner
                    task = asyncio.create_task(runner.run_forever(stop))
                sweeper = asyncio.create_task(self._sweep_forever(stop))
                self._drain_on_sigterm()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                stop.set()
                sweeper.cancel()
                await self._stop_mcp()
                if task is not None:
                    self.services.runner.wake.set()  # type: ignore[union-attr]
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(task, timeout=10)
                # Requests have ended; a new thread for a lifespan started again.
                self.services.writer.shutdown(wait=True)
                self.services.writer = writer_pool()
                self.services.store.close()
                metrics.process_stopped()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _drain_on_sigterm(self) -> None:
        """Put a drain before uvicorn's SIGTERM handler (installed by now): answer 503
        for shutdown_drain_seconds, then hand the signal on so uvicorn shuts down."""
        seconds = self.services.settings.shutdown_drain_seconds
        previous = signal.getsignal(signal.SIGTERM)
        if seconds <= 0 or not callable(previous):
            return
        loop = asyncio.get_running_loop()

        def handle(signum: int, frame: FrameType | None) -> None:
            if self.draining:
                previous(signum, frame)  # a second SIGTERM: stop now
                return
            self.draining = True
            log.warning("SIGTERM: answering 503 for %d s, then shutting down", seconds)
            loop.call_soon_threadsafe(loop.call_later, seconds, previous, signum, frame)

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, handle)

    async def _sweep_forever(self, stop: asyncio.Event) -> None:
        """Crash temp files are removed at start (build) and every SWEEP_EVERY_S."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=SWEEP_EVERY_S)
            if not stop.is_set():
                try:
                    await asyncio.to_thread(maintenance.sweep_temp_files, self.services.store)
                except Exception:
                    log.exception("sweeping temp files failed")
                if self.console is not None:
                    try:
                        await asyncio.to_thread(self.console.sessions.sweep)
                    except Exception:
                        log.exception("sweeping expired console sessions failed")

    async def _handle(
        self, request: Request, scope: Scope, request_id: str, matched: list[Route]
    ) -> Response:
        raw = scope.get("raw_path") or scope["path"].encode()
        raw_path = raw.decode("latin-1").split("?", 1)[0]
        headers = request_headers(scope)  # once: each Starlette look-up rescans the list
        if "origin" in headers and raw_path not in health.PATHS:
            from memfs.errors import Forbidden

            raise Forbidden(
                "requests from browsers (with an Origin header) are refused; "
                "keys must stay on servers",
                field="Origin",
            )
        if mcp_routes.is_mcp(raw_path):
            return await self._mcp_answer(request, raw_path)
        if raw_path == "/openapi.json" and request.method in ("GET", "HEAD"):
            return JSONResponse(self._openapi)
        route, params = self.router.resolve(request.method, raw_path)
        matched.append(route)
        if route.protocol:
            version = headers.get("memfs-protocol")
            if version not in PROTOCOL_VERSIONS:
                raise InvalidRequest(
                    f"header Memfs-Protocol is {'missing' if version is None else 'unsupported'};"
                    f" send Memfs-Protocol: {' or '.join(PROTOCOL_VERSIONS)}",
                    field="Memfs-Protocol",
                )
        ctx = Ctx(request, params, self.services, request_id, _headers=headers)
        if route.protocol:
            ctx.principal = await self._principal(headers)
        response: Response = await route.handler(ctx)
        return response

    async def _principal(self, headers: Mapping[str, str]) -> Principal:
        keys, admin = self.services.keys, self.services.admin_key.current()
        if reads_storage(headers, keys, admin):
            # A key record to read from S3 (a key not seen for CLUSTER_KEY_SECONDS): in
            # a thread, so the other requests don't wait on S3 (or its retries) with it.
            return await asyncio.to_thread(authenticate, headers, keys, admin)
        return authenticate(headers, keys, admin)

    async def _mcp_answer(self, request: Request, raw_path: str) -> Response:
        """MCP clients send no Memfs-Protocol; the key and its scopes are /v1's."""
        agent_id = mcp_routes.agent_in_path(raw_path)
        if request.method != "POST":
            # Stateless: no session, so no GET event stream (it would idle open) and
            # no DELETE to end one; the MCP spec's answer for both is 405.
            raise MethodNotAllowed(
                f"{request.method} is not allowed on MCP's stateless endpoint; POST "
                "JSON-RPC messages",
                ["POST"],
            )
        principal = await self._principal(request.headers)
        from memfs.mcp.local import LocalMemory

        memory = LocalMemory(
            self.services.store,
            self.services.signer,
            agent_id,
            principal,
            write=self.services.writer.run,
        )
        endpoint = await self._mcp_endpoint()
        return endpoint.answer(memory)

    async def _mcp_endpoint(self) -> HttpEndpoint:
        async with self._mcp_lock:
            if self._mcp is None:
                from memfs.mcp.server import HttpEndpoint

                # Its bodies carry memory-tool commands: memory:command's limit.
                endpoint = HttpEndpoint(self.services.settings.memory_bytes * 6 + 4096)
                ready = asyncio.Event()
                self._mcp_stop = asyncio.Event()
                self._mcp_task = asyncio.create_task(endpoint.serve(self._mcp_stop, ready))
                await ready.wait()
                self._mcp = endpoint
            return self._mcp

    async def _stop_mcp(self) -> None:
        async with self._mcp_lock:
            task, self._mcp, self._mcp_task = self._mcp_task, None, None
            self._mcp_stop.set()
            if task is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(task, timeout=10)


def build(settings: config.Settings) -> MemfsApp:
    where = config.objects(settings)
    # One connection per thread that may call S3 at once: anyio's pool of 40 runs the
    # sync handlers, plus the run workers and the index publisher.
    backend = objects.open_backend(where, pool_size=40 + 2 * settings.run_concurrency)
    if backend is not None:
        objects.check_bucket(backend, where)
    store = Store(
        settings.data,
        backend=backend,
        memory_bytes=settings.memory_bytes,
        index_location=settings.index,
        worktree=backend is None,
    )
    healing.watch(store)  # a file deleted or replaced under the server is rebuilt
    # A missing or stale index is rebuilt and the log's leftovers applied, before serving.
    healing.heal(store)
    maintenance.sweep_temp_files(store)
    store.on_commit = metrics.commit_made
    services = Services(
        store=store,
        keys=KeyRing.of(store),
        signer=Signer.for_data_dir(settings.data),
        settings=settings,
        admin_key=AdminKey(settings.data, settings.admin_key),
    )
    return MemfsApp(services)


def create_app() -> MemfsApp:
    """The uvicorn factory: settings from ``MEMFS_*`` (``memfs serve`` sets them)."""
    sandbox.harden_server()  # each uvicorn worker is a process of its own
    return build(config.load(os.environ, {}))


__all__ = ["MemfsApp", "Path", "build", "create_app"]
