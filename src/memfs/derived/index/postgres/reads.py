"""The PostgreSQL index's read session: the SQLite index's queries (``derived/index/
reads.py``, ``runs.py``, ``walks.py``), one for one, in PostgreSQL's dialect.

Every path and id comparison runs under the columns' ``COLLATE "C"`` (bytewise, as
SQLite); where both sides of a comparison are expressions, the collation is spelled out.
PostgreSQL text cannot hold NUL, so a bound ending in "\\x00" (the inspect walkers'
"everything of this agent" bound) is rewritten as the equivalent ``<=`` (``_below``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from typing import Any

from psycopg import Connection, Cursor
from psycopg.pq import TransactionStatus

from memfs.derived.index import walks
from memfs.derived.index.postgres import search as fulltext
from memfs.derived.index.rows import (
    _AFTER_SLASH,
    _MEMORY_COLUMNS,
    _MEMORY_READ,
    _VERSION_SELECT,
    AgentRow,
    CommitRow,
    FolderEntry,
    ListingJson,
    MemoryRead,
    MemoryRow,
    PathState,
    VersionRow,
    _memory,
    _memory_read,
    _version,
)
from memfs.derived.index.runs import RUN_COLUMNS, RunRow
from memfs.derived.index.search import passage
from memfs.domain.records import PlanHead, SearchHit
from memfs.domain.search_query import parse_match

Conn = Connection[tuple[Any, ...]]
Row = tuple[Any, ...]
_VERSIONS = _VERSION_SELECT.replace("?", "%s")
_MEMORY_READ_PG = _MEMORY_READ.replace("?", "%s")
# No key holds a character above U+10FFFF: the upper end of "every id with this prefix".
_TOP = "\U0010ffff"
# One agent's paths in a range, as row comparisons on the primary key (agent_id, path)
# rather than ``agent_id=%s AND path>%s AND path<%s``: the planner estimates a row
# comparison by its first column, so it never takes the range for a handful of rows
# and walks the index in order, stopping at the page's end. With the plain form and no
# statistics yet (a database filled since its last ANALYZE), it chose a bitmap scan and
# a sort of every row past the cursor: a page mid-way through 1M memories read 16,075
# buffers (18 at 1k); in this form it reads 10 at every size (docs/benchmarks.md).
_KEYSET = "(agent_id, path){} (%s, %s) AND (agent_id, path)<(%s, %s)"
_FILTER = (
    " AND EXISTS(SELECT 1 FROM memory_meta m WHERE m.agent_id=memories.agent_id"
    " AND m.path=memories.path AND m.key=%s AND m.value=%s)"
)
# A read session's transaction: every query of the session in one snapshot.
BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
_IDLE = TransactionStatus.IDLE
# An agent's row, its damage and the clock, in one statement (always one row).
_AGENT_HEAD = (
    "SELECT a.agent_id, a.name, a.store_id, a.created_at, a.revision, a.last_ts,"
    " d.file, d.reason, m.value FROM (SELECT 1) one"
    " LEFT JOIN agents a ON a.agent_id=%s LEFT JOIN damage d ON d.agent_id=%s"
    " LEFT JOIN meta m ON m.key='clock'"
)
# Rows a depth-one walk asks for at a time: a jump over a subfolder uses only the first
# row of a batch (a client-side cursor fetches the whole batch, unlike SQLite's lazy one).
_JUMP_BATCH = 64


# PostgreSQL text holds no NUL, which a memory's description, metadata, a commit
# message or a run's output may contain (the log keeps them). Such a value is stored as
# _MARK + its JSON string (which escapes NUL and _MARK), and so is one that starts with
# _MARK, so decoding is exact; other values, and so every path and id, which can't hold
# control characters, are stored as they are and compare as they are.
_MARK = "\x01"


def encode_text(value: Any) -> Any:
    """A parameter as stored (strings with NUL or a leading _MARK wrapped; lists too)."""
    if isinstance(value, str):
        if "\x00" in value or value.startswith(_MARK):
            return _MARK + json.dumps(value)
        return value
    if isinstance(value, list):
        return [encode_text(v) for v in value]
    return value


def decode_row(row: Row) -> Row:
    """A result row with its wrapped strings unwrapped."""
    for cell in row:
        if isinstance(cell, str) and cell.startswith(_MARK):
            return tuple(
                json.loads(v[1:]) if isinstance(v, str) and v.startswith(_MARK) else v for v in row
            )
    return row


def _below(bound: str) -> tuple[str, str]:
    """(operator, value) equal to ``< bound`` for NUL-free keys: ``< p + "\\x00" + r``
    holds exactly for the keys ``<= p``."""
    if "\x00" in bound:
        return "<=", bound.split("\x00", 1)[0]
    return "<", bound


# The planning read of each path's state. The live row is a lateral lookup by the whole
# primary key: a plain LEFT JOIN on a table without statistics was planned as a scan of
# every memory of the agent, filtered by path (128 rows read for one path at 150
# memories). Up to ``_LISTED_PATHS`` paths are one parameter each (a VALUES list, one
# statement per count): its generic plan's estimate is the custom plan's, so once
# prepared (the 6th run on a connection) it is planned no more. The array form's generic
# plan takes ``unnest`` of a parameter for 10 rows, costlier than any custom plan of a
# few, so PostgreSQL planned it afresh on every run: 125 us of its ~150 us per commit
# (pg_stat_statements, docs/benchmarks.md "Cluster commit cost, sixth pass").
_LISTED_PATHS = 8


def _path_states_sql(source: str) -> str:
    columns = ", ".join("m." + c for c in _MEMORY_COLUMNS.split(", "))
    return (
        "SELECT p.path,"
        " (SELECT MAX(version) FROM versions v WHERE v.agent_id=%s AND v.path=p.path),"
        " EXISTS (SELECT 1 FROM memories f WHERE f.agent_id=%s"
        " AND f.path > p.path || '/' AND f.path < p.path || %s),"
        f" {columns} FROM {source} p"
        f" LEFT JOIN LATERAL (SELECT {_MEMORY_COLUMNS} FROM memories"
        " WHERE agent_id=%s AND path=p.path OFFSET 0) m ON true"
    )


_PATH_STATES_ARRAY = _path_states_sql('(SELECT x COLLATE "C" AS path FROM unnest(%s::text[]) AS x)')


@functools.cache
def _path_states(count: int) -> str:
    """The planning read of ``count`` paths, each its own parameter."""
    listed = ", ".join(["(%s::text)"] * count)
    return _path_states_sql(f'(SELECT x COLLATE "C" AS path FROM (VALUES {listed}) v(x))')


# The columns of ``_AGENT_HEAD``'s row, before the paths' in ``_plan_head``'s.
_HEAD_WIDTH = 9


@functools.cache
def _plan_head(count: int) -> str:
    """A commit's planning read of ``count`` paths in one statement: ``_AGENT_HEAD``'s
    one row joined to each path's state (one round trip and one statement fewer per
    commit than the two, in the same snapshot either way)."""
    return f"SELECT h.*, s.* FROM ({_AGENT_HEAD}) h LEFT JOIN ({_path_states(count)}) s ON true"


def _states(rows: Iterable[Row]) -> dict[str, PathState]:
    """``path_states``' answer from its rows (path, last version, is a folder, the live
    memory's columns)."""
    states: dict[str, PathState] = {}
    for row in rows:
        live = _memory(row[3:]) if row[3] is not None else None
        states[str(row[0])] = PathState(live, int(row[1] or 0), bool(row[2]))
    return states


