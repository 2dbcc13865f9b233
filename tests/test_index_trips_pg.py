"""Round trips of the PostgreSQL index's sessions (real PostgreSQL): a read session
ends without waiting for its COMMIT (the pool reads the answer at the next checkout),
and a write session reads each agent's row once (a group commit's batch names its
agents first, all in one round trip, then each again per commit)."""

from __future__ import annotations

import hashlib
import os
import resource
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from memfs.canonical.backend import MemoryBackend
from memfs.core.planner import Put
from memfs.core.store import Store
from memfs.derived.index.postgres import PostgresIndex
from memfs.derived.index.postgres.writes import AGENT_LOCKS, agent_key
from memfs.domain.commits import CREATED, Change, Commit
from pg_round_trips import count_round_trips, count_statements, index_with_agents


@pytest.fixture
def idx(postgres_url: str) -> Iterator[PostgresIndex]:
    # One connection: every session below reuses the one the previous session left.
    yield from index_with_agents(postgres_url, pool_size=1)


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What this process waits on PostgreSQL for (``pg_round_trips``)."""
    return count_round_trips(monkeypatch)


def _commit(agent: str, revision: int, path: str) -> tuple[Commit, dict[str, bytes]]:
    data = f"{agent} {revision}\n".encode()
    sha = hashlib.sha256(data).hexdigest()
    change = Change(path, CREATED, 1, None, sha, len(data), content=data.decode())
    return Commit(agent, revision, 10**12 + revision, "t", "m", (change,)), {sha: data}


def test_a_commits_planning_read_is_one_statement_without_a_transaction(
    idx: PostgresIndex, trips: list[str]
) -> None:
    """The planning read of a commit of a few paths (the agent's head, its damage, the
    clock and each path's state) is one statement in autocommit: one round trip, no
    BEGIN or COMMIT, where it was BEGIN with the head, then the paths, then COMMIT."""
    with idx.write_session() as s:
        commit, contents = _commit("a", 1, "/memories/x.md")
        assert s.apply_commit(commit, commit.ts, contents, commit.to_bytes())
    trips.clear()
    with idx.statement_session() as r:
        head = r.plan_head("a", ["/memories/x.md", "/memories/y.md"])
        status = r.conn.info.transaction_status  # type: ignore[attr-defined]
    assert len(trips) == 1 and trips[0].startswith("SELECT h.*"), trips
    assert status == psycopg.pq.TransactionStatus.IDLE
    assert head.agent is not None and head.agent.revision == 1
    assert head.states["/memories/x.md"].memory is not None
    assert head.states["/memories/y.md"].last_version == 0


def test_a_planning_read_of_many_paths_in_a_statement_session_takes_one_snapshot(
    idx: PostgresIndex,
) -> None:
    """Past eight paths the planning read is two queries: in a statement session it
    opens a read-only REPEATABLE READ transaction for them (one snapshot), ended with
    the session."""
    many = [f"/memories/{i}.md" for i in range(10)]
    with idx.statement_session() as r:
        head = r.plan_head("a", many)
        conn = r.conn  # type: ignore[attr-defined]
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        level = conn.execute("SHOW transaction_isolation").fetchone()
    assert level == ("repeatable read",)
    assert head.agent is not None and set(head.states) == set(many)
    with idx.statement_session() as r:  # the same connection, its transaction ended
        assert r.agent("a") is not None
        assert r.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE  # type: ignore[attr-defined]


def _state(url: str, application: str) -> str:
    """The state of the one backend of this test's index (pg_stat_activity)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT state FROM pg_stat_activity WHERE datname=current_database()"
            " AND pid<>pg_backend_pid() AND backend_type='client backend'"
            " AND application_name=%s",
            (application,),
        ).fetchall()
    assert len(rows) == 1, rows
    return str(rows[0][0])


