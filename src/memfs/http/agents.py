"""Routes for agents and the per-agent memory summary."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from memfs import wire
from memfs.core.browse import agents_page
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
    page = agents_page(
        ctx.store,
        ctx.services.signer,
        ctx.who,
        ctx.query("prefix", "") or "",
        ctx.query("cursor"),
        ctx.limit(),
    )
    items = [_agent_json(a) for a in page.items]
    return JSONResponse({"agents": items, "nextCursor": page.next_cursor})


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
