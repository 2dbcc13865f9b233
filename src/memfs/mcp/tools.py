"""The MCP tool table: every tool's name, JSON schema, description and scope.

Both transports list and call exactly these tools. The six memory-tool commands
answer the texts of ``memory:command`` (``domain.memory_tool.execute``, which checks
their argument types itself); ``search``, ``history`` and ``read_version`` answer the
JSON of the matching HTTP reads. A refusal is a tool error (``is_error``) whose text
says what to do, so the model can correct itself; nothing here raises to the SDK.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from memfs.domain.memory_tool import COMMAND_FIELDS, READ_ONLY, ToolResult
from memfs.errors import MemfsError

log = logging.getLogger("memfs.mcp")

Json = dict[str, Any]


class Memory(Protocol):
    """One agent's memory as the tools see it; a scope refusal raises Forbidden."""

    async def command(self, doc: Mapping[str, object], *, writes: bool) -> ToolResult:
        """One memory-tool command, as ``memory:command`` answers it."""
        ...

    async def history(self, path: str, limit: int, cursor: str | None) -> Json:
        """``GET …/versions?path=``: ``{"versions": […], "nextCursor": …}``."""
        ...

    async def read_version(self, path: str, version: int) -> Json:
        """``GET …/memories/{path}?version=``: the memory JSON of that version."""
        ...

    async def search(self, body: Json) -> Json:
        """``POST …/memory:query`` with ``body``: ``{"results": […], "nextPageToken": …}``."""
        ...


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    schema: Json
    writes: bool  # needs memories:write (else memories:read)


_PATH = {
    "type": "string",
    "description": "A path under /memories, e.g. /memories/notes/project.md",
}
HISTORY_LIMIT = 50  # versions per history page unless the model asks for fewer
MAX_HISTORY_LIMIT = 200


def _object(properties: Json, required: list[str]) -> Json:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


TOOLS: tuple[Tool, ...] = (
    Tool(
        "view",
        "View a memory or folder",
        "Show a folder of your memory (its files and subfolders, two levels deep, with "
        "sizes) or a memory file with line numbers. Start every task by viewing "
        "/memories to see what you already know. view_range [first, last] shows only "
        "those lines of a file (last -1 = to the end).",
        _object(
            {
                "path": _PATH,
                "view_range": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "minItems": 2,
                    "maxItems": 2,
                    "description": "Optional [first_line, last_line] of a file, 1-based",
                },
            },
            ["path"],
        ),
        writes=False,
    ),
    Tool(
        "create",
        "Create or overwrite a memory",
        "Write a memory file: creates it, or replaces the whole file if it exists. Each "
        "write is a new version; older versions stay readable with history and "
        "read_version. Keep one topic per file, in Markdown.",
        _object(
            {"path": _PATH, "file_text": {"type": "string", "description": "The whole file"}},
            ["path", "file_text"],
        ),
        writes=True,
    ),
    Tool(
        "str_replace",
        "Replace text in a memory",
        "Replace the one occurrence of old_str in a memory file with new_str. old_str "
        "must appear exactly once (include surrounding lines to make it unique).",
        _object(
            {
                "path": _PATH,
                "old_str": {"type": "string", "description": "Text that appears exactly once"},
                "new_str": {"type": "string", "description": "Its replacement (may be empty)"},
            },
            ["path", "old_str", "new_str"],
        ),
        writes=True,
    ),
    Tool(
        "insert",
        "Insert lines into a memory",
        "Insert insert_text after line insert_line of a memory file (0 inserts at the top).",
        _object(
            {
                "path": _PATH,
                "insert_line": {
                    "type": "integer",
                    "minimum": 0,
                    "description": "Insert after this line; 0 = before the first line",
                },
                "insert_text": {"type": "string", "description": "The text to insert"},
            },
            ["path", "insert_line", "insert_text"],
        ),
        writes=True,
    ),
    Tool(
        "delete",
        "Delete a memory or folder",
        "Delete a memory file, or a folder with everything under it. Deleted memories "
        "stay in their history and can be read back with read_version.",
        _object({"path": _PATH}, ["path"]),
        writes=True,
    ),
    Tool(
        "rename",
        "Rename or move a memory",
        "Rename or move a memory file or folder to new_path (which must not exist).",
        _object(
            {
                "old_path": {**_PATH, "description": "The file or folder to move"},
                "new_path": {**_PATH, "description": "Where it goes (must not exist)"},
            },
            ["old_path", "new_path"],
        ),
        writes=True,
    ),
    Tool(
        "search",
        "Search your memories",
        "Full-text search over your memories, best match first, each with a snippet. "
        'The query is plain words (all must match), "exact phrases", prefix* and '
        "-excluded words; case, accents and English word endings don't matter. "
        "Narrow with pathPrefix (e.g. /memories/projects/) or frontmatter metadata. "
        "Pass nextPageToken back as pageToken for more results.",
        _object(
            {
                "query": {"type": "string", "description": "What to look for (≤ 1 KiB)"},
                "pathPrefix": {
                    "type": "string",
                    "description": "Only memories whose path starts with this",
                },
                "metadata": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "Only memories whose frontmatter metadata has these values",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 50,
                    "description": "Results per page (default 10)",
                },
                "pageToken": {"type": "string", "description": "nextPageToken of a prior call"},
            },
            ["query"],
        ),
        writes=False,
    ),
    Tool(
        "history",
        "List the versions of a memory",
        "The versions of one memory path, oldest first: each version's number, operation "
        "(created, modified, renamed, deleted), content sha256, size, when it was valid, "
        "who wrote it and the commit message. Read an old version with read_version. "
        "Pass nextCursor back as cursor for more.",
        _object(
            {
                "path": _PATH,
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_HISTORY_LIMIT,
                    "description": f"Versions per page (default {HISTORY_LIMIT})",
                },
                "cursor": {"type": "string", "description": "nextCursor of a prior call"},
            },
            ["path"],
        ),
        writes=False,
    ),
    Tool(
        "read_version",
        "Read an old version of a memory",
        "The content and details of one version of a memory, including versions that "
        "were replaced or deleted since (see history for the version numbers).",
        _object(
            {
                "path": _PATH,
                "version": {"type": "integer", "minimum": 1, "description": "A version number"},
            },
            ["path", "version"],
        ),
        writes=False,
    ),
)

