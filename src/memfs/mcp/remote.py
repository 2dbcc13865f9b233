"""The tools answered by a memfs server over HTTP: ``memfs mcp --url URL``.

The key (``MEMFS_TOKEN``) is judged by the server; each tool is one call of the
Python client, its answer given back in the HTTP API's JSON shape, so a tool answers
the same text whichever way it reaches the store.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from memfs.client import Client
from memfs.client.errors import ApiError, MemfsClientError
from memfs.domain.memory_tool import ToolResult
from memfs.errors import MemfsError, Unavailable
from memfs.mcp.tools import Json

T = TypeVar("T")
_UPPER_NEXT = re.compile(r"_([a-z0-9])")


def camel(value: Any) -> Any:
    """A client dataclass as the API's JSON again (``content_sha256`` → ``contentSha256``);
    mappings inside (frontmatter metadata) keep their keys as stored."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            _UPPER_NEXT.sub(lambda m: m.group(1).upper(), f.name): camel(getattr(value, f.name))
            for f in dataclasses.fields(value)
        }
    if isinstance(value, tuple | list):
        return [camel(v) for v in value]
    if isinstance(value, Mapping):
        return dict(value)
    return value


class RemoteMemory:
    """One agent behind a memfs server, as the client's key sees it."""

    def __init__(self, client: Client, agent_id: str) -> None:
        self.client, self.agent_id = client, agent_id

    async def _call(self, work: Callable[[], T]) -> T:
        try:
            return await asyncio.to_thread(work)
        except ApiError as exc:
            raise MemfsError(exc.message, field=exc.field) from None
        except MemfsClientError as exc:
            raise Unavailable(f"the memfs server did not answer: {exc}") from None

    async def command(self, doc: Mapping[str, object], *, writes: bool) -> ToolResult:
        answer = await self._call(lambda: self.client.memory_command(self.agent_id, doc))
        return ToolResult(answer.ok, answer.result)

    async def history(self, path: str, limit: int, cursor: str | None) -> Json:
        page = await self._call(
            lambda: self.client.list_versions(self.agent_id, path, limit=limit, cursor=cursor)
        )
        out: Json = camel(page)
        return out

    async def read_version(self, path: str, version: int) -> Json:
        memory = await self._call(
            lambda: self.client.get_memory(self.agent_id, path, version=version)
        )
        out: Json = camel(memory)
        return out

    async def search(self, body: Json) -> Json:
        page = await self._call(
            lambda: self.client.search(
                body.get("query"),  # type: ignore[arg-type]  # any JSON: the server judges it
                agent_id=self.agent_id,
                path_prefix=body.get("pathPrefix"),
                metadata=body.get("metadata"),
                limit=body.get("limit"),
                page_token=body.get("pageToken"),
            )
        )
        out: Json = camel(page)
        return out
