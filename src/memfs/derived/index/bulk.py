"""Indexing a whole log at once (reindex): the rows ``writes.apply_commit`` leaves for
each commit in turn, built in Python and written in a few large batched statements."""

from __future__ import annotations

import hashlib
import itertools
import json
import operator
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

from memfs.derived.index import search
from memfs.derived.index.links import LinkRow, add_links, link_rows
from memfs.derived.index.rows import listing_text
from memfs.derived.index.writes import raise_clock
from memfs.domain.commits import LOG_HEAD, parse_ts
from memfs.domain.content import Scalar, metadata_text
from memfs.errors import CorruptionError

# A commits row from the entry's text, bound once: SQLite takes the changes apart
# (json_each), the count and the log summary (inline contents taken out), and the first
# LOG_HEAD changes again only for a commit with more (?8 is the change count, known to
# Python already). The same texts as rows.commit_changes (the live insert's). A
# single-row VALUES, not INSERT … SELECT: SQLite gives a statement that may write many
# rows a statement journal, and inside a savepoint, or once the full-text table is in
# the transaction, each execution copied every page it touched into that journal's
# temp file (17 against 9 µs a commit, docs/benchmarks.md). The summary is walked
# twice for a short commit (head and all); that costs less.
_CHANGES = (
    "(SELECT json_group_array(json_remove(value, '$.content')) FROM json_each(?7, '$.changes'))"
)
_INSERT_COMMIT = (
    "INSERT INTO commits VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?8,"
    f" CASE WHEN ?8 <= {LOG_HEAD} THEN {_CHANGES} ELSE"
    " (SELECT json_group_array(json_remove(value, '$.content')) FROM json_each(?7, '$.changes')"
    f" WHERE key < {LOG_HEAD}) END, {_CHANGES})"
)
# A one-change commit's row (most are): both changes columns are the entry without
# that change's inline content, its changes array taken out: one json_remove and one
# json_extract instead of a json_each walk and a json_remove per change (8 against
# 10 µs a commit, in CPU; about 17k user instructions more than main's INSERT … SELECT,
# whose journal's system calls cost more than that).
_ONE_CHANGE = "json_extract(json_remove(?7, '$.changes[0].content'), '$.changes')"
_INSERT_ONE_CHANGE_COMMIT = (
    f"INSERT INTO commits VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?8, {_ONE_CHANGE}, {_ONE_CHANGE})"
)


