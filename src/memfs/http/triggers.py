"""Routes for webhook triggers, deliveries (Standard Webhooks) and runs."""

from __future__ import annotations

import functools
import time

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from memfs.core.runner import memory_content
from memfs.core.runs import Runs, check_run_id
from memfs.core.triggers import CommandGuard, Triggers, command_guard
from memfs.domain import paths
from memfs.domain.webhook_verify import verify
from memfs.errors import InvalidRequest, NotFound, PayloadTooLarge
from memfs.http.context import Ctx


def _agent(ctx: Ctx, action: str) -> str:
    agent_id = paths.agent_id(ctx.params["agentId"])
    ctx.who.require(action, agent_id)
    ctx.store.get_agent(agent_id)
    return agent_id


def _triggers(ctx: Ctx) -> Triggers:
    return Triggers(ctx.store.backend)


def _guard(ctx: Ctx) -> CommandGuard:
    return command_guard(enabled=ctx.services.settings.allow_commands, admin=ctx.who.is_admin)


def _runs(ctx: Ctx) -> Runs:
    return Runs(ctx.store)


async def put_trigger(ctx: Ctx) -> Response:
    ctx.allow_query()
    agent_id = _agent(ctx, "triggers:write")
    doc = await ctx.json(256 * 1024)
    trigger, created = await run_in_threadpool(
        functools.partial(_triggers(ctx).put, guard=_guard(ctx)),
        agent_id,
        ctx.params["triggerId"],
        doc,
    )
    body = trigger.to_json(with_secret=created or "secret" in doc)
    return JSONResponse(body, status_code=201 if created else 200)


async def get_trigger(ctx: Ctx) -> Response:
    ctx.allow_query()
    agent_id = _agent(ctx, "triggers:write")
    return JSONResponse(_triggers(ctx).get(agent_id, ctx.params["triggerId"]).to_json())


async def list_triggers(ctx: Ctx) -> Response:
    ctx.allow_query()
    agent_id = _agent(ctx, "triggers:write")
    items = [t.to_json() for t in _triggers(ctx).list(agent_id)]
    return JSONResponse({"triggers": items, "nextCursor": None})


async def delete_trigger(ctx: Ctx) -> Response:
    ctx.allow_query()
    agent_id = _agent(ctx, "triggers:write")
    await run_in_threadpool(
        functools.partial(_triggers(ctx).delete, guard=_guard(ctx)),
        agent_id,
        ctx.params["triggerId"],
    )
    return Response(status_code=204)


async def rotate_secret(ctx: Ctx) -> Response:
    ctx.allow_query()
    agent_id = _agent(ctx, "triggers:write")
    trigger = await run_in_threadpool(
        functools.partial(_triggers(ctx).rotate, guard=_guard(ctx)),
        agent_id,
        ctx.params["triggerId"],
    )
    return JSONResponse(trigger.to_json(with_secret=True))


async def deliver(ctx: Ctx) -> Response:
    """A sender's delivery: 404 → 413 → 401 → exactly one run per webhook-id."""
    agent_id = paths.agent_id(ctx.params["agentId"])
    try:
        ctx.store.get_agent(agent_id)
        trigger = _triggers(ctx).get(agent_id, ctx.params["triggerId"])
    except NotFound:
        # One answer for an unknown agent and an unknown trigger: a sender without a
        # key must not learn which agents exist.
        raise NotFound(
            "no trigger answers at this URL; check the agent id and trigger id",
            field="triggerId",
        ) from None
    settings = ctx.services.settings
    # A memory action can't store more than memoryBytes: the body is refused here, with
    # 413 before any 202, rather than accepted to fail on every attempt.
    limit = settings.webhook_body_bytes
    if trigger.action.get("type") != "command":
        limit = min(limit, settings.memory_bytes)
    try:
        body = await ctx.body(limit)
    except PayloadTooLarge as exc:
        if limit < settings.webhook_body_bytes:
            exc.message += " (the most this trigger's memory action can store: memoryBytes)"
            exc.args = (exc.message,)
        raise
    now = time.time()
    headers = dict(ctx.request.headers)
    # Every webhook-signature line counts (a proxy may split one header into several).
    signatures = ctx.request.headers.getlist("webhook-signature")
    if len(signatures) > 1:
        headers["webhook-signature"] = " ".join(signatures)
    webhook_id = verify(
        trigger.live_secrets(int(now * 1_000_000)),
        headers,
        body,
        now=now,
        tolerance_seconds=settings.webhook_tolerance_seconds,
    )
    runs = _runs(ctx)
    # A retry of an indexed id needs reads only: answered here, without a thread hop.
    known = runs.known(agent_id, trigger.trigger_id, webhook_id, wait=False)
    if known is not None:
        return JSONResponse(known.to_json(), status_code=200)
    media = ctx.request.headers.get("content-type", "application/octet-stream")[:256]
    if trigger.action.get("type") != "command":
        # The exact memory (frontmatter, and base64 for a binary body) must fit too.
        facts = {"webhookId": webhook_id, "contentType": media, "receivedAt": int(now * 1e6)}
        size = len(memory_content(trigger, facts, body))
        if size > settings.memory_bytes:
            raise PayloadTooLarge(
                f"this trigger's memory action stores at most {settings.memory_bytes} bytes"
                f" (memoryBytes) and this body makes a memory of {size}; send less, or use a"
                " command action",
                field="body",
            )
    # The durable record is written in a worker thread, so the fsyncs of concurrent
    # deliveries overlap (and their index rows share a transaction).
    run, created = await run_in_threadpool(
        runs.deliver,
        agent_id,
        trigger.trigger_id,
        webhook_id,
        body,
        media,
        trigger.max_attempts,
    )
    if created and ctx.services.runner is not None:
        ctx.services.runner.wake.set()
    return JSONResponse(run.to_json(), status_code=202 if created else 200)


async def list_runs(ctx: Ctx) -> Response:
    ctx.allow_query("triggerId", "status", "limit", "cursor")
    agent_id = _agent(ctx, "runs:read")
    trigger_id = ctx.query("triggerId")
    status = ctx.query("status")
    limit = ctx.limit()
    digest = f"{trigger_id}|{status}"
    after = None
    cursor = ctx.query("cursor")
    if cursor:
        position = ctx.services.signer.decode(cursor, "runs", agent_id, digest, field="cursor")
        if not (isinstance(position, list) and len(position) == 2):
            raise InvalidRequest("cursor is not valid here", field="cursor")
        after = (int(position[0]), str(position[1]))
    rows = _runs(ctx).list(
        agent_id, trigger_id=trigger_id, status=status, after=after, limit=limit + 1
    )
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = (
        ctx.services.signer.encode("runs", agent_id, digest, [rows[-1].created_at, rows[-1].run_id])
        if more
        else None
    )
    return JSONResponse({"runs": [r.to_json() for r in rows], "nextCursor": next_cursor})


def _run_id(ctx: Ctx) -> str:
    return check_run_id(ctx.params["runId"])


async def get_run(ctx: Ctx) -> Response:
    ctx.allow_query()
    agent_id = _agent(ctx, "runs:read")
    run = await run_in_threadpool(_runs(ctx).get, agent_id, _run_id(ctx))
    return JSONResponse(run.to_json())


async def retry_run(ctx: Ctx) -> Response:
    ctx.allow_query()
    agent_id = _agent(ctx, "triggers:write")
    run = await run_in_threadpool(_runs(ctx).retry, agent_id, _run_id(ctx))
    if ctx.services.runner is not None:
        ctx.services.runner.wake.set()
    return JSONResponse(run.to_json(), status_code=202)
