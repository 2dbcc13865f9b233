"""The derived SQLite index: every query memfs answers, rebuilt from the log at will.

Tables (schema ``SCHEMA_VERSION``):
  agents(agent_id, name, store_id, created_at, revision, last_ts)
  commits(agent_id, revision, ts, visible_at, actor, message, changes)
  versions(agent_id, path, version, …, valid_from, valid_to, visible_from, visible_to)
  memories(agent_id, path, …, listing)   live memories only, keyset-listed by path;
                                          ``listing`` is the memory's listing JSON
  memory_meta(agent_id, path, key, value) scalar frontmatter, for metadata filters
  blobs(agent_id, sha256, content)       a read cache of contents
  damage(agent_id, file, reason)         agents found damaged (their routes answer 503)
  meta(key, value)                        schema version and the visibility clock

The file is watched: a transaction that finds it deleted or replaced (another inode)
drops its connection, and ``IndexGone`` tells the store to rebuild it from the log.

``visible_at`` is when a commit became visible in this index (its timestamp for a
live commit, later for a log entry caught up after a crash); pinned reads compare
against it so that what a reader saw at a ``readTimestamp`` never changes.
Applying a commit is idempotent: a revision already present is skipped.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import operator
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memfs.commits import Commit, format_ts, parse_ts
from memfs.content import Scalar, metadata_text
from memfs.errors import CorruptionError

Connection = sqlite3.Connection

SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS agents(
  agent_id TEXT PRIMARY KEY, name TEXT NOT NULL, store_id TEXT NOT NULL,
  created_at INTEGER NOT NULL, revision INTEGER NOT NULL DEFAULT 0,
  last_ts INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS commits(
  agent_id TEXT NOT NULL, revision INTEGER NOT NULL, ts INTEGER NOT NULL,
  visible_at INTEGER NOT NULL, actor TEXT NOT NULL, message TEXT NOT NULL,
  changes TEXT NOT NULL, PRIMARY KEY(agent_id, revision)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS commits_by_visibility ON commits(visible_at);
CREATE INDEX IF NOT EXISTS commits_by_agent_visibility ON commits(agent_id, visible_at);
CREATE TABLE IF NOT EXISTS versions(
  agent_id TEXT NOT NULL, path TEXT NOT NULL, version INTEGER NOT NULL,
  revision INTEGER NOT NULL, operation TEXT NOT NULL, sha256 TEXT, bytes INTEGER NOT NULL,
  description TEXT, metadata TEXT NOT NULL, valid_from INTEGER NOT NULL, valid_to INTEGER,
  visible_from INTEGER NOT NULL, visible_to INTEGER,
  PRIMARY KEY(agent_id, path, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS memories(
  agent_id TEXT NOT NULL, path TEXT NOT NULL, version INTEGER NOT NULL,
  sha256 TEXT NOT NULL, bytes INTEGER NOT NULL, description TEXT, metadata TEXT NOT NULL,
  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, listing TEXT NOT NULL,
  PRIMARY KEY(agent_id, path)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS memory_meta(
  agent_id TEXT NOT NULL, path TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY(agent_id, path, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs(
  agent_id TEXT NOT NULL, run_id TEXT NOT NULL, trigger_id TEXT NOT NULL,
  webhook_id TEXT NOT NULL, status TEXT NOT NULL, attempt INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL, next_retry_at INTEGER, created_at INTEGER NOT NULL,
  started_at INTEGER, finished_at INTEGER, exit_code INTEGER, output TEXT, error TEXT,
  events INTEGER NOT NULL, delivery_key TEXT, PRIMARY KEY(agent_id, run_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS runs_by_status ON runs(status, next_retry_at);
CREATE INDEX IF NOT EXISTS runs_by_status_age ON runs(status, created_at);
CREATE INDEX IF NOT EXISTS runs_by_creation ON runs(agent_id, created_at, run_id);
CREATE TABLE IF NOT EXISTS run_steps(
  agent_id TEXT NOT NULL, run_id TEXT NOT NULL, seq INTEGER NOT NULL, at INTEGER NOT NULL,
  visible_at INTEGER NOT NULL, type TEXT NOT NULL, attempt INTEGER NOT NULL,
  detail TEXT NOT NULL, PRIMARY KEY(agent_id, run_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS run_steps_by_visibility ON run_steps(visible_at);
CREATE INDEX IF NOT EXISTS run_steps_by_agent_visibility ON run_steps(agent_id, visible_at);
CREATE TABLE IF NOT EXISTS blobs(
  agent_id TEXT NOT NULL, sha256 TEXT NOT NULL, content BLOB NOT NULL,
  PRIMARY KEY(agent_id, sha256)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS damage(
  agent_id TEXT PRIMARY KEY, file TEXT NOT NULL, reason TEXT NOT NULL
) WITHOUT ROWID;
"""

