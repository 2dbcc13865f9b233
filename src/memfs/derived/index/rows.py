"""The index's row types and the listing JSON each live memory keeps."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from memfs.domain.commits import LOG_HEAD, Change, Commit
from memfs.domain.content import Scalar
from memfs.domain.listing import listing_fields
from memfs.domain.records import AgentRow as AgentRow
from memfs.domain.records import CommitRow as CommitRow
from memfs.domain.records import FolderEntry as FolderEntry
from memfs.domain.records import ListingJson as ListingJson
from memfs.domain.records import MemoryRow as MemoryRow
from memfs.domain.records import PathState as PathState
from memfs.domain.records import VersionRow as VersionRow

Connection = sqlite3.Connection


# Characters right after '/' and after U+10FFFF in bytewise UTF-8 order: a folder F
# holds exactly the paths p with F + "/" < p < F + "0".
_AFTER_SLASH = "0"


def commit_changes(commit: Commit) -> tuple[int, str, str]:
    """A live commit's changes columns, joined from the changes' own JSON texts (made
    once per change, the log entry made from them too: ``Change.json_text``) rather than
    by SQLite parsing its entry (as the bulk load does, ``bulk.py``): byte for byte the
    same texts (property-tested against SQLite's JSON functions)."""
    texts = [change.json_text for change in commit.changes]
    every = "[" + ",".join(texts) + "]"
    head = every if len(texts) <= LOG_HEAD else "[" + ",".join(texts[:LOG_HEAD]) + "]"
    return len(texts), head, every


def commit_head(changes: list[object]) -> list[object]:
    """The first changes a commits row keeps apart (the second changes column)."""
    return changes[:LOG_HEAD]


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


# Store.read's common case in one statement (both engines; PostgreSQL swaps ? for %s):
# the agent (no row: it does not exist), its damage, the memory and the index's copy of
# its content. Four lookups cost four statements' overhead, which was most of a read.
_MEMORY_READ = (
    "SELECT d.file, d.reason, m.version, m.sha256, m.bytes, m.description, m.metadata, "
    "m.created_at, m.updated_at, b.content FROM agents a "
    "LEFT JOIN damage d ON d.agent_id=a.agent_id "
    "LEFT JOIN memories m ON m.agent_id=a.agent_id AND m.path=? "
    "LEFT JOIN blobs b ON b.agent_id=a.agent_id AND b.sha256=m.sha256 "
    "WHERE a.agent_id=?"
)

# (damage as (file, reason), the memory's row, the index's copy of its content): what
# ``memory_read`` answers for an agent that exists.
MemoryRead = tuple[tuple[str, str] | None, MemoryRow | None, bytes | None]


# Parsed metadata texts of recent reads (bounded: emptied when full). Each read gets
# its own copy, a shallow one being whole: metadata values are scalars.
_PARSED: dict[str, dict[str, Scalar]] = {}
_PARSED_MAX = 4096


def _metadata_of_read(raw: object) -> dict[str, Scalar]:
    if raw == "{}":
        return {}
    text = str(raw)
    parsed = _PARSED.get(text)
    if parsed is None:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        parsed = _PARSED[text] = json.loads(text)
    return dict(parsed)


def _memory_read(path: str, row: Sequence[object]) -> MemoryRead:
    damage = (str(row[0]), str(row[1])) if row[0] is not None else None
    if row[2] is None:
        return damage, None, None
    # The row's fields set in one dict update: a frozen dataclass's __init__ sets each
    # field through object.__setattr__, which was a tenth of a read by path. The
    # engines hand back these columns' own types (INTEGER, TEXT), so no conversion.
    memory = object.__new__(MemoryRow)
    memory.__dict__.update(
        path=path,
        version=row[2],
        sha256=row[3],
        size=row[4],
        description=row[5],
        metadata=_metadata_of_read(row[6]),
        created_at=row[7],
        updated_at=row[8],
    )
    content = row[9]
    return damage, memory, content if content.__class__ is bytes else _content(content)


def _content(content: object) -> bytes | None:
    # psycopg answers a BYTEA as memoryview (SQLite as bytes): copy that into bytes.
    return bytes(content) if isinstance(content, bytes | memoryview) else None


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


def live_delta(commit: Commit) -> tuple[int, int]:
    """(count, bytes) of the live rows a commit leaves at the paths it touches (the
    last change of a path wins): what it adds back after their old rows went out."""
    last = {c.path: c for c in commit.changes}
    live = [c for c in last.values() if c.after is not None]
    return len(live), sum(c.size for c in live)


def metadata_json(change: Change) -> str:
    """A change's metadata as the versions and memories rows keep it (its text in the
    log entry, made once)."""
    return change.metadata_text


def version_row(
    commit: Commit, change: Change, visible_at: int, meta_json: str
) -> tuple[object, ...]:
    """The new versions row of a change, without its (NULL) ``valid_to`` and
    ``visible_to``: agent, path, version, revision, operation, sha256, bytes,
    description, metadata, valid_from, visible_from. Both engines insert exactly this."""
    return (
        commit.agent_id,
        change.path,
        change.version,
        commit.revision,
        change.operation,
        change.after,
        change.size,
        change.description,
        meta_json,
        commit.ts,
        visible_at,
    )


def memory_row(commit: Commit, change: Change, meta_json: str) -> tuple[object, ...]:
    """The memories row a stored change leaves (an update keeps the row's created_at:
    the engines' upserts leave it out of the columns they update)."""
    assert change.after is not None  # a tombstone leaves no memories row
    return (
        commit.agent_id,
        change.path,
        change.version,
        change.after,
        change.size,
        change.description,
        meta_json,
        commit.ts,
        commit.ts,
        listing_text(
            change.path, change.size, change.after, change.description, change.version, commit.ts
        ),
    )