def test_a_read_session_is_its_queries_round_trips_and_ends_its_snapshot_at_once(
    postgres_url: str, trips: list[str]
) -> None:
    """One query in a read session is one round trip (BEGIN goes with it, COMMIT is
    sent without waiting). PostgreSQL still ends the transaction at once: the idle
    connection is not left inside it (holding its snapshot), and the next session on
    that connection sees a write committed after the first ended."""
    url = postgres_url + ("&" if "?" in postgres_url else "?") + "application_name=memfs-trips"
    index = PostgresIndex(url, pool_size=1)
    try:
        with index.write_session() as s:
            s.put_agent("a", "A", "store-a", 1)
        trips.clear()
        with index.read_session() as r:
            row = r.agent("a")
            assert row is not None and row.revision == 0
        assert trips == ["pipeline"], trips
        deadline = time.monotonic() + 60
        while _state(url, "memfs-trips") != "idle":
            assert time.monotonic() < deadline, "the read's transaction was never ended"
            time.sleep(0.05)
        with psycopg.connect(postgres_url, autocommit=True) as other:
            other.execute("UPDATE agents SET revision=7 WHERE agent_id='a'")
        with index.read_session() as r:  # the same connection, its COMMIT's answer read
            row = r.agent("a")
            assert row is not None and row.revision == 7
        with index.write_session() as s:  # and a write session after it
            assert s.put_agent("c", "C", "store-c", 1) is None
        with index.read_session() as r:
            assert r.agent("c") is not None
        # A connection whose backend died after its COMMIT was sent (a restart, an
        # idle timeout): the next session gets a new connection, not an error.
        with psycopg.connect(postgres_url, autocommit=True) as other:
            killed = other.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name='memfs-trips'"
            ).fetchall()
            assert killed == [(True,)]
            # pg_terminate_backend only signals: wait until the backend is gone.
            deadline = time.monotonic() + 60
            while other.execute(
                "SELECT 1 FROM pg_stat_activity WHERE application_name='memfs-trips'"
            ).fetchall():
                assert time.monotonic() < deadline, "the backend was never terminated"
                time.sleep(0.05)
        with index.read_session() as r:
            assert r.agent("c") is not None
    finally:
        index.close()


def _backend_pids(url: str, application: str) -> list[int]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name=%s", (application,)
        ).fetchall()
    return [int(pid) for (pid,) in rows]


def test_a_process_past_1024_descriptors_keeps_its_connection(postgres_url: str) -> None:
    """A server with many clients holds more descriptors than ``select`` takes
    (FD_SETSIZE, 1024): a connection numbered past it still ends its reads without
    waiting and is reused by the next session, not refused nor replaced each time."""
    held_count = 1100
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard >= held_count + 200, (
        f"this test needs a descriptor limit of {held_count + 200}; raise it with "
        f"'ulimit -Hn {held_count + 200}' (the hard limit here is {hard})"
    )
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, held_count + 200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(held_count)]
    url = postgres_url + ("&" if "?" in postgres_url else "?") + "application_name=memfs-fds"
    index = PostgresIndex(url, pool_size=1)
    try:
        with index.write_session() as s:
            s.put_agent("a", "A", "store-a", 1)
        backends = set()
        for _ in range(5):
            with index.read_session() as r:
                assert r.agent("a") is not None
            backends.update(_backend_pids(postgres_url, "memfs-fds"))
        assert len(backends) == 1, backends
    finally:
        index.close()
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_batch_takes_its_agents_locks_and_rows_in_one_round_trip_and_follows_its_commits(
    idx: PostgresIndex, trips: list[str]
) -> None:
    """A group commit of two agents names both at once (``agent_rows``: their locks
    and rows in one round trip, where it took one per agent), then reads each row again
    per commit: those reads are answered from the rows the session keeps, as its
    commits changed them, so the whole batch is two round trips (the rows, then the
    rest with COMMIT). A rollback to a savepoint forgets the kept rows."""
    commit_a, contents_a = _commit("a", 1, "/memories/x.md")
    commit_b, contents_b = _commit("b", 1, "/memories/y.md")
    trips.clear()
    with idx.write_session() as s:
        heads = s.agent_rows(["a", "b", "nobody"])
        assert heads["nobody"] is None
        assert [(r.agent_id, r.revision) for r in (heads["a"], heads["b"]) if r] == [
            ("a", 0),
            ("b", 0),
        ]
        row = s.agent("a")
        assert row is not None and row.revision == 0
        assert s.apply_commit(commit_a, commit_a.ts, contents_a, commit_a.to_bytes())
        row = s.agent("a")
        assert row is not None and (row.revision, row.last_ts) == (1, commit_a.ts)
        row = s.agent("b")
        assert row is not None and row.revision == 0
        assert s.apply_commit(commit_b, commit_b.ts, contents_b, commit_b.to_bytes())
        assert s.clock() == 0  # the clock as read with the rows: no round trip either
    assert trips == ["pipeline", "pipeline"], trips
    with idx.read_session() as r:
        assert [(a.agent_id, a.revision) for a in r.agents("", None, 10)] == [("a", 1), ("b", 1)]
        assert r.agent_stats("a") == (1, len(b"a 1\n"))
        assert r.clock() == commit_b.ts
    commit_a2, contents_a2 = _commit("a", 2, "/memories/z.md")
    with idx.write_session() as s:
        assert s.agent("a") is not None
        s.savepoint("undo")
        assert s.apply_commit(commit_a2, commit_a2.ts, contents_a2, commit_a2.to_bytes())
        s.rollback_to("undo")
        row = s.agent("a")  # read again: the commit was undone
        assert row is not None and row.revision == 1
    with idx.read_session() as r:
        assert r.agent_stats("a") == (1, len(b"a 1\n"))


