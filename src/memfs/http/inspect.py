"""``memory:inspect`` routes for one agent and for a subject scope."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from memfs.core.inspect import Target, inspect, parse_request
from memfs.domain import paths
from memfs.http.context import Ctx


async def _run(ctx: Ctx, target: Target) -> Response:
    ctx.allow_query()
    doc = await ctx.json(64 * 1024)
    pages, as_of = parse_request(doc)
    # In the threadpool, as writes are: an asOf past the index clock waits for the
    # write lock (see inspect._settle), and a page of 200 chunks is real work.
    body = await run_in_threadpool(inspect, ctx.store, target, pages, as_of, ctx.services.signer)
    return JSONResponse(body)


async def inspect_agent(ctx: Ctx) -> Response:
    agent_id = paths.agent_id(ctx.params["agentId"])
    ctx.who.require("inspect", agent_id)
    ctx.store.get_agent(agent_id)
    return await _run(ctx, Target("agent", agent_id))


async def inspect_scope(ctx: Ctx) -> Response:
    scope = paths.scope_id(ctx.params["scopeId"])
    ctx.who.require("inspect", scope)
    return await _run(ctx, Target("scope", scope))
