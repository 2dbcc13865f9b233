"""The PostgreSQL index's write session: the SQLite index's writes (``derived/index/
writes.py`` and ``runs.py``), one for one, inside one READ COMMITTED transaction.

Locks (transaction-scoped advisory locks, shared by every server):

- **Per agent.** The first statement of a session that names an agent (a read such as
  ``agent()`` or ``run_row()``, or a write) first takes that agent's lock, and the
  index's lock ``WRITE_LOCK`` in shared mode. Writers of one agent queue; writers of
  different agents run side by side. Every statement after the lock sees what the
  agent's previous writers committed (READ COMMITTED).
- **Everything.** Writes that span agents (``clear_tables``: reindex) and the schema's
  migrations take ``WRITE_LOCK`` exclusively: they wait for every writer, and every
  writer waits for them.
- **The clock.** Visibility stamps are not decided under either lock: two agents'
  commits may have read the same clock. Each session that stamped rows takes the clock
  row (``UPDATE meta … 'clock'``) as its last statement before COMMIT, in the same
  round trip: ``stamp = max(clock + 1, the stamps it was given)``, and its rows'
  stamps are set to it. The clock row's lock orders the stamps as the commits become
  visible: a commit not yet visible in the snapshot that answered a readTimestamp took
  the clock row after the one that snapshot saw, so it is stamped after that
  readTimestamp (see connection.py).

Keys and triggers live in the bucket only (create-if-absent decides between servers):
no index lock is involved. Runs lock their agent (their rows are the agent's).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from psycopg import Cursor

from memfs.derived.index.postgres.batch import KEYED_JOINS, WRITE, RowBatch
from memfs.derived.index.postgres.reads import Conn, PgRead, encode_text
from memfs.derived.index.rows import (
    AgentRow,
    commit_head,
)
from memfs.derived.index.runs import RUN_COLUMNS, RUN_FIELDS
from memfs.derived.index.schema import DERIVED_TABLES
from memfs.domain.commits import Commit
from memfs.errors import CorruptionError

# The index's lock: "memfs" in ASCII, a key no other application of the database is
# likely to use. Shared by per-agent writers, exclusive for writes of every agent.
WRITE_LOCK = 0x6D656D6673
# The namespace of the per-agent locks (the two-key form: a lock space apart from
# WRITE_LOCK's), "memf"; the second key is a hash of the agent id (a collision makes
# two agents queue on one lock: slower, never wrong).
AGENT_LOCKS = 0x6D656D66
_LOCK_AGENT = "SELECT pg_advisory_xact_lock(%s::int4, %s::int4)"
_LOCK_FIRST_AGENT = (
    "SELECT pg_advisory_xact_lock_shared(%s::int8), pg_advisory_xact_lock(%s::int4, %s::int4)"
)
_LOCK_ALL = "SELECT pg_advisory_xact_lock(%s::int8)"
# Several agents' locks in one statement (``agent_rows``), in the order of the array:
# a function scan yields an array's elements in order and each row's lock is taken as
# the row is made, so every server taking a batch's locks in ascending key order never
# holds one another server's batch waits for while waiting for one that batch holds.
_LOCK_AGENTS = "SELECT count(pg_advisory_xact_lock(%s::int4, k)) FROM unnest(%s::int4[]) k"
_LOCK_FIRST_AGENTS = (
    "SELECT pg_advisory_xact_lock_shared(%s::int8),"
    " (SELECT count(pg_advisory_xact_lock(%s::int4, k)) FROM unnest(%s::int4[]) k)"
)
# Several agents' rows, their damage and the clock, in one statement: ``_AGENT_HEAD``
# for each agent named (one row each, whatever exists).
_AGENT_HEADS = (
    "SELECT x.agent_id, a.name, a.store_id, a.created_at, a.revision, a.last_ts,"
    " d.file, d.reason, m.value FROM unnest(%s::text[]) x(agent_id)"
    " LEFT JOIN agents a ON a.agent_id=x.agent_id LEFT JOIN damage d ON d.agent_id=x.agent_id"
    " LEFT JOIN meta m ON m.key='clock'"
)
# The clock step, the one statement that moves the clock: to at least the highest value
# asked (inspect's pin, reindex's old clock, a log's own stamps), never back; and for a
# session that stamped rows with given stamps from ``least`` to ``most``, past them all,
# shifted past the clock when it had reached the least (their order kept): then
# ``clock - most`` is the shift each stamp gets. NULLs: nothing asked, nothing stamped.
# The stamped rows move with it, in the same statement (one statement, not one per kind
# of row: each costs the server and this client about as much as a small commit's row):
# each data-modifying CTE reads the shift from the clock's RETURNING, and is skipped as a
# whole (a one-time filter on the uncorrelated sub-select) when it is not positive, as
# it is unless another agent's commit took the clock past a stamp meanwhile. A version
# row may be both opened and closed by one session (two commits of a path in a batch):
# it is named once, with both flags, since a statement must not update a row twice.
_CLOCK_RAISE = "UPDATE meta SET value=GREATEST(value, %s::int8, %s::int8 + GREATEST(0, value + 1 - %s::int8)) WHERE key='clock'"
_CLOCK_STEP = (
    f"WITH clock AS ({_CLOCK_RAISE} RETURNING value - %s::int8 AS shift),"
    " c AS (UPDATE commits t SET visible_at=t.visible_at + (SELECT shift FROM clock)"
    " FROM json_to_recordset(%s::json) s(agent_id text, revision int8)"
    " WHERE (SELECT shift FROM clock) > 0 AND t.agent_id=s.agent_id AND t.revision=s.revision),"
    " v AS (UPDATE versions t SET"
    " visible_from=t.visible_from + CASE WHEN s.opened THEN (SELECT shift FROM clock) ELSE 0 END,"
    " visible_to=t.visible_to + CASE WHEN s.closed THEN (SELECT shift FROM clock) ELSE 0 END"
    " FROM json_to_recordset(%s::json)"
    " s(agent_id text, path text, version int8, opened bool, closed bool)"
    " WHERE (SELECT shift FROM clock) > 0 AND t.agent_id=s.agent_id AND t.path=s.path"
    " AND t.version=s.version),"
    " r AS (UPDATE run_steps t SET visible_at=t.visible_at + (SELECT shift FROM clock)"
    " FROM json_to_recordset(%s::json) s(agent_id text, run_id text, seq int8)"
    " WHERE (SELECT shift FROM clock) > 0 AND t.agent_id=s.agent_id AND t.run_id=s.run_id"
    " AND t.seq=s.seq)"
    " SELECT 1"
)


class _Stamped:
    """The rows a session stamped with given stamps, by kind: what the clock step
    shifts."""

    def __init__(self) -> None:
        self.commits: list[tuple[str, int]] = []
        self.versions: dict[tuple[str, str, int], list[bool]] = {}  # -> [opened, closed]
        self.steps: list[tuple[str, str, int]] = []

    def version(self, agent_id: str, path: str, version: int, *, opened: bool) -> None:
        flags = self.versions.setdefault((agent_id, path, version), [False, False])
        flags[0 if opened else 1] = True

    def params(self) -> list[str]:
        """The rows of ``_CLOCK_STEP`` after its four clock parameters: a JSON text per
        kind (ids and paths hold no character ``encode_text`` changes), parameters
        whose types never change, so the statement is prepared once per connection
        and not planned again per session (a quarter of a millisecond of PostgreSQL's
        CPU, measured, when it took a text or number array per column)."""
        return [
            str(_dumps([{"agent_id": a, "revision": r} for a, r in self.commits])),
            str(
                _dumps(
                    [
                        {"agent_id": a, "path": p, "version": v, "opened": o, "closed": c}
                        for (a, p, v), (o, c) in self.versions.items()
                    ]
                )
            ),
            str(_dumps([{"agent_id": a, "run_id": r, "seq": q} for a, r, q in self.steps])),
        ]


def agent_key(agent_id: str) -> int:
    """The agent's lock key: a signed 32-bit hash of its id (the same on every server)."""
    return int.from_bytes(hashlib.sha256(agent_id.encode()).digest()[:4], "big", signed=True)