BY_NAME = {tool.name: tool for tool in TOOLS}
assert set(COMMAND_FIELDS) <= set(BY_NAME)


@dataclass(frozen=True)
class Answer:
    """A tool call's result text; ``error`` where MCP's ``isError`` is true."""

    text: str
    error: bool = False


class _BadArguments(Exception):
    pass


async def call(memory: Memory, name: str, arguments: Mapping[str, Any] | None) -> Answer:
    """Run tool ``name``; any refusal, bad argument or failure is a tool error."""
    tool = BY_NAME.get(name)
    if tool is None:
        return Answer(f"Error: no tool named {name!r}; the tools are {', '.join(BY_NAME)}", True)
    args = dict(arguments or {})
    try:
        return await _run(memory, tool, args)
    except _BadArguments as exc:
        return Answer(f"Error: {exc}", True)
    except MemfsError as exc:
        return Answer(f"Error: {exc.message}", True)


async def _run(memory: Memory, tool: Tool, args: dict[str, Any]) -> Answer:
    allowed = tool.schema["properties"]
    unknown = [key for key in args if key not in allowed]
    if unknown:
        raise _BadArguments(
            f"unknown argument {unknown[0]!r}; {tool.name} takes {', '.join(allowed)}"
        )
    if tool.name in COMMAND_FIELDS:
        # execute() checks the fields' presence and types with memory:command's texts.
        result = await memory.command(
            {"command": tool.name, **args}, writes=tool.name not in READ_ONLY
        )
        return Answer(result.result, not result.ok)
    if tool.name == "history":
        limit = _integer(args, "limit", HISTORY_LIMIT, 1, MAX_HISTORY_LIMIT)
        page = await memory.history(_string(args, "path"), limit, _optional(args, "cursor"))
        return _json(page)
    if tool.name == "read_version":
        version = _integer(args, "version", None, 1, 2**63 - 1)
        return _json(await memory.read_version(_string(args, "path"), version))
    # memory:query's core judges the fields, with the texts of its 400s.
    return _json(await memory.search(args))


def _json(value: Json) -> Answer:
    return Answer(json.dumps(value, ensure_ascii=False, indent=1))


def _string(args: Mapping[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise _BadArguments(f"{name} is required and must be a string")
    return value


def _optional(args: Mapping[str, Any], name: str) -> str | None:
    value = args.get(name)
    if value is not None and not isinstance(value, str):
        raise _BadArguments(f"{name} must be a string")
    return value or None


def _integer(
    args: Mapping[str, Any], name: str, default: int | None, low: int, high: int
) -> int:
    value = args.get(name, default)
    # bool is an int in Python; JSON true is not a number.
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise _BadArguments(f"{name} must be an integer from {low} to {high}")
    return value
