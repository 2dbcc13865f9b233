"""The index's row types and the listing JSON each live memory keeps."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from memfs.domain.content import Scalar
from memfs.domain.listing import listing_fields

Connection = sqlite3.Connection


# Characters right after '/' and after U+10FFFF in bytewise UTF-8 order: a folder F
# holds exactly the paths p with F + "/" < p < F + "0".
_AFTER_SLASH = "0"


@dataclass(frozen=True)
class AgentRow:
    agent_id: str
    name: str
    store_id: str
    created_at: int
    revision: int
    last_ts: int


@dataclass(frozen=True)
class MemoryRow:
    path: str
    version: int
    sha256: str
    size: int
    description: str | None
    metadata: dict[str, Scalar]
    created_at: int
    updated_at: int


@dataclass(frozen=True)
class VersionRow:
    path: str
    version: int
    revision: int
    operation: str
    sha256: str | None
    size: int
    description: str | None
    metadata: dict[str, Scalar]
    valid_from: int
    valid_to: int | None
    actor: str
    message: str


@dataclass(frozen=True)
class CommitRow:
    revision: int
    ts: int
    visible_at: int
    actor: str
    message: str
    changes: list[dict[str, object]]


@dataclass(frozen=True)
class FolderEntry:
    path: str  # the folder, e.g. /memories/conventions


class IndexGone(Exception):
    """The index file was deleted or replaced under this process (inode check)."""


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def listing_text(
    path: str, size: int, sha256: str, description: str | None, version: int, updated_at: int
) -> str:
    """A memory as listings show it (``domain.listing``), as the JSON text an HTTP
    page joins: kept in the memory's row, so a page is its rows' texts joined."""
    return _encode(listing_fields(path, size, sha256, description, version, updated_at))


def listing_page(items: Sequence[MemoryRow | FolderEntry], more: bool) -> ListingJson:
    """A page of ``Store.list_memories`` as ``list_memories_json`` answers it."""
    last = None
    if items:
        end = items[-1]
        last = end.path + "/" if isinstance(end, FolderEntry) else end.path
    return ListingJson(
        b",".join(
            listing_text(i.path, i.size, i.sha256, i.description, i.version, i.updated_at).encode()
            for i in items
            if not isinstance(i, FolderEntry)
        ),
        [i.path for i in items if isinstance(i, FolderEntry)],
        last,
        more,
    )


def _metadata(raw: object) -> dict[str, Scalar]:
    # Most memories have no metadata besides their description: skip the parser then.
    if raw == "{}":
        return {}
    parsed: dict[str, Scalar] = json.loads(str(raw))
    return parsed


_MEMORY_COLUMNS = "path, version, sha256, bytes, description, metadata, created_at, updated_at"


def _memory(row: Sequence[object]) -> MemoryRow:
    return MemoryRow(
        path=str(row[0]),
        version=int(row[1]),  # type: ignore[call-overload]
        sha256=str(row[2]),
        size=int(row[3]),  # type: ignore[call-overload]
        description=row[4] if isinstance(row[4], str) else None,
        metadata=_metadata(row[5]),
        created_at=int(row[6]),  # type: ignore[call-overload]
        updated_at=int(row[7]),  # type: ignore[call-overload]
    )


_VERSION_SELECT = (
    "SELECT v.path, v.version, v.revision, v.operation, v.sha256, v.bytes, v.description, "
    "v.metadata, v.valid_from, v.valid_to, c.actor, c.message FROM versions v "
    "JOIN commits c ON c.agent_id=v.agent_id AND c.revision=v.revision "
)


def _version(row: Sequence[object]) -> VersionRow:
    return VersionRow(
        path=str(row[0]),
        version=int(row[1]),  # type: ignore[call-overload]
        revision=int(row[2]),  # type: ignore[call-overload]
        operation=str(row[3]),
        sha256=row[4] if isinstance(row[4], str) else None,
        size=int(row[5]),  # type: ignore[call-overload]
        description=row[6] if isinstance(row[6], str) else None,
        metadata=_metadata(row[7]),
        valid_from=int(row[8]),  # type: ignore[call-overload]
        valid_to=int(row[9]) if row[9] is not None else None,  # type: ignore[call-overload]
        actor=str(row[10]),
        message=str(row[11]),
    )


@dataclass(frozen=True)
class ListingJson:
    """A page of ``list_memories`` with each memory already as JSON text."""

    memories: bytes  # the memories' listing objects joined by "," (a JSON array's inside)
    folders: list[str]  # depth-one subfolders, in order
    last: str | None  # the page's last entry as an ``after``: a path, or a folder + "/"
    more: bool