class PgRead:
    """A read snapshot (REPEATABLE READ) on one pooled connection."""

    def __init__(self, conn: Conn, begin: str | None = None) -> None:
        self.conn = conn
        # The transaction's BEGIN, sent with the first statement (None once sent).
        self._begin = begin
        # What the last ``agent()`` read along with the agent's row, in its statement:
        # the agent's damage and the clock (one round trip for a commit's planning,
        # not three). A read session's snapshot keeps them true to its end; a write
        # session forgets them at its next statement (``PgWrite._run``).
        self._head: tuple[str, tuple[str, str] | None, int] | None = None
        # One cursor for every statement of the session: psycopg's Connection.execute
        # makes a cursor per statement, which cost this process about a third of a
        # statement's CPU (115 against 75 us each, in a pipeline of 12). Each answer is
        # read before the next statement runs (``_one``, ``_all``, ``rowcount``), and in
        # a pipeline the cursor holds the last statement's answer.
        self._cur: Cursor[Row] | None = None

    def _cursor(self) -> Cursor[Row]:
        if self._cur is None:
            self._cur = self.conn.cursor()
        return self._cur

    def _in_transaction(self) -> bool:
        return self.conn.info.transaction_status != _IDLE

    def _forget_head(self) -> None:
        self._head = None

    def finish(self) -> bool:
        """The session's block ended without an error: whether its transaction is
        still to be ended (a session that ran no statement never began one). The pool
        sends that COMMIT without waiting for its answer (``pool.putconn``): a read
        session is then its queries' round trips, no more."""
        return self._begin is None

    def _run(self, sql: str, params: Sequence[Any] = ()) -> Cursor[Row]:
        args = [encode_text(p) for p in params]
        cur = self._cursor()
        if self._begin is None:
            return cur.execute(sql, args)
        # The first statement goes with BEGIN, in one pipeline: one round trip, not two.
        begin, self._begin = self._begin, None
        with self.conn.pipeline():
            cur.execute(begin)
            cur.execute(sql, args)
        return cur

    def _all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return [decode_row(r) for r in self._run(sql, params).fetchall()]

    def _one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        row = self._run(sql, params).fetchone()
        return None if row is None else decode_row(row)

    # --- full-text search (search.py) -------------------------------------------

    def search(
        self,
        match: str,
        target: tuple[str, str],
        folder: str,
        filters: Sequence[tuple[str, str]],
        limit: int,
        offset: int,
    ) -> list[SearchHit]:
        """The SQLite index's search, with ``match`` (an FTS5 expression of
        domain.search_query) read back into its terms and written as a tsquery."""
        query = parse_match(match)
        if fulltext.tsquery_text(query) is None:
            return []
        sql, params = fulltext.search_sql(query, target, folder, list(filters), limit, offset)
        return [
            SearchHit(
                agent_id=str(row[0]),
                path=str(row[1]),
                version=int(row[2]),
                sha256=str(row[3]),
                description=row[4],
                updated_at=int(row[5]),
                score=float(row[6]),
                snippet=passage(
                    [fulltext.restored(h, o) for h, o in (row[7:9], row[9:11], row[11:13])]
                ),
            )
            for row in self._all(sql, params)
        ]

    def search_rows(self, agent_id: str) -> dict[str, str | None]:
        """path → the sha256 its full-text row was made from (None: made without its
        content), for fsck."""
        rows = self._all("SELECT path, sha256 FROM search_docs WHERE agent_id=%s", (agent_id,))
        return {str(path): sha for path, sha in rows}

    # --- agents -----------------------------------------------------------------

    def agent(self, agent_id: str) -> AgentRow | None:
        row = self._one(_AGENT_HEAD, (agent_id, agent_id))
        assert row is not None  # one row, whatever exists
        damage = (str(row[6]), str(row[7])) if row[6] is not None else None
        self._head = (agent_id, damage, int(row[8]) if row[8] is not None else 0)
        return AgentRow(*row[:6]) if row[0] is not None else None

    def agent_heads(self) -> list[tuple[str, int]]:
        return [(str(a), int(r)) for a, r in self._all("SELECT agent_id, revision FROM agents")]

    def agent_ids(self) -> set[str]:
        return {str(r[0]) for r in self._all("SELECT agent_id FROM agents")}

    def agent_stats(self, agent_id: str) -> tuple[int, int]:
        row = self._one(
            "SELECT memory_count, memory_bytes FROM agents WHERE agent_id=%s", (agent_id,)
        )
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def agents(self, prefix: str, after: str | None, limit: int) -> list[AgentRow]:
        lower, op = (after, ">") if after is not None and after >= prefix else (prefix, ">=")
        rows = self._all(
            "SELECT agent_id, name, store_id, created_at, revision, last_ts FROM agents"
            f" WHERE agent_id {op} %s AND agent_id < %s ORDER BY agent_id LIMIT %s",
            (lower, prefix + _TOP, limit),
        )
        return [AgentRow(*r) for r in rows]

    def damage(self, agent_id: str) -> tuple[str, str] | None:
        if self._head is not None and self._head[0] == agent_id:
            return self._head[1]
        row = self._one("SELECT file, reason FROM damage WHERE agent_id=%s", (agent_id,))
        return (str(row[0]), str(row[1])) if row else None

    def damaged_agents(self) -> list[tuple[str, str, str]]:
        rows = self._all("SELECT agent_id, file, reason FROM damage ORDER BY agent_id")
        return [(str(a), str(f), str(r)) for a, f, r in rows]

    def schema(self) -> int | None:
        row = self._one("SELECT value FROM meta WHERE key='schema'")
        return None if row is None else int(row[0])

    def clock(self) -> int:
        if self._head is not None:
            return self._head[2]
        row = self._one("SELECT value FROM meta WHERE key='clock'")
        return int(row[0]) if row else 0

    # --- memories and versions ----------------------------------------------------

    def blob(self, agent_id: str, sha256: str) -> bytes | None:
        row = self._one(
            "SELECT content FROM blobs WHERE agent_id=%s AND sha256=%s", (agent_id, sha256)
        )
        return bytes(row[0]) if row else None

    def cached_blobs(self, agent_id: str) -> list[tuple[str, bytes]]:
        rows = self._all("SELECT sha256, content FROM blobs WHERE agent_id=%s", (agent_id,))
        return [(str(sha), bytes(data)) for sha, data in rows]

    def ever_written(self, agent_id: str) -> bool:
        return (
            self._one("SELECT 1 FROM versions WHERE agent_id=%s LIMIT 1", (agent_id,)) is not None
        )

    def first_revision_with(self, agent_id: str, sha256: str) -> int | None:
        row = self._one(
            "SELECT MIN(revision) FROM versions WHERE agent_id=%s AND sha256=%s",
            (agent_id, sha256),
        )
        return int(row[0]) if row and row[0] else None

    def has_version_larger_than(self, agent_id: str, sha256: str, size: int) -> bool:
        row = self._one(
            "SELECT 1 FROM versions WHERE agent_id=%s AND sha256=%s AND bytes>%s LIMIT 1",
            (agent_id, sha256, size),
        )
        return row is not None

    def is_folder(self, agent_id: str, path: str) -> bool:
        row = self._one(
            "SELECT 1 FROM memories WHERE " + _KEYSET.format(">") + " LIMIT 1",
            (agent_id, path + "/", agent_id, path + _AFTER_SLASH),
        )
        return row is not None

    def last_version(self, agent_id: str, path: str) -> int:
        row = self._one(
            "SELECT MAX(version) FROM versions WHERE agent_id=%s AND path=%s", (agent_id, path)
        )
        return int(row[0] or 0) if row else 0

    def memory(self, agent_id: str, path: str) -> MemoryRow | None:
        row = self._one(
            f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE agent_id=%s AND path=%s",
            (agent_id, path),
        )
        return _memory(row) if row else None

    def memory_read(self, agent_id: str, path: str) -> MemoryRead | None:
        row = self._one(_MEMORY_READ_PG, (path, agent_id))
        return _memory_read(path, row) if row else None

    def live_contents(self, agent_id: str) -> list[tuple[str, str]]:
        rows = self._all("SELECT path, sha256 FROM memories WHERE agent_id=%s", (agent_id,))
        return [(str(p), str(s)) for p, s in rows]

    def live_paths(self, agent_id: str, candidates: Sequence[str]) -> set[str]:
        if not candidates:
            return set()
        rows = self._all(
            "SELECT path FROM memories WHERE agent_id=%s AND path = ANY(%s)",
            (agent_id, list(candidates)),
        )
        return {str(r[0]) for r in rows}

    def live_rows(self, agent_id: str) -> list[tuple[Any, ...]]:
        return self._all(
            "SELECT path, sha256, bytes, description, version, updated_at, listing"
            " FROM memories WHERE agent_id=%s",
            (agent_id,),
        )

    def version(self, agent_id: str, path: str, number: int) -> VersionRow | None:
        row = self._one(
            _VERSIONS + "WHERE v.agent_id=%s AND v.path=%s AND v.version=%s",
            (agent_id, path, number),
        )
        return _version(row) if row else None

    def versions(self, agent_id: str, path: str, after: int, limit: int) -> list[VersionRow]:
        rows = self._all(
            _VERSIONS
            + "WHERE v.agent_id=%s AND v.path=%s AND v.version>%s ORDER BY v.version LIMIT %s",
            (agent_id, path, after, limit),
        )
        return [_version(r) for r in rows]

    def plan_head(self, agent_id: str, paths: Sequence[str]) -> PlanHead:
        """``agent`` and ``path_states`` in this session's one snapshot (the statement
        session is a read session here): one statement for up to ``_LISTED_PATHS``
        paths (the head's one row joined to the paths' states), else those two."""
        wanted = list(dict.fromkeys(paths))
        if not wanted or len(wanted) > _LISTED_PATHS:
            if len(wanted) > _LISTED_PATHS and self._begin is None and not self._in_transaction():
                # A statement session (autocommit) asked for two queries: one snapshot
                # for both, ended with the session (``finish``).
                self._begin = BEGIN_READ
            row = self.agent(agent_id)
            assert self._head is not None
            return PlanHead(row, self._head[1], self._head[2], self.path_states(agent_id, wanted))
        rows = self._all(
            _plan_head(len(wanted)),
            (agent_id, agent_id, agent_id, agent_id, _AFTER_SLASH, *wanted, agent_id),
        )
        head = rows[0]  # the head's one row, once per path
        damage = (str(head[6]), str(head[7])) if head[6] is not None else None
        clock = int(head[8]) if head[8] is not None else 0
        self._head = (agent_id, damage, clock)
        agent = AgentRow(*head[:6]) if head[0] is not None else None
        return PlanHead(agent, damage, clock, _states(row[_HEAD_WIDTH:] for row in rows))

    def path_states(self, agent_id: str, paths: Sequence[str]) -> dict[str, PathState]:
        """Each of ``paths``' state in one query (an array parameter: no batching)."""
        wanted = list(dict.fromkeys(paths))
        if not wanted:
            return {}
        if len(wanted) <= _LISTED_PATHS:
            rows = self._all(
                _path_states(len(wanted)), (agent_id, agent_id, _AFTER_SLASH, *wanted, agent_id)
            )
        else:
            rows = self._all(
                _PATH_STATES_ARRAY, (agent_id, agent_id, _AFTER_SLASH, wanted, agent_id)
            )
        return _states(rows)

    # --- commits ----------------------------------------------------------------

    def commit_entry(self, agent_id: str, revision: int) -> tuple[int, str, str, str] | None:
        row = self._one(
            "SELECT ts, actor, message, changes FROM commits WHERE agent_id=%s AND revision=%s",
            (agent_id, revision),
        )
        return None if row is None else (int(row[0]), str(row[1]), str(row[2]), str(row[3]))

    def commit_revisions(self, agent_id: str) -> list[int]:
        rows = self._all("SELECT revision FROM commits WHERE agent_id=%s", (agent_id,))
        return [int(r[0]) for r in rows]

    def commits(
        self, agent_id: str, *, before: int | None, limit: int, path: str | None = None
    ) -> list[CommitRow]:
        upper = before if before is not None else 1 << 62
        if path is None:
            rows = self._all(
                "SELECT revision, ts, visible_at, actor, message, changes FROM commits"
                " WHERE agent_id=%s AND revision<%s ORDER BY revision DESC LIMIT %s",
                (agent_id, upper, limit),
            )
        else:
            rows = self._all(
                "SELECT c.revision, c.ts, c.visible_at, c.actor, c.message, c.changes"
                " FROM versions v JOIN commits c"
                " ON c.agent_id=v.agent_id AND c.revision=v.revision"
                " WHERE v.agent_id=%s AND v.path=%s AND v.revision<%s"
                " ORDER BY v.revision DESC LIMIT %s",
                (agent_id, path, upper, limit),
            )
        return [CommitRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5])) for r in rows]

    # --- listings -----------------------------------------------------------------

    def list_memories(
        self,
        agent_id: str,
        folder: str,
        *,
        after: str | None,
        limit: int,
        depth_one: bool,
        filters: Sequence[tuple[str, str]] = (),
    ) -> tuple[list[MemoryRow | FolderEntry], bool]:
        rows, more = self._walk(agent_id, folder, _MEMORY_COLUMNS, after, limit, depth_one, filters)
        return [r if isinstance(r, FolderEntry) else _memory(r) for r in rows], more

    def list_memories_json(
        self,
        agent_id: str,
        folder: str,
        *,
        after: str | None,
        limit: int,
        depth_one: bool,
        filters: Sequence[tuple[str, str]] = (),
    ) -> ListingJson:
        rows, more = self._walk(agent_id, folder, "path, listing", after, limit, depth_one, filters)
        texts = [str(r[1]) for r in rows if not isinstance(r, FolderEntry)]
        folders = [r.path for r in rows if isinstance(r, FolderEntry)]
        last = None
        if rows:
            end = rows[-1]
            last = end.path + "/" if isinstance(end, FolderEntry) else str(end[0])
        return ListingJson(",".join(texts).encode(), folders, last, more)

    def count_memories(
        self,
        agent_id: str,
        folder: str,
        *,
        depth_one: bool,
        filters: Sequence[tuple[str, str]] = (),
    ) -> int:
        if depth_one:
            total, after = 0, None
            while True:
                page, more = self._walk(agent_id, folder, "path", after, 1000, True, filters)
                total += len(page)
                if not more:
                    return total
                last = page[-1]
                after = last.path + "/" if isinstance(last, FolderEntry) else str(last[0])
        if folder == "/memories" and not filters:
            # Every memory of the agent: the count its row keeps (moved by each commit
            # in its own transaction), one row read instead of a scan of them all.
            row = self._one("SELECT memory_count FROM agents WHERE agent_id=%s", (agent_id,))
            return int(row[0]) if row else 0
        where = _KEYSET.format(">") + _FILTER * len(filters)
        params: list[object] = [agent_id, folder + "/", agent_id, folder + _AFTER_SLASH]
        for key, value in filters:
            params += [key, value]
        row = self._one(f"SELECT COUNT(*) FROM memories WHERE {where}", params)
        return int(row[0]) if row else 0

    def _walk(
        self,
        agent_id: str,
        folder: str,
        columns: str,
        after: str | None,
        limit: int,
        depth_one: bool,
        filters: Sequence[tuple[str, str]],
    ) -> tuple[list[Row | FolderEntry], bool]:
        """One page of a folder in path order (keyset from ``after``: a memory path, or a
        folder path with a trailing "/"), subfolders leapt over with one seek each when
        ``depth_one``; True when more entries follow."""
        upper = folder + _AFTER_SLASH
        if after is None:
            lower, inclusive = folder + "/", False
        elif after.endswith("/"):
            lower, inclusive = after[:-1] + _AFTER_SLASH, True
        else:
            lower, inclusive = after, False
        if lower < folder + "/":  # a cursor before the folder must not widen the listing
            lower, inclusive = folder + "/", False
        # Bounds written as row comparisons on the primary key: see _KEYSET.
        where = _KEYSET + _FILTER * len(filters)
        params: list[object] = [agent_id, lower, agent_id, upper]
        for key, value in filters:
            params += [key, value]
        out: list[Row | FolderEntry] = []
        want = limit + 1
        while len(out) < want:
            asked = want - len(out)
            if depth_one:
                asked = min(asked, _JUMP_BATCH)
            sql = (
                f"SELECT {columns} FROM memories WHERE "
                + where.format(">=" if inclusive else ">")
                + " ORDER BY agent_id, path LIMIT %s"
            )
            rows = self._all(sql, (*params, asked))
            jumped = False
            for row in rows:
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
            if not jumped and len(rows) < asked:
                break
        return out[:limit], len(out) > limit

    # --- runs -------------------------------------------------------------------

    def runs_by_status(self) -> dict[str, int]:
        rows = self._all("SELECT status, COUNT(*) FROM runs GROUP BY status")
        return {str(s): int(n) for s, n in rows}

    def run_row(self, agent_id: str, run_id: str) -> RunRow | None:
        return self._one(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE agent_id=%s AND run_id=%s", (agent_id, run_id)
        )

    def due_run_rows(self, now: int, limit: int) -> list[RunRow]:
        """Up to ``limit`` of each: queued, running, and delayed runs whose retry time
        has come, each in creation order."""
        rows: list[RunRow] = []
        for where, params in (
            ("status='queued'", ()),
            ("status='running'", ()),
            ("status='delayed' AND next_retry_at<=%s", (now,)),
        ):
            rows += self._all(
                f"SELECT {RUN_COLUMNS} FROM runs WHERE {where} ORDER BY created_at LIMIT %s",
                (*params, limit),
            )
        return rows

    def run_rows(
        self,
        agent_id: str,
        *,
        trigger_id: str | None,
        status: str | None,
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[RunRow]:
        where = "agent_id=%s"
        params: list[object] = [agent_id]
        if trigger_id is not None:
            where += " AND trigger_id=%s"
            params.append(trigger_id)
        if status is not None:
            where += " AND status=%s"
            params.append(status)
        if after is not None:
            where += " AND (created_at, run_id) > (%s, %s)"
            params += list(after)
        return self._all(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE {where} ORDER BY created_at, run_id LIMIT %s",
            (*params, limit),
        )

    def run_counts(self, agent_id: str) -> dict[str, Any]:
        by_status = {
            str(s): int(n)
            for s, n in self._all(
                "SELECT status, COUNT(*) FROM runs WHERE agent_id=%s GROUP BY status", (agent_id,)
            )
        }
        row = self._one(
            "SELECT MAX(finished_at),"
            " MIN(next_retry_at) FILTER (WHERE status='delayed') FROM runs WHERE agent_id=%s",
            (agent_id,),
        )
        assert row is not None
        last = None if row[0] is None else int(row[0])
        retry = None if row[1] is None else int(row[1])
        return {"by_status": by_status, "last_finished": last, "next_retry": retry}

    def finished_deliveries(self, before: int) -> list[tuple[str, str, str]]:
        rows = self._all(
            "SELECT agent_id, run_id, delivery_key FROM runs WHERE delivery_key IS NOT NULL"
            " AND status IN ('succeeded', 'failed') AND created_at < %s",
            (before,),
        )
        return [(str(a), str(r), str(k)) for a, r, k in rows]

    # --- the inspect walkers ------------------------------------------------------

    def version_rows(
        self, seek: tuple[str, str, int], high: str, pin: int, limit: int
    ) -> list[tuple[Any, ...]]:
        """Stored versions visible at ``pin`` after ``seek`` with agent below ``high``
        (columns as ``walks.version_rows``)."""
        op, bound = _below(high)
        return self._all(
            "SELECT agent_id, path, version, sha256, bytes, description, valid_from,"
            " valid_to, visible_to, revision, visible_from FROM versions"
            f" WHERE (agent_id, path, version) > (%s, %s, %s) AND agent_id {op} %s"
            " AND sha256 IS NOT NULL AND visible_from<=%s"
            " ORDER BY agent_id, path, version LIMIT %s",
            (*seek, bound, pin, limit),
        )

    def link_rows(
        self, seek: tuple[str, str, int, int], high: str, pin: int, limit: int
    ) -> list[tuple[Any, ...]]:
        """Links of stored versions visible at ``pin`` after ``seek`` with agent below
        ``high``, each with its target's live version (columns as ``walks.link_rows``)."""
        op, bound = _below(high)
        live = walks.LIVE_TARGET.replace("?", "%s")
        return self._all(
            f"SELECT l.agent_id, l.path, l.version, l.idx, l.target, {live} FROM links l"
            " WHERE (l.agent_id, l.path, l.version, l.idx) > (%s, %s, %s, %s)"
            f" AND l.agent_id {op} %s AND l.visible_from<=%s"
            " ORDER BY l.agent_id, l.path, l.version, l.idx LIMIT %s",
            (pin, pin, *seek, bound, pin, limit),
        )

    def agent_links(self, agent_id: str) -> list[tuple[str, int, int, str, int]]:
        rows = self._all(
            "SELECT path, version, idx, target, visible_from FROM links WHERE agent_id=%s"
            " ORDER BY path, version, idx",
            (agent_id,),
        )
        return [(str(p), int(v), int(i), str(t), int(f)) for p, v, i, t, f in rows]

    def live_version_at(self, agent_id: str, path: str, pin: int) -> int | None:
        row = self._one(
            "SELECT version FROM versions WHERE agent_id=%s AND path=%s AND visible_from<=%s"
            " AND sha256 IS NOT NULL AND (visible_to IS NULL OR visible_to>%s)",
            (agent_id, path, pin, pin),
        )
        return int(row[0]) if row else None

    def step_rows(
        self,
        kind: str,
        ident: str,
        seek: tuple[Any, ...],
        pin: int,
        limit: int,
        *,
        commits: bool,
        heads: bool = False,
    ) -> list[tuple[Any, ...]]:
        """Commit rows (or run-step rows) visible at ``pin`` after ``seek``, in visible
        order (columns, seeks and ``heads`` as ``walks.step_rows``)."""
        if commits:
            select, rest = walks.commit_steps(heads), "revision"
        else:
            select, rest = walks.RUN_STEPS, "run_id, seq"
        marks = ", ".join(["%s"] * len(seek))
        if kind == "agent":
            return self._all(
                f"{select} WHERE agent_id=%s AND (visible_at, {rest}) > ({marks})"
                f" AND visible_at<=%s ORDER BY visible_at, {rest} LIMIT %s",
                (ident, *seek, pin, limit),
            )
        return self._all(
            f"{select} WHERE (visible_at, agent_id, {rest}) > ({marks})"
            " AND visible_at<=%s AND (agent_id=%s OR (agent_id>%s AND agent_id<%s))"
            f" ORDER BY visible_at, agent_id, {rest} LIMIT %s",
            (*seek, pin, ident, ident + "/", ident + "0", limit),
        )