def _granted_agent_locks(url: str, application: str) -> set[int]:
    """The agent lock keys (``writes.agent_key``) held by the backend of ``application``."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT l.objid FROM pg_locks l JOIN pg_stat_activity a ON a.pid=l.pid"
            " WHERE l.locktype='advisory' AND l.granted AND l.objsubid=2 AND l.classid=%s"
            " AND a.application_name=%s",
            (AGENT_LOCKS, application),
        ).fetchall()
    # pg_locks shows the signed key as an unsigned oid.
    return {int(objid) - (1 << 32) if int(objid) >= 1 << 31 else int(objid) for (objid,) in rows}


def test_batches_naming_agents_in_any_order_take_their_locks_in_one_order(
    postgres_url: str,
) -> None:
    """Two servers' batches of the same agents queue instead of deadlocking: each takes
    the locks in ascending key order, whatever order it names the agents in. A batch
    naming (high, low) while another session holds ``high`` has taken ``low`` and
    waits for ``high``; once ``high`` is free it gets both."""
    low, high = sorted(("a", "b"), key=agent_key)
    holder = PostgresIndex(postgres_url, pool_size=1)
    url = postgres_url + ("&" if "?" in postgres_url else "?") + "application_name=memfs-order"
    batch = PostgresIndex(url, pool_size=1)
    answer: list[dict[str, object]] = []
    try:
        with holder.write_session() as s:
            s.put_agent(low, "Low", "store-1", 1)
            s.put_agent(high, "High", "store-1", 1)
        with holder.write_session() as s:
            assert s.agent(high) is not None  # its lock held until this block ends

            def run_batch() -> None:
                with batch.write_session() as b:
                    answer.append(dict(b.agent_rows([high, low])))

            waiter = threading.Thread(target=run_batch)
            waiter.start()
            deadline = time.monotonic() + 60
            while agent_key(low) not in _granted_agent_locks(postgres_url, "memfs-order"):
                assert time.monotonic() < deadline, "the batch never took the lower key first"
                time.sleep(0.05)
            assert agent_key(high) not in _granted_agent_locks(postgres_url, "memfs-order")
            assert not answer  # still waiting for high
        waiter.join(timeout=60)
        assert not waiter.is_alive()
        assert [row.agent_id for row in answer[0].values() if row is not None] == [high, low]
    finally:
        holder.close()
        batch.close()


def test_a_group_commit_of_three_agents_is_two_round_trips(
    postgres_url: str, tmp_path: Path, trips: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three agents' commits queued behind a running flush are indexed by the next one
    in two round trips (their locks and rows, then the rows written with COMMIT), where
    naming each agent in turn took four, and in seven statements: the three commits' rows
    are one statement (``postgres/batch.py``), where each commit took about ten; each
    is then readable."""
    store = Store(tmp_path / "data", backend=MemoryBackend(), index_location=postgres_url)
    agents = ["a", "b", "c"]
    try:
        for agent in agents:
            store.create_agent(agent)
        group = store.commits.group
        errors: list[BaseException] = []

        def write(agent: str) -> None:
            try:
                store.apply(agent, [Put("/memories/n.md", b"note\n")], actor="t")
            except BaseException as exc:  # reported by the test below
                errors.append(exc)

        writers = [threading.Thread(target=write, args=(a,)) for a in agents]
        with group._leader:  # a flush running: the three commits queue behind it
            for w in writers:
                w.start()
            deadline = time.monotonic() + 60
            while group.waiting() < len(agents):
                assert time.monotonic() < deadline, "the commits never queued"
                time.sleep(0.01)
            trips.clear()
            sent = count_statements(monkeypatch)
        for w in writers:
            w.join(timeout=60)
        assert not errors, errors
        assert trips == ["pipeline", "pipeline"], trips
        # BEGIN, the locks, the rows; the planner's settings, the commits' rows, the
        # clock step, COMMIT.
        assert sent == ["BEGIN", "SELECT", "SELECT", "SELECT", "WITH", "WITH", "COMMIT"], sent
        assert group.flushed - group.flushes == len(agents) - 1  # one flush held all three
        for agent in agents:
            assert store.read(agent, "/memories/n.md").content == b"note\n"
    finally:
        store.close()
