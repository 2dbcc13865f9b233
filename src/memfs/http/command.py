"""``memory:command``: Claude's memory-tool commands, each change a versioned commit."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from memfs.core.tool_store import StoreTool
from memfs.domain import paths
from memfs.domain.memory_tool import COMMAND_FIELDS, READ_ONLY, execute
from memfs.http.context import Ctx, only_fields
from memfs.http.memories import _message as commit_message

FIELDS = COMMAND_FIELDS
_READ_ONLY = READ_ONLY


async def memory_command(ctx: Ctx) -> Response:
    ctx.allow_query()
    agent_id = paths.agent_id(ctx.params["agentId"])
    doc = await ctx.json(ctx.services.settings.memory_bytes * 6 + 4096)
    name = doc.get("command")
    if isinstance(name, str) and name in FIELDS:
        only_fields(doc, *FIELDS[name])
    # Any JSON may come here (a list is unhashable): only a str can name a read-only command.
    action = "memories:read" if isinstance(name, str) and name in _READ_ONLY else "memories:write"
    ctx.who.require(action, agent_id)
    ctx.store.get_agent(agent_id)
    tool = StoreTool(ctx.store, agent_id, ctx.who.actor, commit_message(ctx))
    if action == "memories:read":  # a view commits nothing: no need to queue with writes
        result = await run_in_threadpool(execute, tool, doc)
    else:
        result = await ctx.commit(lambda: execute(tool, doc))
    return JSONResponse({"ok": result.ok, "result": result.result})
