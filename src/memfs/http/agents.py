"""Routes for agents and the per-agent memory summary."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from memfs import wire
from memfs.core.store import Agent
from memfs.core.summary import summary as agent_summary
from memfs.domain import paths
from memfs.errors import Conflict, InvalidRequest, NotFound
from memfs.http.context import Ctx, only_fields


def _agent_json(agent: Agent) -> dict[str, object]:
    return wire.agent_json(agent)


async def put_agent(ctx: Ctx) -> Response:
    ctx.allow_query()
    agent_id = paths.agent_id(ctx.params["agentId"])
    ctx.who.require("memories:write", agent_id)
    doc = await ctx.json()
    only_fields(doc, "name")
    name = doc.get("name")
    if "name" in doc and not isinstance(name, str):
        raise InvalidRequest("name must be a string", field="name")
    try:
        current = ctx.store.get_agent(agent_id)
    except NotFound:
        try:
            agent = await run_in_threadpool(ctx.store.create_agent, agent_id, name)
            return JSONResponse(_agent_json(agent), status_code=201)
        except Conflict:  # a concurrent PUT created it first: ours is then an update
            current = ctx.store.get_agent(agent_id)
    # Without a name, an existing agent keeps its own.
    if name is not None and current.name != name:
        current = await run_in_threadpool(
            lambda: ctx.store.rename_agent(agent_id, name, actor=ctx.who.actor)
        )
    return JSONResponse(_agent_json(current), status_code=200)


async def list_agents(ctx: Ctx) -> Response:
    ctx.allow_query("prefix", "limit", "cursor")
    ctx.who.require("memories:read")
    prefix = ctx.query("prefix", "") or ""
    limit = ctx.limit()
    digest = prefix
    after = None
    cursor = ctx.query("cursor")
    if cursor:
        after = ctx.services.signer.decode(cursor, "agents", "", digest, field="cursor")
        if not isinstance(after, str):
            raise InvalidRequest("cursor is not valid here", field="cursor")
    # Only agents the key covers count, so that a page before the end is never empty
    # and nextCursor is null exactly when no visible agent follows.
    page: list[Agent] = []
    while len(page) <= limit:
        batch = ctx.store.list_agents(prefix, after=after, limit=limit + 1)
        page += [a for a in batch if ctx.who.covers(a.agent_id)]
        if len(batch) <= limit:
            break
        after = batch[-1].agent_id
    more = len(page) > limit
    page = page[:limit]
    items = [_agent_json(a) for a in page]
    next_cursor = (
        ctx.services.signer.encode("agents", "", digest, page[-1].agent_id) if more else None
    )
    return JSONResponse({"agents": items, "nextCursor": next_cursor})


async def get_agent(ctx: Ctx) -> Response:
    ctx.allow_query()
    agent_id = paths.agent_id(ctx.params["agentId"])
    ctx.who.require("memories:read", agent_id)
    return JSONResponse(_agent_json(ctx.store.get_agent(agent_id)))


async def delete_agent(ctx: Ctx) -> Response:
    ctx.allow_query()
    agent_id = paths.agent_id(ctx.params["agentId"])
    ctx.who.require_admin()
    await run_in_threadpool(ctx.store.erase_agent, agent_id)
    return Response(status_code=204)


async def summary(ctx: Ctx) -> Response:
    ctx.allow_query()
    agent_id = paths.agent_id(ctx.params["agentId"])
    ctx.who.require("memories:read", agent_id)
    return JSONResponse(agent_summary(ctx.store, agent_id))
