"""Indexing a whole log at once (reindex): the rows ``writes.apply_commit`` leaves for
each commit in turn, built in Python (``LogRows``: pure, so a worker process can build
them, see ``bulk_worker``) and written in a few large batched statements."""

from __future__ import annotations

import hashlib
import json
import operator
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from memfs.derived.index import search
from memfs.derived.index.links import LinkRow, add_links, link_rows
from memfs.derived.index.rows import listing_text
from memfs.derived.index.writes import raise_clock
from memfs.domain.commits import LOG_HEAD, parse_ts
from memfs.domain.content import Scalar, metadata_text
from memfs.errors import CorruptionError

# A commits row from the entry's text, bound once: SQLite takes the changes apart in one
# pass (json_each), the count and the log summary (inline contents taken out) from the
# same walk, and the first LOG_HEAD changes again only for a commit with more. The same
# text as COMMIT_CHANGES_SQL (the live insert's), which parses the entry three times.

_INSERT_COMMIT = (
    "INSERT INTO commits SELECT ?1, ?2, ?3, ?4, ?5, ?6, n,"
    f" CASE WHEN n <= {LOG_HEAD} THEN every ELSE (SELECT json_group_array("
    "json_remove(value, '$.content')) FROM json_each(?7, '$.changes')"
    f" WHERE key < {LOG_HEAD}) END, every FROM (SELECT COUNT(*) AS n,"
    " json_group_array(json_remove(value, '$.content')) AS every FROM json_each(?7, '$.changes'))"
)

CommitRow = tuple[str, int, int, int, str, str, str]
MetaKey = tuple[tuple[str, type, Any], ...]


def _meta_text(
    metadata: dict[str, Any], known: dict[MetaKey, str], dumps: Callable[[Any], str]
) -> str:
    """``dumps(metadata)``, once per distinct metadata: a log repeats the same metadata
    from commit to commit. The key tells True, 1 and 1.0 apart (they compare equal), and
    floats by their spelling (0.0 == -0.0)."""
    key = tuple(
        (k, v.__class__, repr(v) if v.__class__ is float else v) for k, v in metadata.items()
    )
    try:
        text = known.get(key)
    except TypeError:  # an unhashable value (not a scalar): encode it as it is
        return dumps(metadata)
    if text is None:
        text = known[key] = dumps(metadata)
    return text


@dataclass
class Tail:
    """What is written after a log's commits rows: every other table's rows."""

    versions: list[list[object]]
    memories: list[tuple[Any, ...]]
    meta: list[tuple[str, str, str, str]]
    blobs: dict[str, bytes]
    links: list[LinkRow]
    revision: int
    last_ts: int
    name: str | None
    commits: int
    memory_bytes: int


def _links_of(row: list[object], blobs: dict[str, bytes]) -> list[LinkRow]:
    sha, number, visible = row[5], row[2], row[11]
    if isinstance(sha, str) and isinstance(number, int) and isinstance(visible, int):
        return link_rows(str(row[0]), str(row[1]), number, visible, blobs.get(sha))
    return []


