"""The tools answered by the core on this machine: ``memfs mcp --data`` and ``/mcp``.

Each tool is one core call, judged by the caller's principal exactly as the HTTP
routes judge it (``core.auth``): the memory-tool commands through
``core.tool_store.StoreTool`` as ``memory:command`` runs them, ``history`` through
``core.browse.versions_page``, ``read_version`` through ``Store.read``, ``search`` through
``core.search``. Blocking store calls leave the event loop; commits go through
``write`` (the server's one writer thread) so they queue with the API's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from memfs import wire
from memfs.core import search
from memfs.core.auth import Principal
from memfs.core.browse import versions_page
from memfs.core.store import Store
from memfs.core.tokens import Signer
from memfs.core.tool_store import StoreTool
from memfs.domain.memory_tool import ToolResult, execute
from memfs.mcp.tools import Json

T = TypeVar("T")
Writer = Callable[[Callable[[], T]], Awaitable[T]]


async def in_thread(work: Callable[[], T]) -> T:
    return await asyncio.to_thread(work)


class LocalMemory:
    """One agent of ``store`` as ``principal`` sees it, commits recorded as ``actor``."""

    def __init__(
        self,
        store: Store,
        signer: Signer,
        agent_id: str,
        principal: Principal,
        *,
        actor: str | None = None,
        write: Writer[Any] = in_thread,
    ) -> None:
        self.store, self.signer, self.agent_id = store, signer, agent_id
        self.principal = principal
        self.actor = actor if actor is not None else principal.actor
        self.write = write

    def _require(self, action: str) -> None:
        self.principal.require(action, self.agent_id)
        self.store.get_agent(self.agent_id)  # 404 for an agent that doesn't exist

    async def command(self, doc: Mapping[str, object], *, writes: bool) -> ToolResult:
        def run() -> ToolResult:
            self._require("memories:write" if writes else "memories:read")
            return execute(StoreTool(self.store, self.agent_id, self.actor), doc)

        result: ToolResult = await (self.write(run) if writes else in_thread(run))
        return result

    async def history(self, path: str, limit: int, cursor: str | None) -> Json:
        def run() -> Json:
            self._require("memories:read")
            page = versions_page(self.store, self.signer, self.agent_id, path, cursor, limit)
            return {
                "versions": [wire.version_json(r) for r in page.items],
                "nextCursor": page.next_cursor,
            }

        return await in_thread(run)

    async def read_version(self, path: str, version: int) -> Json:
        def run() -> Json:
            self._require("memories:read")
            return wire.memory_json(self.store.read(self.agent_id, path, version))

        return await in_thread(run)

    async def search(self, body: Json) -> Json:
        def run() -> Json:
            self.principal.require("memories:read", self.agent_id)
            fields = search.request_fields(body)
            page = search.search(self.store, self.signer, agent_id=self.agent_id, **fields)
            return wire.search_page_json(page)

        return await in_thread(run)
