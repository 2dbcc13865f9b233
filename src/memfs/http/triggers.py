"""Routes for webhook triggers, deliveries (Standard Webhooks) and runs."""

from __future__ import annotations

import functools
import time

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from memfs.core import deliveries
from memfs.core.browse import runs_page
from memfs.core.runs import Run, Runs, check_run_id
from memfs.core.triggers import CommandGuard, Triggers, command_guard
from memfs.domain import paths
from memfs.errors import PayloadTooLarge
from memfs.http.context import Ctx, Writers

# The threads deliveries are accepted on: as many as anyio's default limiter allowed,
# so concurrent new deliveries still reach one batch (core/delivery_records.py). The
# writes' lighter hand-off (``Writers``: one queue put, one ``call_soon_threadsafe``
# back), on threads of their own so deliveries never wait behind memory writes.
_DELIVERIES = Writers(40, "memfs-deliver")


# The JSON answer of each run state a retry was answered with lately, by the Run
# object ``Runs.known_now`` keeps (a new state is a new object): a sender retrying one
# id gets the bytes JSONResponse made for it, not made again. Bounded in entries and
# in size (a run's output can be 64 KiB: those are made each time).
ANSWERS_MAX = 1024
ANSWER_KEPT_BYTES = 4096
_ANSWERS: dict[int, tuple[Run, bytes]] = {}


def _answer(run: Run) -> bytes:
    kept = _ANSWERS.get(id(run))
    if kept is not None and kept[0] is run:
        return kept[1]
    body = bytes(JSONResponse(run.to_json()).body)
    if len(body) <= ANSWER_KEPT_BYTES:
        if len(_ANSWERS) >= ANSWERS_MAX:
            _ANSWERS.clear()
        _ANSWERS[id(run)] = (run, body)
    return body


def _agent(ctx: Ctx, action: str) -> str:
    agent_id = paths.agent_id(ctx.params["agentId"])
    ctx.who.require(action, agent_id)
    ctx.store.get_agent(agent_id)
    return agent_id


def _triggers(ctx: Ctx) -> Triggers:
    return Triggers.of(ctx.store)


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
    settings = ctx.services.settings
    store = ctx.store
    agent_id = paths.agent_id(ctx.params["agentId"])
    trigger_id = ctx.params["triggerId"]
    # The request's headers as ``ctx.headers`` reads them once (the first of each name,
    # as ``dict(request.headers)`` keeps it; ``ctx.body`` reads the same dict).
    headers = dict(ctx.headers)
    # Every webhook-signature line counts (a proxy may split one header into several).
    signatures = [
        value.decode("latin-1")
        for name, value in ctx.request.scope["headers"]
        if name == b"webhook-signature"
    ]
    if len(signatures) > 1:
        headers["webhook-signature"] = " ".join(signatures)
    # The target as this process last found it, with no I/O on the loop: only the limit
    # to read the body with; ``accept`` checks it again in the worker thread. Read
    # afresh first (a 404 before any body) when none is kept or the declared body is
    # over the kept limit (the trigger may have changed since).
    target = deliveries.seen(store, agent_id, trigger_id)
    declared = headers.get("content-length", "")
    if target is None or (declared.isdigit() and int(declared) > target.body_limit):
        target = await _DELIVERIES.run(
            functools.partial(deliveries.target, store, settings, agent_id, trigger_id)
        )
    try:
        body = await ctx.body(target.body_limit)
    except PayloadTooLarge as exc:
        # Streamed past the limit: the target as it stands answers (404 if it is gone).
        now = await _DELIVERIES.run(
            functools.partial(deliveries.current, store, settings, target)
        )
        raise now.explain(exc) from None
    received = time.time()
    # A retry of an id this process answered before, judged on the loop when all it
    # needs is local and kept (core/deliveries.py ``retry_on_loop``): a trip to the
    # pool and back cost more CPU than the judgement. Anything else goes to the pool.
    known = deliveries.retry_on_loop(store, settings, target, body, headers, now=received)
    if known is not None:
        return Response(_answer(known), status_code=200, media_type="application/json")
    runner = ctx.services.runner
    # One trip to a worker thread for the whole judgement (the target checked again,
    # the signature, exactly once, the record and its run): the fsyncs of concurrent
    # deliveries overlap there (and their index rows share a transaction). On a pool of
    # its own rather than anyio's ``run_in_threadpool``, whose hand-off cost about as
    # much CPU as answering a retried id itself.
    work = functools.partial(
        deliveries.accept,
        store,
        settings,
        target,
        body,
        headers,
        headers.get("content-type", "application/octet-stream"),
        now=received,
        wake=runner.delivered if runner is not None else None,
    )
    run, created = await _DELIVERIES.run(work)
    return JSONResponse(run.to_json(), status_code=202 if created else 200)


async def list_runs(ctx: Ctx) -> Response:
    ctx.allow_query("triggerId", "status", "limit", "cursor")
    agent_id = _agent(ctx, "runs:read")
    page = runs_page(
        ctx.store,
        ctx.services.signer,
        agent_id,
        trigger_id=ctx.query("triggerId"),
        status=ctx.query("status"),
        cursor=ctx.query("cursor"),
        limit=ctx.limit(),
    )
    return JSONResponse({"runs": [r.to_json() for r in page.items], "nextCursor": page.next_cursor})


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