Params = list[Any] | dict[str, str]
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_INSERT_COMMIT = (
    "INSERT INTO commits(agent_id, revision, ts, visible_at, actor, message,"
    " change_count, head_changes, changes) VALUES(%s,%s,%s,%s,%s,%s,%s,%s,%s)"
)
_NEW_ONLY = " ON CONFLICT DO NOTHING"
# A bulk load writes its rows every LOAD_COMMITS entries, or sooner past LOAD_BYTES of
# contents: a statement's texts stay small, and the server works while this reads on.
LOAD_COMMITS = 200
LOAD_BYTES = 8 << 20
_PUT_RUN = (
    f"INSERT INTO runs({RUN_COLUMNS}) VALUES({','.join(['%s'] * len(RUN_FIELDS))})"
    " ON CONFLICT(agent_id, run_id) DO UPDATE SET "
    + ", ".join(f"{c}=excluded.{c}" for c in RUN_FIELDS[2:])
)


class _Later:
    """Statements whose answers nobody waits for, held until the next statement that
    is waited for (or COMMIT) and sent with it in one pipeline: one round trip, each
    statement still prepared once per connection (psycopg prepares a statement on its
    fifth use). A simple query of the statements, parameters bound client-side, was
    measured too (docs/benchmarks.md): 9% less client CPU but half again as much
    PostgreSQL CPU per commit, every statement planned afresh. An error in any of them fails the batch, hence the
    session, which then rolls back: the same all-or-nothing as one at a time."""

    def __init__(self) -> None:
        self.sql: list[tuple[str, Params | None]] = []

    def execute(self, query: str, params: Sequence[Any] = ()) -> None:
        self.sql.append((query, [encode_text(p) for p in params] if params else None))

    def execute_named(self, query: str, params: dict[str, str]) -> None:
        """``query`` with named parameters, held as given (already stored texts)."""
        self.sql.append((query, params))

    def take(self) -> list[tuple[str, Params | None]]:
        held, self.sql = self.sql, []
        return held


