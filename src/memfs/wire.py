"""Text the CLI prints: listings, git-style logs, unified diffs, JSON shapes.

Pure functions from store records to strings or JSON-ready dicts, so that the CLI's
``--json`` and the HTTP API describe a thing with the same field names.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable
from typing import Any

from memfs.core.search import SearchPage
from memfs.core.store import Agent, Memory
from memfs.domain.commits import Change, Commit, format_ts
from memfs.domain.listing import listing_fields
from memfs.domain.records import (
    CommitRow,
    FolderEntry,
    ListingJson,
    MemoryRow,
    SearchHit,
    VersionRow,
)

_OP_LETTER = {"created": "A", "modified": "M", "deleted": "D", "renamed": "R"}


def agent_json(agent: Agent, *, memory_count: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "agentId": agent.agent_id,
        "name": agent.name,
        "memoryStoreId": agent.memory_store_id,
        "createdAt": format_ts(agent.created_at),
        "revision": agent.revision,
    }
    if memory_count is not None:
        out["memoryCount"] = memory_count
    return out


def listing_json(row: MemoryRow) -> dict[str, Any]:
    return listing_fields(
        row.path, row.size, row.sha256, row.description, row.version, row.updated_at
    )


def listing_page_body(page: ListingJson, total: int | None, next_cursor: str | None) -> bytes:
    """The body of a memory listing: ``{"memories", "folders", "total"?, "nextCursor"}``,
    byte for byte what ``JSONResponse`` writes for that dict."""
    tail = f',"total":{total}' if total is not None else ""
    tail += f',"nextCursor":{dumps(next_cursor)}}}'
    folders = dumps(page.folders) if page.folders else "[]"
    return b"".join(
        (b'{"memories":[', page.memories, b'],"folders":', folders.encode(), tail.encode())
    )


def dumps(value: object) -> str:
    """JSON as Starlette's ``JSONResponse`` writes it (compact, UTF-8 unescaped)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def memory_json(memory: Memory) -> dict[str, Any]:
    return {
        "path": memory.path,
        "content": memory.content.decode(),
        "bytes": memory.size,
        "contentSha256": memory.sha256,
        "description": memory.description,
        "metadata": memory.metadata,
        "version": memory.version,
        "createdAt": format_ts(memory.created_at),
        "updatedAt": format_ts(memory.updated_at),
    }


def version_json(row: VersionRow) -> dict[str, Any]:
    return {
        "version": row.version,
        "operation": row.operation,
        "contentSha256": row.sha256,
        "bytes": row.size,
        "revision": row.revision,
        "validFrom": format_ts(row.valid_from),
        "validTo": format_ts(row.valid_to) if row.valid_to is not None else None,
        "actor": row.actor,
        "message": row.message,
    }


def search_hit_json(hit: SearchHit) -> dict[str, Any]:
    return {
        "agentId": hit.agent_id,
        "path": hit.path,
        "version": hit.version,
        "contentSha256": hit.sha256,
        "description": hit.description,
        "updatedAt": format_ts(hit.updated_at),
        "score": float(f"{hit.score:.6g}"),  # 6 significant digits: tiny stores score ~1e-6
        "snippet": hit.snippet,
    }


def search_page_json(page: SearchPage) -> dict[str, Any]:
    """memory:query's answer: ``{"results": [...], "nextPageToken": ""}``."""
    return {
        "results": [search_hit_json(h) for h in page.results],
        "nextPageToken": page.next_page_token,
    }


def commit_json(row: CommitRow) -> dict[str, Any]:
    return {
        "revision": row.revision,
        "timestamp": format_ts(row.ts),
        "actor": row.actor,
        "message": row.message,
        "changes": row.changes,
    }


def ls_lines(items: Iterable[MemoryRow | FolderEntry], *, long: bool) -> Iterable[str]:
    for item in items:
        if isinstance(item, FolderEntry):
            yield f"{'':>4}  {'':>8}  {'':12}  {item.path}/" if long else f"{item.path}/"
        elif long:
            desc = f"  {item.description}" if item.description else ""
            yield f"v{item.version:<3}  {item.size:>8}  {item.sha256[:12]}  {item.path}{desc}"
        else:
            yield item.path


def commit_header(revision: int, ts: int, actor: str, message: str) -> list[str]:
    lines = [f"revision {revision}", f"Actor: {actor}", f"Date:  {format_ts(ts)}", ""]
    lines += [f"    {line}" for line in (message or "(no message)").splitlines()]
    lines.append("")
    return lines


def change_line(change: dict[str, Any] | Change) -> str:
    c = change.to_json() if isinstance(change, Change) else change
    extra = ""
    if c.get("renamedFrom"):
        extra = f" (from {c['renamedFrom']})"
    elif c.get("renamedTo"):
        extra = f" (to {c['renamedTo']})"
    return f"    {_OP_LETTER.get(c['operation'], '?')} {c['path']} v{c['version']}{extra}"


def patch(path: str, old: bytes | None, new: bytes | None, old_label: str, new_label: str) -> str:
    """A unified diff of two versions of a memory (git's a/ b/ labels)."""
    a = old.decode(errors="replace").splitlines(keepends=True) if old is not None else []
    b = new.decode(errors="replace").splitlines(keepends=True) if new is not None else []
    lines = difflib.unified_diff(
        a,
        b,
        fromfile=f"a{path}@{old_label}" if old is not None else "/dev/null",
        tofile=f"b{path}@{new_label}" if new is not None else "/dev/null",
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def commit_text(commit: Commit) -> list[str]:
    lines = commit_header(commit.revision, commit.ts, commit.actor, commit.message)
    lines += [change_line(c) for c in commit.changes]
    if commit.agent_name is not None:
        lines.append(f"    agent renamed to {commit.agent_name!r}")
    return lines
