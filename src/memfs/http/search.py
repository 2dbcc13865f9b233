"""``memory:query`` routes: full-text search in one agent, or across a subject scope."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from memfs import wire
from memfs.core.search import request_fields, search
from memfs.domain import paths
from memfs.http.context import Ctx

_BODY_BYTES = 64 * 1024  # as inspect's: a 1 KiB query, filters and a token fit easily


async def query_agent(ctx: Ctx) -> Response:
    ctx.allow_query()
    agent_id = paths.agent_id(ctx.params["agentId"])
    ctx.who.require("memories:read", agent_id)
    fields = request_fields(await ctx.json(_BODY_BYTES))
    # In the threadpool: ranking a common word over a large index is real work.
    page = await run_in_threadpool(
        lambda: search(ctx.store, ctx.services.signer, agent_id=agent_id, **fields)
    )
    return JSONResponse(wire.search_page_json(page))


async def query_scope(ctx: Ctx) -> Response:
    ctx.allow_query()
    scope = paths.scope_id(ctx.params["scopeId"])
    ctx.who.require("memories:read", scope)
    fields = request_fields(await ctx.json(_BODY_BYTES))
    page = await run_in_threadpool(
        lambda: search(ctx.store, ctx.services.signer, scope=scope, **fields)
    )
    return JSONResponse(wire.search_page_json(page))