# Every table keyed by agent: what erasing an agent or a full reindex clears.
DERIVED_TABLES = (
    "agents",
    "commits",
    "versions",
    "memories",
    "memory_meta",
    "blobs",
    "runs",
    "run_steps",
    "damage",
)

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


class Index:
    """One SQLite file shared by every process; one connection per thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # True when opening found no usable index (missing, empty, unknown schema), so
        # what this file holds says nothing yet: the store rebuilds it from the log.
        self.created = False
        self.on_reopen: Callable[[], None] | None = None
        self._local = threading.local()
        self._writer = threading.RLock()
        # Processes queue on an flock of this file: the kernel wakes the next waiter
        # when it is released, where SQLite's busy handler sleeps and polls (unfair:
        # a writer in a tight loop could starve the others for seconds).
        self._queue_path = path.with_name(path.name + ".lock")
        self._queue = -1
        self._opened = False
        self._queue = os.open(self._queue_path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._queue, fcntl.LOCK_EX)  # released by _migrate's transaction
        if not path.exists():
            # Write-ahead files left by a deleted index belong to another database:
            # SQLite would apply them to the new file.
            for suffix in ("-wal", "-shm"):
                path.with_name(path.name + suffix).unlink(missing_ok=True)
        self._migrate()
        self._opened = True

    def _connect(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        # One stat per transaction (about a microsecond): a file deleted or replaced
        # under a running server is noticed at once, never served as an empty store.
        try:
            inode = os.stat(self.path).st_ino
        except FileNotFoundError:
            inode = None
        if conn is not None and inode != self._local.inode:
            conn.close()  # deleted or replaced: reopen what stands there now, if usable
            self._local.conn = conn = None
            if self.on_reopen is not None:
                self.on_reopen()  # the store checks the new file against the log
        if conn is None:
            if inode is None and self._opened:
                raise IndexGone(str(self.path))  # only the first open may create it
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            self._local.inode = os.stat(self.path).st_ino
            conn.execute("PRAGMA busy_timeout=60000")
            if self._opened and not _usable(conn):
                conn.close()
                raise IndexGone(str(self.path))  # replaced by something else
            _enable_wal(conn)
            # The index is derived: a commit lost to power failure is replayed from the
            # log, so the WAL need not be fsynced on every commit.
            conn.execute("PRAGMA synchronous=NORMAL")
            # Deleted rows are overwritten with zeros (in their pages and in freed pages),
            # so an erased agent's text leaves no trace in the file (see checkpoint()).
            conn.execute("PRAGMA secure_delete=ON")
            self._local.conn = conn
        return conn

    def checkpoint(self) -> None:
        """Copy the WAL into the main file and truncate it to zero bytes: after an
        erase, the old page images the WAL still held are gone too."""
        conn = self._connect()
        busy = 1
        deadline = time.monotonic() + 60
        while busy and time.monotonic() < deadline:
            # busy while a reader of another process sits on an older snapshot
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            if busy:
                time.sleep(0.01)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
        with self._writer:
            if self._queue >= 0:
                os.close(self._queue)
                self._queue = -1

    def _migrate(self) -> None:
        with self.write() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL)"
                " WITHOUT ROWID"
            )
            row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is not None and row[0] not in (1, SCHEMA_VERSION):
                # Derived state of a schema this memfs doesn't know (a newer or a
                # foreign file): start afresh; the store rebuilds it from the log.
                names = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
                for (name,) in names:
                    conn.execute(f'DROP TABLE IF EXISTS "{name}"')
                conn.execute(
                    "CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID"
                )
                row = None
            if row is None:
                self.created = True
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT INTO meta VALUES('schema', ?)", (SCHEMA_VERSION,))
                conn.execute("INSERT OR IGNORE INTO meta VALUES('clock', 0)")
            else:
                if row[0] == 1:
                    _add_listing_column(conn)
                # Tables and indexes added since the file was made (damage, inspect's
                # per-agent log seeks): every statement is CREATE … IF NOT EXISTS.
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: holds the index's one write lock until it ends."""
        conn = self._connect()
        # SQLite's busy handler makes waiting writers sleep and poll, which is unfair
        # (p99 of seconds under load); threads of one process queue on a lock instead.
        with self._writer:
            if self._queue < 0:
                self._queue = os.open(self._queue_path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._queue, fcntl.LOCK_EX)
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    # A failed COMMIT (a full disk) leaves the transaction open.
                    if conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                    raise
            finally:
                fcntl.flock(self._queue, fcntl.LOCK_UN)

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every query inside sees one snapshot."""
        conn = self._connect()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")


def _usable(conn: sqlite3.Connection) -> bool:
    """True if ``conn`` opened an index of this schema (not a stranger's file)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
    except sqlite3.DatabaseError:
        return False
    return row is not None and row[0] == SCHEMA_VERSION


def _enable_wal(conn: sqlite3.Connection) -> None:
    # Switching a new database to WAL needs it exclusively, and SQLite answers "locked"
    # at once (no busy handler) while another process opens it too: retry briefly.
    # Once set, WAL mode is stored in the file and this returns at once.
    deadline = time.monotonic() + 30
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


# ---- writing -------------------------------------------------------------------


def clock(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key='clock'").fetchone()
    return int(row[0]) if row else 0


def put_agent(
    conn: sqlite3.Connection, agent_id: str, name: str, store_id: str, created_at: int
) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO agents(agent_id, name, store_id, created_at) VALUES(?,?,?,?)",
        (agent_id, name, store_id, created_at),
    )


def drop_agent(conn: sqlite3.Connection, agent_id: str, *, runs: bool = True) -> None:
    """Forget an agent (``runs=False``: keep its runs, which reindex rescans apart)."""
    for table in DERIVED_TABLES:
        if runs or table not in ("runs", "run_steps"):
            conn.execute(f"DELETE FROM {table} WHERE agent_id=?", (agent_id,))


_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def listing_text(
    path: str, size: int, sha256: str, description: str | None, version: int, updated_at: int
) -> str:
    """A memory as listings show it (``render.listing_json``), as the JSON text an HTTP
    page joins: kept in the memory's row, so a page is its rows' texts joined."""
    return _encode(
        {
            "path": path,
            "bytes": size,
            "contentSha256": sha256,
            "description": description,
            "version": version,
            "updatedAt": format_ts(updated_at),
        }
    )


def _add_listing_column(conn: sqlite3.Connection) -> None:
    """Schema 1 → 2: each live memory keeps its listing JSON (filled here, once)."""
    conn.execute("ALTER TABLE memories ADD COLUMN listing TEXT NOT NULL DEFAULT ''")
    rows = conn.execute(
        "SELECT agent_id, path, bytes, sha256, description, version, updated_at FROM memories"
    ).fetchall()
    conn.executemany(
        "UPDATE memories SET listing=? WHERE agent_id=? AND path=?",
        [(listing_text(r[1], r[2], r[3], r[4], r[5], r[6]), r[0], r[1]) for r in rows],
    )
    conn.execute("UPDATE meta SET value=? WHERE key='schema'", (SCHEMA_VERSION,))


# The log summary of an entry: its changes without their inline contents, written by
# SQLite from the entry's text (the same bytes the live commit and reindex store).
_SUMMARY = (
    "(SELECT json_group_array(json_remove(value, '$.content')) FROM json_each(?, '$.changes'))"
)


def apply_commit(
    conn: sqlite3.Connection,
    commit: Commit,
    visible_at: int,
    contents: dict[str, bytes],
    entry: bytes,
) -> bool:
    """Record ``commit``, whose log entry is ``entry`` (idempotent); ``contents`` maps
    sha256 → bytes for the cache."""
    agent = commit.agent_id
    inserted = conn.execute(
        f"INSERT OR IGNORE INTO commits VALUES(?,?,?,?,?,?,{_SUMMARY})",
        (
            agent,
            commit.revision,
            commit.ts,
            visible_at,
            commit.actor,
            commit.message,
            entry.decode(),
        ),
    )
    if inserted.rowcount == 0:
        return False  # applied before
    for change in commit.changes:
        if change.version > 1:
            conn.execute(
                "UPDATE versions SET valid_to=?, visible_to=? "
                "WHERE agent_id=? AND path=? AND version=?",
                (commit.ts, visible_at, agent, change.path, change.version - 1),
            )
        description, metadata = change.description, change.metadata
        meta_json = json.dumps(metadata, ensure_ascii=False, separators=(",", ":"))
        conn.execute(
            "INSERT INTO versions VALUES(?,?,?,?,?,?,?,?,?,?,NULL,?,NULL)",
            (
                agent,
                change.path,
                change.version,
                commit.revision,
                change.operation,
                change.after,
                change.size,
                description,
                meta_json,
                commit.ts,
                visible_at,
            ),
        )
        if change.before is not None:  # only a live memory has metadata rows
            conn.execute(
                "DELETE FROM memory_meta WHERE agent_id=? AND path=?", (agent, change.path)
            )
        if change.after is None:
            conn.execute("DELETE FROM memories WHERE agent_id=? AND path=?", (agent, change.path))
            continue
        # An update keeps the memory's created_at.
        conn.execute(
            "INSERT INTO memories VALUES(?,?,?,?,?,?,?,?,?,?) ON CONFLICT(agent_id, path) DO"
            " UPDATE SET version=excluded.version, sha256=excluded.sha256,"
            " bytes=excluded.bytes, description=excluded.description,"
            " metadata=excluded.metadata, updated_at=excluded.updated_at,"
            " listing=excluded.listing",
            (
                agent,
                change.path,
                change.version,
                change.after,
                change.size,
                description,
                meta_json,
                commit.ts,
                commit.ts,
                listing_text(
                    change.path, change.size, change.after, description, change.version, commit.ts
                ),
            ),
        )
        if metadata:
            conn.executemany(
                "INSERT OR REPLACE INTO memory_meta VALUES(?,?,?,?)",
                [(agent, change.path, k, metadata_text(v)) for k, v in metadata.items()],
            )
        if change.after in contents:
            conn.execute(
                "INSERT OR IGNORE INTO blobs VALUES(?,?,?)",
                (agent, change.after, contents[change.after]),
            )
    name_sql = ", name=?" if commit.agent_name is not None else ""
    params: list[object] = [commit.revision, commit.ts]
    if commit.agent_name is not None:
        params.append(commit.agent_name)
    conn.execute(
        f"UPDATE agents SET revision=MAX(revision, ?), last_ts=MAX(last_ts, ?){name_sql} "
        "WHERE agent_id=?",
        (*params, agent),
    )
    conn.execute("UPDATE meta SET value=MAX(value, ?) WHERE key='clock'", (visible_at,))
    return True


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
    the documents rather than Commit objects (building those was half the cost), and
    SQLite takes the inline contents out of each entry's changes for the log summary,
    byte for byte what ``apply_commit`` writes, without a JSON encode per commit.
    Returns the number of commits; raises CorruptionError naming an unreadable entry."""
    commit_rows: list[tuple[object, ...]] = []
    version_rows: list[list[object]] = []
    open_version: dict[str, int] = {}  # path → index of its newest row in version_rows
    live: dict[str, tuple[Any, ...]] = {}  # path → memories row (without its listing)
    metas: dict[str, dict[str, Scalar]] = {}
    blobs: dict[str, bytes] = {}
    revision = last_ts = 0
    name: str | None = None
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    for where, text, doc in entries:
        try:
            ts = parse_ts(doc["ts"])
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
                    version_rows[previous][10] = ts  # valid_to
                    version_rows[previous][12] = ts  # visible_to
                meta_json = dumps(metadata) if metadata else "{}"
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
                created_at = live[path][7] if path in live else ts
                live[path] = (
                    agent,
                    path,
                    version,
                    after,
                    size,
                    description,
                    meta_json,
                    created_at,
                    ts,
                )
                metas[path] = dict(metadata)
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
                    blobs[after] = blob(after)  # checked by the caller's reader
            commit_rows.append((agent, doc["revision"], ts, ts, doc["actor"], doc["message"], text))
            revision, last_ts = max(revision, doc["revision"]), max(last_ts, ts)
            if doc.get("agentName") is not None:
                name = doc["agentName"]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptionError(f"log entry {where} is unreadable: {exc!r}") from None
    conn.executemany(f"INSERT INTO commits VALUES(?,?,?,?,?,?,{_SUMMARY})", commit_rows)
    # In primary-key order, the B-tree takes them as appends rather than scattered inserts.
    version_rows.sort(key=operator.itemgetter(1, 2))
    conn.executemany("INSERT INTO versions VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)", version_rows)
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
        [(agent, sha, data) for sha, data in blobs.items()],
    )
    conn.execute(
        "UPDATE agents SET revision=MAX(revision, ?), last_ts=MAX(last_ts, ?),"
        " name=COALESCE(?, name) WHERE agent_id=?",
        (revision, last_ts, name, agent),
    )
    conn.execute("UPDATE meta SET value=MAX(value, ?) WHERE key='clock'", (last_ts,))
    return len(commit_rows)


# ---- reading -------------------------------------------------------------------


def damage(conn: sqlite3.Connection, agent_id: str) -> tuple[str, str] | None:
    """(file, reason) of the damage found in an agent, None if it is sound."""
    row = conn.execute("SELECT file, reason FROM damage WHERE agent_id=?", (agent_id,)).fetchone()
    return (str(row[0]), str(row[1])) if row else None


def mark_damaged(conn: sqlite3.Connection, agent_id: str, file: str, reason: str) -> None:
    conn.execute("INSERT OR REPLACE INTO damage VALUES(?,?,?)", (agent_id, file, reason))


def damaged_agents(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    return [(str(a), str(f), str(r)) for a, f, r in conn.execute("SELECT * FROM damage")]


def agent(conn: sqlite3.Connection, agent_id: str) -> AgentRow | None:
    row = conn.execute(
        "SELECT agent_id, name, store_id, created_at, revision, last_ts FROM agents "
        "WHERE agent_id=?",
        (agent_id,),
    ).fetchone()
    return AgentRow(*row) if row else None


def agents(conn: sqlite3.Connection, prefix: str, after: str | None, limit: int) -> list[AgentRow]:
    lower, op = (after, ">") if after is not None and after >= prefix else (prefix, ">=")
    rows = conn.execute(
        "SELECT agent_id, name, store_id, created_at, revision, last_ts FROM agents "
        f"WHERE agent_id {op} ? AND agent_id < ? ORDER BY agent_id LIMIT ?",
        (lower, prefix + "\U0010ffff", limit),
    ).fetchall()
    return [AgentRow(*r) for r in rows]


def agent_stats(conn: sqlite3.Connection, agent_id: str) -> tuple[int, int]:
    row = conn.execute(
        "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM memories WHERE agent_id=?", (agent_id,)
    ).fetchone()
    return int(row[0]), int(row[1])


def ever_written(conn: sqlite3.Connection, agent_id: str) -> bool:
    """Whether any commit of the agent changed a memory (a rename of the agent does not)."""
    row = conn.execute("SELECT 1 FROM versions WHERE agent_id=? LIMIT 1", (agent_id,)).fetchone()
    return row is not None


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


def memory(conn: sqlite3.Connection, agent_id: str, path: str) -> MemoryRow | None:
    row = conn.execute(
        f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE agent_id=? AND path=?",
        (agent_id, path),
    ).fetchone()
    return _memory(row) if row else None


def is_folder(conn: sqlite3.Connection, agent_id: str, path: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM memories WHERE agent_id=? AND path>? AND path<? LIMIT 1",
        (agent_id, path + "/", path + _AFTER_SLASH),
    ).fetchone()
    return row is not None


def live_paths(conn: sqlite3.Connection, agent_id: str, candidates: Sequence[str]) -> set[str]:
    """Which of ``candidates`` are live memories (one query for all)."""
    if not candidates:
        return set()
    marks = ",".join("?" * len(candidates))
    rows = conn.execute(
        f"SELECT path FROM memories WHERE agent_id=? AND path IN ({marks})",
        (agent_id, *candidates),
    )
    return {str(row[0]) for row in rows}


def last_version(conn: sqlite3.Connection, agent_id: str, path: str) -> int:
    row = conn.execute(
        "SELECT MAX(version) FROM versions WHERE agent_id=? AND path=?", (agent_id, path)
    ).fetchone()
    return int(row[0] or 0)


def blob(conn: sqlite3.Connection, agent_id: str, sha256: str) -> bytes | None:
    row = conn.execute(
        "SELECT content FROM blobs WHERE agent_id=? AND sha256=?", (agent_id, sha256)
    ).fetchone()
    return bytes(row[0]) if row else None


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


def version(conn: sqlite3.Connection, agent_id: str, path: str, number: int) -> VersionRow | None:
    row = conn.execute(
        _VERSION_SELECT + "WHERE v.agent_id=? AND v.path=? AND v.version=?",
        (agent_id, path, number),
    ).fetchone()
    return _version(row) if row else None


def versions(
    conn: sqlite3.Connection, agent_id: str, path: str, after: int, limit: int
) -> list[VersionRow]:
    rows = conn.execute(
        _VERSION_SELECT
        + "WHERE v.agent_id=? AND v.path=? AND v.version>? ORDER BY v.version LIMIT ?",
        (agent_id, path, after, limit),
    ).fetchall()
    return [_version(r) for r in rows]


def commits(
    conn: sqlite3.Connection,
    agent_id: str,
    *,
    before: int | None,
    limit: int,
    path: str | None = None,
) -> list[CommitRow]:
    """Commits newest first (like ``git log``), optionally only those touching ``path``."""
    upper = before if before is not None else 1 << 62
    if path is None:
        rows = conn.execute(
            "SELECT revision, ts, visible_at, actor, message, changes FROM commits "
            "WHERE agent_id=? AND revision<? ORDER BY revision DESC LIMIT ?",
            (agent_id, upper, limit),
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT c.revision, c.ts, c.visible_at, c.actor, c.message, c.changes "
            "FROM versions v JOIN commits c ON c.agent_id=v.agent_id AND c.revision=v.revision "
            "WHERE v.agent_id=? AND v.path=? AND v.revision<? ORDER BY v.revision DESC LIMIT ?",
            (agent_id, path, upper, limit),
        ).fetchall()
    return [CommitRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5])) for r in rows]


def list_memories(
    conn: sqlite3.Connection,
    agent_id: str,
    folder: str,
    *,
    after: str | None,
    limit: int,
    depth_one: bool,
    filters: Sequence[tuple[str, str]] = (),
) -> tuple[list[MemoryRow | FolderEntry], bool]:
    """One page of a folder in path order; True when more entries follow.

    ``after`` is the last entry of the previous page: a memory path, or a folder path
    with a trailing ``/``. With ``depth_one`` subfolders appear as FolderEntry items,
    each found with one index seek however many memories it holds.
    """
    rows, more = _walk(
        conn,
        agent_id,
        folder,
        _MEMORY_COLUMNS,
        after=after,
        limit=limit,
        depth_one=depth_one,
        filters=filters,
    )
    return [r if isinstance(r, FolderEntry) else _memory(r) for r in rows], more


def _listing_where(
    agent_id: str,
    folder: str,
    after: str | None,
    filters: Sequence[tuple[str, str]],
    *,
    through: str | None = None,
) -> tuple[str, list[object], bool]:
    """The keyset range of a listing: a WHERE with ``{}`` for the lower bound's
    operator, its parameters (the lower bound is ``params[1]``), and whether the lower
    bound is inclusive. The range ends with the folder, or at ``through`` (included):
    one bound, so that SQLite stops the scan there rather than filtering past it."""
    upper = folder + _AFTER_SLASH
    if after is None:
        lower, inclusive = folder + "/", False
    elif after.endswith("/"):
        lower, inclusive = after[:-1] + _AFTER_SLASH, True
    else:
        lower, inclusive = after, False
    if lower < folder + "/":  # a cursor before the folder must not widen the listing
        lower, inclusive = folder + "/", False
    where = "agent_id=? AND path{} ? AND path" + ("<=?" if through is not None else "<?")
    params: list[object] = [agent_id, lower, upper if through is None else through]
    for key, value in filters:
        where += (
            " AND EXISTS(SELECT 1 FROM memory_meta m WHERE m.agent_id=memories.agent_id"
            " AND m.path=memories.path AND m.key=? AND m.value=?)"
        )
        params += [key, value]
    return where, params, inclusive


def _walk(
    conn: sqlite3.Connection,
    agent_id: str,
    folder: str,
    columns: str,
    *,
    after: str | None,
    limit: int,
    depth_one: bool,
    filters: Sequence[tuple[str, str]],
) -> tuple[list[Sequence[object] | FolderEntry], bool]:
    """The walk of ``list_memories``: each memory as its row of ``columns`` (path first)."""
    where, params, inclusive = _listing_where(agent_id, folder, after, filters)
    out: list[Sequence[object] | FolderEntry] = []
    want = limit + 1
    while len(out) < want:
        sql = (
            f"SELECT {columns} FROM memories WHERE "
            + where.format(">=" if inclusive else ">")
            + " ORDER BY path LIMIT ?"
        )
        asked = want - len(out)
        # Rows are fetched lazily: a depth-one jump uses only the first row of a query,
        # and fetching all ``asked`` rows made a page of N subfolders cost N x limit rows.
        rows = conn.execute(sql, (*params, asked))
        fetched = 0
        jumped = False
        for row in rows:
            fetched += 1
            path = str(row[0])
            rest = path[len(folder) + 1 :]
            if depth_one and "/" in rest:
                sub = folder + "/" + rest.split("/", 1)[0]
                out.append(FolderEntry(sub))
                params[1], inclusive, jumped = sub + _AFTER_SLASH, True, True
                break
            out.append(row)
            params[1], inclusive = path, False
            if len(out) >= want:
                break
        rows.close()
        if not jumped and fetched < asked:
            break
    return out[:limit], len(out) > limit


@dataclass(frozen=True)
class ListingJson:
    """A page of ``list_memories`` with each memory already as JSON text."""

    memories: bytes  # the memories' listing objects joined by "," (a JSON array's inside)
    folders: list[str]  # depth-one subfolders, in order
    last: str | None  # the page's last entry as an ``after``: a path, or a folder + "/"
    more: bool


def list_memories_json(
    conn: sqlite3.Connection,
    agent_id: str,
    folder: str,
    *,
    after: str | None,
    limit: int,
    depth_one: bool,
    filters: Sequence[tuple[str, str]] = (),
) -> ListingJson:
    """The page ``list_memories`` answers, as the stored listing JSON of its memories
    (``listing_text``): no Python object per memory."""
    if depth_one:
        rows, more = _walk(
            conn,
            agent_id,
            folder,
            "path, CAST(listing AS BLOB)",
            after=after,
            limit=limit,
            depth_one=True,
            filters=filters,
        )
        texts: list[bytes] = []
        folders: list[str] = []
        for row in rows:
            if isinstance(row, FolderEntry):
                folders.append(row.path)
            else:
                text = row[1]
                assert isinstance(text, bytes)
                texts.append(text)
        last = None
        if rows:
            end = rows[-1]
            last = end.path + "/" if isinstance(end, FolderEntry) else str(end[0])
        return ListingJson(b",".join(texts), folders, last, more)
    # Recursive: first the page's last path and the one after it (a walk over the keys
    # alone), then the page's listings joined by SQLite as UTF-8 bytes over exactly that
    # range. group_concat visits the rows in the order of the primary-key range scan,
    # i.e. by path (tests/test_http_listing.py checks every page byte for byte); the
    # earlier one-statement form (a subquery with ORDER BY ... LIMIT) copied each row
    # through the subquery and cost about 1.7x as much.
    where, params, inclusive = _listing_where(agent_id, folder, after, filters)
    lower = where.format(">=" if inclusive else ">")
    ends = conn.execute(
        f"SELECT path FROM memories WHERE {lower} ORDER BY path LIMIT 2 OFFSET ?",
        (*params, max(limit, 1) - 1),
    ).fetchall()
    if ends:
        last = str(ends[0][0])
        page, page_params, _ = _listing_where(agent_id, folder, after, filters, through=last)
        row = conn.execute(
            "SELECT CAST(group_concat(listing, ',') AS BLOB) FROM memories"
            f" WHERE {page.format('>=' if inclusive else '>')}",
            page_params,
        ).fetchone()
        return ListingJson(bytes(row[0] or b""), [], last, len(ends) == 2)
    row = conn.execute(  # fewer than ``limit`` left: the rest of the range
        f"SELECT CAST(group_concat(listing, ',') AS BLOB), max(path) FROM memories WHERE {lower}",
        params,
    ).fetchone()
    return ListingJson(bytes(row[0] or b""), [], None if row[1] is None else str(row[1]), False)


def count_memories(
    conn: sqlite3.Connection,
    agent_id: str,
    folder: str,
    *,
    depth_one: bool,
    filters: Sequence[tuple[str, str]] = (),
) -> int:
    if depth_one:
        total, after = 0, None
        while True:
            page, more = list_memories(
                conn, agent_id, folder, after=after, limit=1000, depth_one=True, filters=filters
            )
            total += len(page)
            if not more:
                return total
            last = page[-1]
            after = last.path + "/" if isinstance(last, FolderEntry) else last.path
    where = "agent_id=? AND path>? AND path<?"
    params: list[object] = [agent_id, folder + "/", folder + _AFTER_SLASH]
    for key, value in filters:
        where += (
            " AND EXISTS(SELECT 1 FROM memory_meta m WHERE m.agent_id=memories.agent_id"
            " AND m.path=memories.path AND m.key=? AND m.value=?)"
        )
        params += [key, value]
    row = conn.execute(f"SELECT COUNT(*) FROM memories WHERE {where}", params).fetchone()
    return int(row[0])
