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
    # Handed back in a list emptied here: an anyio worker keeps its last job (the future
    # holding the answer) until its next one, so an answer of a bulk log (≈ 100k change
    # objects) was freed by whichever request next used the thread pool, 16-20 ms of its
    # time at 100k memories; now it is freed with this response.
    box = await run_in_threadpool(
        lambda: [inspect(ctx.store, target, pages, as_of, ctx.services.signer)]
    )
    return JSONResponse(box.pop())


async def inspect_agent(ctx: Ctx) -> Response:
    agent_id = paths.agent_id(ctx.params["agentId"])
    ctx.who.require("inspect", agent_id)
    ctx.store.get_agent(agent_id)
    return await _run(ctx, Target("agent", agent_id))


async def inspect_scope(ctx: Ctx) -> Response:
    scope = paths.scope_id(ctx.params["scopeId"])
    ctx.who.require("inspect", scope)
    return await _run(ctx, Target("scope", scope))
