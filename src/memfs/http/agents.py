"""Routes for agents and the per-agent memory summary."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from memfs import wire
from memfs.core.runs import Runs
from memfs.core.store import Agent
from memfs.domain import paths
from memfs.domain.commits import format_ts
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
    agent = ctx.store.get_agent(agent_id)
    count, total = ctx.store.agent_stats(agent_id)
    runs = Runs(ctx.store).counts(agent_id)
    by_status = runs["by_status"]
    pending = sum(by_status.get(s, 0) for s in ("queued", "running", "delayed"))
    if by_status.get("running"):
        state = "updating"
    elif by_status.get("delayed"):
        state = "delayed"
    # A rename is a commit too, but it writes no memory: the agent still waits.
    elif not by_status and (agent.revision == 0 or not ctx.store.ever_written(agent_id)):
        state = "waiting"
    else:
        state = "idle"
    return JSONResponse(
        {
            "agentId": agent.agent_id,
            "agentName": agent.name,
            "memoryStoreId": agent.memory_store_id,
            "memoryCount": count,
            "totalBytes": total,
            "revision": agent.revision,
            "state": state,
            "pendingRunCount": pending,
            "failedRunCount": by_status.get("failed", 0),
            "lastUpdatedAt": format_ts(agent.last_ts) if agent.revision else None,
            "lastCheckedAt": _ts(runs["last_finished"]),
            "nextRetryAt": _ts(runs["next_retry"]),
        }
    )


def _ts(value: int | None) -> str | None:
    return format_ts(value) if value is not None else None
