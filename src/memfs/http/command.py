"""``memory:command``: Claude's memory-tool commands, each change a versioned commit."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from memfs.core.store import Delete, Move, Put, Store
from memfs.derived import index
from memfs.domain import paths
from memfs.domain.memory_tool import execute
from memfs.errors import NotFound
from memfs.http.context import Ctx, only_fields
from memfs.http.memories import _message as commit_message

_READ_ONLY = {"view"}
# The fields of each command of memory_20250818; any other field is a 400, as for
# every JSON body (a typo such as "file_txt" must not pass as a missing field).
FIELDS = {
    "view": ("command", "path", "view_range"),
    "create": ("command", "path", "file_text"),
    "str_replace": ("command", "path", "old_str", "new_str"),
    "insert": ("command", "path", "insert_line", "insert_text"),
    "delete": ("command", "path"),
    "rename": ("command", "old_path", "new_path"),
}


class StoreTool:
    """The memory tool's ToolStore over one agent of a Store, committing as ``actor``."""

    def __init__(self, store: Store, agent_id: str, actor: str, message: str = "") -> None:
        self.store, self.agent_id, self.actor = store, agent_id, actor
        self.message = message  # the request's Memfs-Message, if any
        self.memory_bytes = store.memory_bytes

    def read_file(self, path: str) -> str | None:
        try:
            return self.store.read(self.agent_id, path).content.decode()
        except NotFound:
            return None

    def is_folder(self, path: str) -> bool:
        if path == paths.ROOT:
            return True
        with self.store.index.read() as conn:
            return index.is_folder(conn, self.agent_id, path)

    def files_under(self, folder: str) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        after: str | None = None
        while True:
            page, more = self.store.list_memories(self.agent_id, folder, after=after, limit=1000)
            out.extend(
                (row.path, row.size) for row in page if not isinstance(row, index.FolderEntry)
            )
            if not more:
                return out
            after = page[-1].path

    def write_file(self, path: str, content: str, *, create_only: bool) -> None:
        self.store.apply(
            self.agent_id,
            [Put(path, content.encode(), create_only=create_only, lenient=True)],
            actor=self.actor,
            message=self.message or "memory tool",
        )

    def delete_paths(self, paths_: list[str]) -> None:
        self.store.apply(
            self.agent_id,
            [Delete(p) for p in paths_],
            actor=self.actor,
            message=self.message or "memory tool: delete",
        )

    def move_paths(self, moves: list[tuple[str, str]]) -> None:
        self.store.apply(
            self.agent_id,
            [Move(a, b) for a, b in moves],
            actor=self.actor,
            message=self.message or "memory tool: rename",
        )


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
