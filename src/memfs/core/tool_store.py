"""The memory tool's store: Claude's memory-tool commands over one agent of a Store.

``domain.memory_tool`` holds the tool's semantics; this is the ToolStore it runs on,
each change one versioned commit. Every edge that offers the tool (HTTP today, MCP
later) uses this one.
"""

from __future__ import annotations

from memfs.core.store import Delete, Move, Put, Store
from memfs.derived import index
from memfs.domain import paths
from memfs.errors import NotFound


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
        with self.store.index.read_session() as ix:
            return ix.is_folder(self.agent_id, path)

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