class LogRows:
    """The rows of one agent's log, built entry by entry in log order. ``blob(sha256)``
    reads a content too large to be inline when it is first named."""

    def __init__(self, agent: str, blob: Callable[[str], bytes]) -> None:
        self.agent = agent
        self._blob = blob
        self._commits: list[CommitRow] = []
        self._count = 0
        self._versions: list[list[object]] = []
        self._open: dict[str, int] = {}  # path → index of its newest row in _versions
        self._live: dict[str, tuple[Any, ...]] = {}  # path → memories row (no listing)
        self._metas: dict[str, dict[str, Scalar]] = {}
        self._blobs: dict[str, bytes] = {}
        self._revision = self._last_ts = 0
        self._name: str | None = None
        self._dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
        self._meta_texts: dict[MetaKey, str] = {}

    def add(self, where: str, text: str, doc: dict[str, Any]) -> None:
        """One log entry (key, text, JSON document); raises CorruptionError naming an
        unreadable one."""
        agent, versions, open_version, live = self.agent, self._versions, self._open, self._live
        blobs = self._blobs
        try:
            ts = parse_ts(doc["ts"])
            revision = doc["revision"]
            for change in doc["changes"]:
                path = change["path"]
                after = change["after"]
                version = int(change["version"])
                size = int(change["bytes"])
                description = change.get("description")
                metadata = change.get("metadata") or {}
                content = change.get("content")
                previous = open_version.get(path)
                if previous is not None:
                    row = versions[previous]
                    row[10] = row[12] = ts  # valid_to, visible_to
                meta_json = (
                    _meta_text(metadata, self._meta_texts, self._dumps) if metadata else "{}"
                )
                open_version[path] = len(versions)
                versions.append(
                    [
                        agent,
                        path,
                        version,
                        revision,
                        change["operation"],
                        after,
                        size,
                        description,
                        meta_json,
                        ts,
                        None,
                        ts,
                        None,
                    ]
                )
                if after is None:
                    live.pop(path, None)
                    self._metas.pop(path, None)
                    continue
                old = live.get(path)
                live[path] = (
                    agent,
                    path,
                    version,
                    after,
                    size,
                    description,
                    meta_json,
                    old[7] if old is not None else ts,  # an update keeps created_at
                    ts,
                )
                if metadata:
                    self._metas[path] = metadata
                else:
                    self._metas.pop(path, None)
                if content is not None:
                    data = content.encode()
                    if hashlib.sha256(data).hexdigest() != after:
                        bad = CorruptionError(
                            f"log entry {where}: inline content of {path} does not match its sha256"
                        )
                        bad.file = where  # type: ignore[attr-defined]
                        raise bad
                    blobs[after] = data
                elif after not in blobs:
                    blobs[after] = self._blob(after)  # checked by the caller's reader
            self._commits.append((agent, revision, ts, ts, doc["actor"], doc["message"], text))
            self._count += 1
            self._revision, self._last_ts = max(self._revision, revision), max(self._last_ts, ts)
            if doc.get("agentName") is not None:
                self._name = doc["agentName"]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptionError(f"log entry {where} is unreadable: {exc!r}") from None

    def take_commits(self) -> list[CommitRow]:
        """The commits rows made since the last call (they are final at once)."""
        rows, self._commits = self._commits, []
        return rows

    def tail(self) -> Tail:
        """Every other table's rows, after the last entry."""
        versions = self._versions
        # In primary-key order, the B-trees take rows as appends rather than scattered inserts.
        versions.sort(key=operator.itemgetter(1, 2))
        links: list[LinkRow] = []
        blobs = self._blobs
        for row in versions:  # every stored version's links, from the contents at hand
            links += _links_of(row, blobs)
        live = self._live.values()
        return Tail(
            versions=versions,
            memories=[
                (*row, listing_text(row[1], row[4], row[3], row[5], row[2], row[8])) for row in live
            ],
            meta=[
                (self.agent, path, k, metadata_text(v))
                for path, meta in self._metas.items()
                for k, v in meta.items()
            ],
            blobs=blobs,
            links=links,
            revision=self._revision,
            last_ts=self._last_ts,
            name=self._name,
            commits=self._count,
            memory_bytes=sum(row[4] for row in live),
        )


def write_commits(conn: sqlite3.Connection, rows: list[CommitRow]) -> None:
    conn.executemany(_INSERT_COMMIT, rows)


def write_tail(conn: sqlite3.Connection, agent: str, tail: Tail) -> None:
    """Every other table's rows of a log whose commits rows are written, into the
    agent's empty rows."""
    blobs = tail.blobs
    conn.executemany("INSERT INTO versions VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)", tail.versions)
    add_links(conn, tail.links)
    conn.executemany("INSERT INTO memories VALUES(?,?,?,?,?,?,?,?,?,?)", tail.memories)
    conn.executemany("INSERT INTO memory_meta VALUES(?,?,?,?)", tail.meta)
    conn.executemany(
        "INSERT OR IGNORE INTO blobs VALUES(?,?,?)",
        [(agent, sha, blobs[sha]) for sha in sorted(blobs)],
    )
    search.index_docs(
        conn, agent, ((row[1], row[3], row[5], blobs.get(row[3])) for row in tail.memories)
    )
    conn.execute(
        "UPDATE agents SET revision=MAX(revision, ?), last_ts=MAX(last_ts, ?),"
        " name=COALESCE(?, name), memory_count=memory_count+?,"
        " memory_bytes=memory_bytes+? WHERE agent_id=?",
        (tail.revision, tail.last_ts, tail.name, len(tail.memories), tail.memory_bytes, agent),
    )
    raise_clock(conn, tail.last_ts)


def bulk_load(
    conn: sqlite3.Connection,
    agent: str,
    entries: Iterable[tuple[str, str, dict[str, Any]]],
    blob: Callable[[str], bytes],
) -> int:
    """Index a whole log at once into an agent's empty rows; the same rows as applying
    each commit with ``apply_commit`` (visible at its timestamp), in a few batched
    statements instead of ten per commit. ``entries`` are (key, text, JSON document) of
    the log in order; ``blob(sha256)`` reads a content too large to be inline. Works on
    the documents rather than Commit objects (building those was half the cost).
    Returns the number of commits; raises CorruptionError naming an unreadable entry."""
    rows = LogRows(agent, blob)
    for where, text, doc in entries:
        rows.add(where, text, doc)
    write_commits(conn, rows.take_commits())
    tail = rows.tail()
    write_tail(conn, agent, tail)
    return tail.commits