def summary(entry: bytes) -> tuple[int, str, str]:
    """A commits row's change count, first changes and log summary (its changes without
    their inline contents): what the SQLite index writes with json_remove, the same
    JSON, compact, keys in order."""
    changes = json.loads(entry)["changes"]
    for change in changes:
        change.pop("content", None)
    return len(changes), str(_dumps(commit_head(changes))), str(_dumps(changes))


def _commit_values(commit: Commit, visible_at: int, entry: bytes) -> tuple[Any, ...]:
    return (
        commit.agent_id,
        commit.revision,
        commit.ts,
        visible_at,
        commit.actor,
        commit.message,
        *summary(entry),
    )


class PgWrite(PgRead):
    """A write transaction: agents' locks taken as it names them, the clock at the end."""

    def __init__(self, conn: Conn, begin: str | None = None) -> None:
        super().__init__(conn)
        self._agents: set[str] = set()  # whose lock this session holds
        self._everything = False  # holds WRITE_LOCK exclusively
        self._raise_to: int | None = None  # the clock is raised to at least this
        self._given: tuple[int, int] | None = None  # least and most stamp given to rows
        self._stamps = _Stamped()  # the rows stamped with given stamps
        # agent -> its row as read under this session's lock (``agent``), kept as this
        # session's own commits change it (``apply_commit``): no other writer changes
        # it while the lock is held, so a second ``agent()`` of a batch is answered
        # here (a round trip fewer per commit), and a commit past its revision is not
        # in the index yet. Anything else that may change the row drops it.
        self._rows: dict[str, AgentRow] = {}
        # The last clock this session read: a later read could only be higher, and a
        # stamp given from an older one is made final by the clock step (``finish``).
        self._clock: int | None = None
        self._later = _Later()
        # The rows of the commits applied since the last statement sent: written by
        # one statement at the head of the next pipeline (``_send``), however many.
        self._batch = RowBatch()
        self._keyed = False  # KEYED_JOINS was sent in this transaction
        self._began = begin
        if begin is not None:
            self._later.execute(begin)  # sent with the first statement waited for

    def _send(self, last: tuple[str, Sequence[Any]] | None = None) -> Cursor[Any] | None:
        """Send the statements held for later, then ``last``, in one pipeline; the
        cursor of ``last`` (holding its answer)."""
        self._write_batch()
        held = self._later.take()
        cur = self._cursor()  # the session's one cursor: answers of held ones unread
        with self.conn.pipeline():
            for sql, params in held:
                cur.execute(sql, params)
            if last is not None:
                return super()._run(*last)
        return None

    def _write_batch(self) -> None:
        """Hold the batch's rows' statement (``batch.WRITE``) for the next pipeline."""
        if self._batch:
            if not self._keyed:
                self._later.execute(KEYED_JOINS)
                self._keyed = True
            self._later.execute_named(WRITE, self._batch.take())

    def _run(self, sql: str, params: Sequence[Any] = ()) -> Cursor[Any]:
        """Run ``sql`` now, after the statements held for later (and the batch's rows),
        in the same round trip: the cursor holds the answer of ``sql``."""
        self._forget_head()
        if not self._later.sql and not self._batch:
            return super()._run(sql, params)
        cur = self._send((sql, params))
        assert cur is not None
        return cur

    # --- locks and the clock step -------------------------------------------------

    def holds(self, agent_id: str) -> bool:
        """Whether this session holds ``agent_id``'s lock (or every agent's)."""
        return self._everything or agent_id in self._agents

    def lock_agent(self, agent_id: str) -> None:
        """Take ``agent_id``'s lock (and the shared index lock) unless held."""
        if self.holds(agent_id):
            return
        # Held for the next statement: the server runs them in order, so whatever is
        # sent after the lock starts once it is granted (and what was read before it,
        # the agent's head and the clock, is read again after it).
        self._forget_head()
        if self._agents:
            self._later.execute(_LOCK_AGENT, (AGENT_LOCKS, agent_key(agent_id)))
        else:
            self._later.execute(_LOCK_FIRST_AGENT, (WRITE_LOCK, AGENT_LOCKS, agent_key(agent_id)))
        self._agents.add(agent_id)

    def lock_everything(self) -> None:
        """Take the index's lock exclusively: no other writer runs until this commits."""
        if not self._everything:
            self._forget_head()
            self._later.execute(_LOCK_ALL, (WRITE_LOCK,))
            self._everything = True

    def _raise(self, at: int) -> None:
        self._raise_to = at if self._raise_to is None else max(self._raise_to, at)

    def _stamped(self, at: int) -> _Stamped:
        """Rows are being stamped ``at``: where to name them, for the clock step."""
        least, most = self._given or (at, at)
        self._given = (min(least, at), max(most, at))
        return self._stamps

    def finish(self) -> bool:
        """COMMIT, after the statements held for later and, when the session stamped
        rows or raised the clock, the clock step: all in one round trip, its answer
        waited for (a write is acknowledged once committed). False: nothing is left
        to end."""
        self._write_batch()  # before the clock step, which shifts the rows' stamps
        if self._given is not None or self._raise_to is not None:
            least, most = self._given or (None, None)
            self._later.execute(
                _CLOCK_STEP, (self._raise_to, most, least, most, *self._stamps.params())
            )
        if self._later.sql == [(self._began, None)]:
            self._later.take()  # nothing was asked or written: nothing to send
            return False
        self._later.execute("COMMIT")
        self._send()
        return False

    # --- commits --------------------------------------------------------------------

    def apply_commit(
        self, commit: Commit, visible_at: int, contents: dict[str, bytes], entry: bytes
    ) -> bool:
        """Record ``commit`` (idempotent: False if its revision is already there)."""
        agent = commit.agent_id
        self.lock_agent(agent)
        known = self._rows.get(agent)
        if known is not None and commit.revision > known.revision:
            # The agent's row, read under the lock this session holds, is behind this
            # commit, and a commits row is never past its agent's revision (both are
            # written together, and erased together): the row is new, so nothing waits
            # for the insert's answer (a round trip fewer). Without ON CONFLICT: were
            # that ever untrue, the session fails rather than write the rows twice.
            row: tuple[Any, ...] | None = _commit_values(commit, visible_at, entry)
        elif (
            self._run(
                _INSERT_COMMIT + _NEW_ONLY, _commit_values(commit, visible_at, entry)
            ).rowcount
            == 0
        ):
            return False
        else:
            row = None
        # The rest depends on no answer: gathered, and written with the clock step and
        # COMMIT (or the next statement waited for), with the batch's other commits.
        self._apply_changes(commit, visible_at, contents, row)
        if known is not None:  # as the agents row's UPDATE leaves it
            self._rows[agent] = dataclasses.replace(
                known,
                name=commit.agent_name if commit.agent_name is not None else known.name,
                revision=max(known.revision, commit.revision),
                last_ts=max(known.last_ts, commit.ts),
            )
        stamps = self._stamped(visible_at)
        stamps.commits.append((agent, commit.revision))
        for change in commit.changes:
            stamps.version(agent, change.path, change.version, opened=True)
            if change.version > 1:
                stamps.version(agent, change.path, change.version - 1, opened=False)
        return True

    def agent(self, agent_id: str) -> AgentRow | None:
        """The agent's row, read under its lock (taken first, in the same round trip);
        read again in this session, the row as kept (see ``_rows``)."""
        known = self._rows.get(agent_id)
        if known is not None:
            return known
        self.lock_agent(agent_id)
        row = super().agent(agent_id)
        assert self._head is not None
        self._clock = self._head[2]
        if row is not None:
            self._rows[agent_id] = row
        return row

    def agent_rows(self, agent_ids: Sequence[str]) -> dict[str, AgentRow | None]:
        """The rows of ``agent_ids`` (a group commit's agents), each read under its
        lock: the locks not yet held in one statement, in ascending lock key order (the
        same on every server: two servers' batches of the same agents queue rather
        than deadlock), then the rows in a second one sent with it: one round trip,
        where ``agent`` takes one per agent. Rows already read in this session are
        answered as kept."""
        wanted = [a for a in dict.fromkeys(agent_ids) if a not in self._rows]
        keys = sorted({agent_key(a) for a in wanted if not self.holds(a)})
        if keys:
            self._forget_head()
            if self._agents:
                self._later.execute(_LOCK_AGENTS, (AGENT_LOCKS, keys))
            else:
                self._later.execute(_LOCK_FIRST_AGENTS, (WRITE_LOCK, AGENT_LOCKS, keys))
            self._agents.update(wanted)
        if wanted:
            clock = 0
            for row in self._all(_AGENT_HEADS, (wanted,)):
                clock = int(row[8]) if row[8] is not None else 0
                if row[1] is not None:
                    self._rows[str(row[0])] = AgentRow(*row[:6])
            self._clock = clock
        return {a: self._rows.get(a) for a in agent_ids}

    def clock(self) -> int:
        if self._head is None and self._clock is not None:
            return self._clock
        self._clock = super().clock()
        return self._clock

    def _apply_changes(
        self,
        commit: Commit,
        visible_at: int,
        contents: dict[str, bytes],
        commit_row: tuple[Any, ...] | None,
    ) -> None:
        agent = commit.agent_id
        cached: dict[str, bytes | None] = {}
        for change in commit.changes:
            sha = change.after
            if sha is None or sha in contents or sha in cached:
                continue
            # A rename brings no content along: its bytes are the cached ones, this
            # batch's own or the blobs row's (the one answer waited for: the statements
            # held so far, the batch's rows among them, go with it).
            content = self._batch.blob(agent, sha)
            if content is None:
                found = self._one(
                    "SELECT content FROM blobs WHERE agent_id=%s AND sha256=%s", (agent, sha)
                )
                content = bytes(found[0]) if found is not None else None
            cached[sha] = content
        self._batch.add(commit, visible_at, contents, cached, commit_row)

    def bulk_load(
        self,
        agent: str,
        entries: Iterable[tuple[str, str, dict[str, Any]]],
        blob: Callable[[str], bytes],
    ) -> int:
        """Index a whole log into an agent's empty rows: the rows ``apply_commit`` of
        each commit writes (visible at its timestamp), every statement in one pipeline
        (the rows are empty, so no answer is waited for until the end)."""
        self.lock_agent(agent)
        self._rows.pop(agent, None)
        self._send()  # the lock (and BEGIN), before the rest
        with self.conn.pipeline():
            return self._load(entries, blob)

    def _load(
        self, entries: Iterable[tuple[str, str, dict[str, Any]]], blob: Callable[[str], bytes]
    ) -> int:
        count = held = 0
        for where, text, doc in entries:
            try:
                commit = Commit.from_doc(doc, where=where)
                contents: dict[str, bytes] = {}
                for change in commit.changes:
                    if change.after is None:
                        continue
                    if change.content is None:
                        contents[change.after] = blob(change.after)  # checked by the reader
                        continue
                    data = change.content.encode()
                    if hashlib.sha256(data).hexdigest() != change.after:
                        bad = CorruptionError(
                            f"log entry {where}: inline content of {change.path} does not"
                            " match its sha256"
                        )
                        bad.file = where  # type: ignore[attr-defined]
                        raise bad
                    contents[change.after] = data
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise CorruptionError(f"log entry {where} is unreadable: {exc!r}") from None
            self._apply_changes(
                commit, commit.ts, contents, _commit_values(commit, commit.ts, text.encode())
            )
            self._raise(commit.ts)  # the log's own stamps: the clock is raised to them
            count += 1
            held += sum(len(c) for c in contents.values()) + len(text)
            if count % LOAD_COMMITS == 0 or held > LOAD_BYTES:
                self._send()  # the batch's rows, in this pipeline (nothing waited for)
                held = 0
        self._send()  # the rest: an error in them is this call's
        return count

    def clear_damage(self, agent_id: str) -> None:
        self.lock_agent(agent_id)
        self._run("DELETE FROM damage WHERE agent_id=%s", (agent_id,))

    def clear_tables(self, tables: Iterable[str]) -> None:
        for table in tables:
            if table not in DERIVED_TABLES:
                raise ValueError(f"not an index table: {table!r}")
            self.lock_everything()  # every agent's rows
            self._rows.clear()
            self._run(f"DELETE FROM {table}")

    def drop_agent(self, agent_id: str, *, runs: bool = True) -> None:
        self.lock_agent(agent_id)
        self._rows.pop(agent_id, None)
        for table in DERIVED_TABLES:
            if runs or table not in ("runs", "run_steps"):
                self._run(f"DELETE FROM {table} WHERE agent_id=%s", (agent_id,))

    def mark_damaged(self, agent_id: str, file: str, reason: str) -> None:
        self.lock_agent(agent_id)
        self._run(
            "INSERT INTO damage VALUES(%s,%s,%s) ON CONFLICT(agent_id) DO UPDATE"
            " SET file=excluded.file, reason=excluded.reason",
            (agent_id, file, reason),
        )

    def put_agent(self, agent_id: str, name: str, store_id: str, created_at: int) -> None:
        self.lock_agent(agent_id)  # two creators of one id queue; the bucket decides
        self._rows.pop(agent_id, None)
        self._run(
            "INSERT INTO agents(agent_id, name, store_id, created_at) VALUES(%s,%s,%s,%s)"
            " ON CONFLICT DO NOTHING",
            (agent_id, name, store_id, created_at),
        )

    def raise_clock(self, at: int) -> None:
        """Move the visibility clock forward to ``at`` (never back), at the clock step
        (``finish``): taking the clock row now would hold it, and queue every other
        writer behind this transaction, until it commits."""
        self._raise(at)

    def savepoint(self, name: str) -> None:
        self._run(f'SAVEPOINT "{_name(name)}"')

    def rollback_to(self, name: str) -> None:
        self._rows.clear()  # what was undone may have changed them
        self._keyed = False  # a setting made since the savepoint is undone too
        self._run(f'ROLLBACK TO SAVEPOINT "{_name(name)}"')

    def release(self, name: str) -> None:
        self._run(f'RELEASE SAVEPOINT "{_name(name)}"')

    def put_run(self, values: Sequence[Any]) -> None:
        self.lock_agent(str(values[0]))  # RUN_FIELDS begin with agent_id
        self._run(_PUT_RUN, list(values))

    def add_run_step(
        self,
        agent_id: str,
        run_id: str,
        seq: int,
        at: int,
        visible_at: int,
        kind: str,
        attempt: int,
        detail: str,
    ) -> None:
        self.lock_agent(agent_id)
        added = self._run(
            "INSERT INTO run_steps VALUES(%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING",
            (agent_id, run_id, seq, at, visible_at, kind, attempt, detail),
        )
        if added.rowcount:  # a step already there keeps its stamp
            self._stamped(visible_at).steps.append((agent_id, run_id, seq))

    def purge_search(self) -> None:
        """Nothing to merge: a deleted row's words live only in its dead tuple and GIN
        entries, which (auto)VACUUM reclaims as for every other table (VACUUM cannot run
        inside this transaction)."""

    def forget_delivery(self, agent_id: str, run_id: str) -> None:
        self.lock_agent(agent_id)
        self._run(
            "UPDATE runs SET delivery_key=NULL WHERE agent_id=%s AND run_id=%s",
            (agent_id, run_id),
        )


def _locking(read: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(read)
    def locked(self: PgWrite, agent_id: str, *args: Any, **kwargs: Any) -> Any:
        if self.holds(agent_id):
            return read(self, agent_id, *args, **kwargs)
        # The lock (held for later) goes with the read, in one round trip: the server
        # runs them in order, so the read still starts once the lock is granted.
        self.lock_agent(agent_id)
        return read(self, agent_id, *args, **kwargs)

    return locked


# Every read of one agent, in a write session, takes that agent's lock first: what a
# writer reads of an agent (its head, a run's row) no other writer of it changes
# until this one commits.
for _read_name, _read in vars(PgRead).items():
    if (
        not _read_name.startswith("_")
        and callable(_read)
        and _read_name not in vars(PgWrite)
        and list(inspect.signature(_read).parameters)[1:2] == ["agent_id"]
    ):
        setattr(PgWrite, _read_name, _locking(_read))


def _name(name: str) -> str:
    if '"' in name or "\x00" in name:
        raise ValueError(f"not a savepoint name: {name!r}")
    return name