def _insert_commits(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    """The commits rows in log order (rowids as the live inserts give them), each run
    of one-change commits by its own statement."""
    for one, run in itertools.groupby(rows, key=lambda row: row[7] == 1):
        conn.executemany(_INSERT_ONE_CHANGE_COMMIT if one else _INSERT_COMMIT, run)


def _meta_text(
    metadata: dict[str, Any],
    known: dict[tuple[tuple[str, type, Any], ...], str],
    dumps: Callable[[Any], str],
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


def bulk_load(
    conn: sqlite3.Connection,
    agent: str,
    entries: Iterable[tuple[str, str, dict[str, Any]]],
    blob: Callable[[str], bytes],
    before_write: Callable[[], None] | None = None,
) -> int:
    """Index a whole log at once into an agent's empty rows; the same rows as applying
    each commit with ``apply_commit`` (visible at its timestamp), in a few batched
    statements instead of ten per commit. ``entries`` are (key, text, JSON document) of
    the log in order; ``blob(sha256)`` reads a content too large to be inline. Works on
    the documents rather than Commit objects (building those was half the cost).
    Returns the number of commits; raises CorruptionError naming an unreadable entry,
    and does so before it writes anything: every entry and content is read and checked
    first, then ``before_write()`` (reindex's clearing of the agent's old rows) runs,
    then the rows are written."""
    commit_rows: list[tuple[Any, ...]] = []
    version_rows: list[list[object]] = []
    open_version: dict[str, int] = {}  # path → index of its newest row in version_rows
    live: dict[str, tuple[Any, ...]] = {}  # path → memories row (without its listing)
    metas: dict[str, dict[str, Scalar]] = {}
    blobs: dict[str, bytes] = {}
    revision = last_ts = 0
    name: str | None = None
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    meta_texts: dict[tuple[tuple[str, type, Any], ...], str] = {}
    sha256 = hashlib.sha256
    for where, text, doc in entries:
        try:
            ts = parse_ts(doc["ts"])
            changes = doc["changes"]
            for change in changes:
                path = change["path"]
                after = change["after"]
                version = int(change["version"])
                size = int(change["bytes"])
                description = change.get("description")
                metadata = change.get("metadata") or {}
                content = change.get("content")
                previous = open_version.get(path)
                if previous is not None:
                    row = version_rows[previous]
                    row[10] = row[12] = ts  # valid_to, visible_to
                meta_json = _meta_text(metadata, meta_texts, dumps) if metadata else "{}"
                open_version[path] = len(version_rows)
                version_rows.append(
                    [
                        agent,
                        path,
                        version,
                        doc["revision"],
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
                    metas.pop(path, None)
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
                    metas[path] = metadata
                else:
                    metas.pop(path, None)
                if content is not None:
                    data = content.encode()
                    if sha256(data).hexdigest() != after:
                        bad = CorruptionError(
                            f"log entry {where}: inline content of {path} does not match its sha256"
                        )
                        bad.file = where  # type: ignore[attr-defined]
                        raise bad
                    blobs[after] = data
                elif after not in blobs:
                    blobs[after] = blob(after)  # checked by the caller's reader
            commit_rows.append(
                (agent, doc["revision"], ts, ts, doc["actor"], doc["message"], text, len(changes))
            )
            revision, last_ts = max(revision, doc["revision"]), max(last_ts, ts)
            if doc.get("agentName") is not None:
                name = doc["agentName"]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptionError(f"log entry {where} is unreadable: {exc!r}") from None
    if before_write is not None:
        before_write()
    _insert_commits(conn, commit_rows)
    # In primary-key order, the B-trees take rows as appends rather than scattered inserts.
    version_rows.sort(key=operator.itemgetter(1, 2))
    conn.executemany("INSERT INTO versions VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)", version_rows)
    # Every stored version's links, from the contents just read (in key order, as above).
    links: list[LinkRow] = []
    for row in version_rows:
        sha, number, visible = row[5], row[2], row[11]
        if isinstance(sha, str) and isinstance(number, int) and isinstance(visible, int):
            links += link_rows(agent, str(row[1]), number, visible, blobs.get(sha))
    add_links(conn, links)
    conn.executemany(
        "INSERT INTO memories VALUES(?,?,?,?,?,?,?,?,?,?)",
        [
            (*row, listing_text(row[1], row[4], row[3], row[5], row[2], row[8]))
            for row in live.values()
        ],
    )
    conn.executemany(
        "INSERT INTO memory_meta VALUES(?,?,?,?)",
        [
            (agent, path, k, metadata_text(v))
            for path, meta in metas.items()
            for k, v in meta.items()
        ],
    )
    conn.executemany(
        "INSERT OR IGNORE INTO blobs VALUES(?,?,?)",
        [(agent, sha, blobs[sha]) for sha in sorted(blobs)],
    )
    search.index_docs(
        conn, agent, ((row[1], row[3], row[5], blobs.get(row[3])) for row in live.values())
    )
    conn.execute(
        "UPDATE agents SET revision=MAX(revision, ?), last_ts=MAX(last_ts, ?),"
        " name=COALESCE(?, name), memory_count=memory_count+?,"
        " memory_bytes=memory_bytes+? WHERE agent_id=?",
        (revision, last_ts, name, len(live), sum(row[4] for row in live.values()), agent),
    )
    raise_clock(conn, last_ts)
    return len(commit_rows)
