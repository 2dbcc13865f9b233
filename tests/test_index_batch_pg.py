"""A PostgreSQL write session writes its commits' rows in one statement (``postgres/
batch.py``), folding several commits of one agent and one path together: the rows it
leaves must be exactly those of the same commits applied one session each (real
PostgreSQL), and the statements per batch must not grow with its commits."""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from engine_postgres import PostgresServer
from memfs.canonical import layout
from memfs.canonical.backend import MemoryBackend
from memfs.core.maintenance import reindex
from memfs.core.planner import Delete, Move, Put
from memfs.core.store import Store
from memfs.derived.index.postgres import PostgresIndex
from memfs.derived.index.postgres.batch import KEYED_JOINS, WRITE, RowBatch
from memfs.derived.index.rows import MemoryRow
from memfs.domain.commits import CREATED, DELETED, MODIFIED, RENAMED, Change, Commit
from memfs.domain.content import Scalar
from pg_round_trips import count_statements

M = "/memories/"
_CLOCK = itertools.count(1)
TABLES = {
    "agents": "agent_id",
    "commits": "agent_id, revision",
    "versions": "agent_id, path, version",
    "memories": "agent_id, path",
    "memory_meta": "agent_id, path, key",
    "blobs": "agent_id, sha256",
    "search_docs": "agent_id, path",
    "links": "agent_id, path, version, idx",
}


def _text(body: str) -> tuple[str, bytes]:
    data = body.encode()
    return hashlib.sha256(data).hexdigest(), data


class _Log:
    """Commits of one agent built change by change, each path's version and content
    followed (what the planner would give), with the contents each brings."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.revision = 0
        self.live: dict[str, tuple[str, int]] = {}  # path -> (sha256, size)
        self.versions: dict[str, int] = {}

    def commit(
        self, ops: list[tuple[Any, ...]], name: str | None = None
    ) -> tuple[Commit, dict[str, bytes]]:
        self.revision += 1
        changes: list[Change] = []
        contents: dict[str, bytes] = {}
        for op in ops:
            path = M + op[1]
            version = self.versions.get(path, 0) + 1
            before = self.live.get(path)
            if op[0] == "put":
                meta: dict[str, Scalar] = op[3] if len(op) > 3 else {}
                sha, data = _text(op[2])
                kind = MODIFIED if before else CREATED
                changes.append(
                    Change(
                        path,
                        kind,
                        version,
                        before[0] if before else None,
                        sha,
                        len(data),
                        content=op[2],
                        description=f"about {op[1]}",
                        metadata=meta,
                    )
                )
                contents[sha] = data
                self.live[path] = (sha, len(data))
            elif op[0] == "delete":
                assert before is not None
                changes.append(Change(path, DELETED, version, before[0], None))
                del self.live[path]
            else:  # ("move", src, dst): the bytes come from the blobs rows
                dst = M + op[2]
                assert before is not None
                dst_version = self.versions.get(dst, 0) + 1
                changes.append(Change(path, RENAMED, version, before[0], None, renamed_to=dst))
                changes.append(
                    Change(dst, RENAMED, dst_version, None, before[0], before[1], renamed_from=path)
                )
                self.live[dst] = self.live.pop(path)
                self.versions[dst] = dst_version
            self.versions[path] = version
        ts = 10**15 + next(_CLOCK) * 1000  # in the order made: no stamp shifted
        commit = Commit(
            self.agent, self.revision, ts, "t", f"r{self.revision}", tuple(changes), name
        )
        return commit, contents


def _rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(url) as conn:
        return {
            table: conn.execute(
                f"SELECT * FROM {table} ORDER BY {key}".replace("SELECT *", "SELECT *, doc::text")
                if table == "search_docs"
                else f"SELECT * FROM {table} ORDER BY {key}"
            ).fetchall()
            for table, key in TABLES.items()
        }


def _index(server: PostgresServer) -> tuple[str, PostgresIndex]:
    url = server.new_database()
    index = PostgresIndex(url, pool_size=1)
    with index.write_session() as s:
        s.put_agent("a", "Alice", "store-a", 1)
        s.put_agent("b", "Bob", "store-b", 1)
    return url, index


@pytest.fixture
def logs() -> Iterator[tuple[list[tuple[Commit, dict[str, bytes]]], list[Any]]]:
    a, b = _Log("a"), _Log("b")
    before = [
        a.commit(
            [
                ("put", "keep.md", "keep v1 [[old]]", {"k": 1, "j": "two"}),
                ("put", "old.md", "old v1"),
                ("put", "gone.md", "gone v1", {"g": True}),
                ("put", "src.md", "moved body, links [x](keep.md)"),
            ]
        ),
        b.commit([("put", "b.md", "b v1")]),
    ]
    batch = [
        # keep.md: three versions of one path, the middle one opened and closed here;
        # new.md and fresh.md made and updated (their created_at the first's); gone.md
        # deleted then made again (its created_at the new one's, its old metadata
        # gone). The one rename whose content is read (from the blobs rows) comes
        # first: that read sends what the batch holds, and nothing is held yet.
        a.commit(
            [
                ("put", "keep.md", "keep v2", {"k": 3}),
                ("put", "new.md", "new v1 [[keep]]", {"x": 1}),
                ("delete", "gone.md"),
                ("put", "fresh.md", "fresh v1", {"f": 1}),
                ("move", "src.md", "dst.md"),  # content from the rows before the batch
            ]
        ),
        b.commit([("put", "b.md", "b v2 [[b2]]", {"y": "z"})]),
        a.commit(
            [
                ("put", "keep.md", "keep v3", {"z": 9}),
                ("put", "new.md", "new v2 [[old]] [[keep]]", {"x": 2}),
                ("put", "gone.md", "gone again"),
                ("put", "fresh.md", "fresh v2", {"f": 2}),
            ]
        ),
        # new.md renamed: its content is the batch's own (no blobs row yet); old.md
        # deleted; the agent renamed.
        a.commit([("move", "new.md", "renamed.md"), ("delete", "old.md")], name="Alice 2"),
        b.commit([("delete", "b.md")]),
    ]
    yield before, batch


def test_a_batch_of_commits_leaves_the_rows_of_the_same_commits_one_by_one(
    postgres_server: PostgresServer,
    logs: tuple[list[tuple[Commit, dict[str, bytes]]], list[tuple[Commit, dict[str, bytes]]]],
) -> None:
    """Two agents' commits in one session, touching the same paths again and again
    (updates, delete then re-create, renames of old and of just-made contents, an
    agent renamed), leave every table's rows exactly as those commits applied one
    session each: counts and bytes, versions opened and closed, created_at kept or
    reset, metadata replaced, search words and links."""
    before, batch = logs
    one_url, one = _index(postgres_server)
    all_url, together = _index(postgres_server)
    try:
        for index in (one, together):
            for commit, contents in before:
                with index.write_session() as s:
                    assert s.apply_commit(commit, commit.ts, contents, commit.to_bytes())
        for commit, contents in batch:
            with one.write_session() as s:
                assert s.agent(commit.agent_id) is not None
                assert s.apply_commit(commit, commit.ts, contents, commit.to_bytes())
        with together.write_session() as s:
            s.agent_rows(["a", "b"])  # as a group commit: the rows known, inserts held
            for commit, contents in batch:
                assert s.apply_commit(commit, commit.ts, contents, commit.to_bytes())
        expected, found = _rows(one_url), _rows(all_url)
        for table in TABLES:
            for x, y in zip(found[table], expected[table], strict=True):
                assert x == y, table
        # And what that means for a reader (so the reference is not wrong too):
        with together.read_session() as r:
            assert r.agent_stats("a") == (
                5,
                sum(
                    len(x)
                    for x in (
                        b"keep v3",
                        b"gone again",
                        b"moved body, links [x](keep.md)",
                        b"new v2 [[old]] [[keep]]",
                        b"fresh v2",
                    )
                ),
            )
            assert r.agent_stats("b") == (0, 0)
            row = r.agent("a")
            assert row is not None and (row.name, row.revision) == ("Alice 2", 4)
            gone = r.memory("a", M + "gone.md")
            assert gone is not None and gone.metadata == {}
            assert gone.created_at == batch[2][0].ts
            renamed = r.memory("a", M + "renamed.md")
            assert renamed is not None and renamed.created_at == batch[3][0].ts
            fresh = r.memory("a", M + "fresh.md")
            assert fresh is not None and fresh.created_at == batch[0][0].ts
            keep = r.memory("a", M + "keep.md")
            assert keep is not None and keep.metadata == {"z": 9}
            assert keep.created_at == before[0][0].ts
            assert [v.version for v in r.versions("a", M + "keep.md", 0, 10)] == [1, 2, 3]
            assert r.blob("a", batch[3][0].changes[1].after or "") == b"new v2 [[old]] [[keep]]"
    finally:
        one.close()
        together.close()


def test_a_batch_is_the_same_statements_however_many_commits_it_holds(
    postgres_server: PostgresServer,
    monkeypatch: pytest.MonkeyPatch,
    logs: tuple[list[tuple[Commit, dict[str, bytes]]], list[tuple[Commit, dict[str, bytes]]]],
) -> None:
    """The statements a session sends for its commits' rows do not grow with them: one
    commit or five of two agents, with renames, deletes and metadata, are the same
    statements (the locks and rows, the rows' one statement, the clock step, COMMIT),
    where they were about twelve per commit."""
    before, batch = logs
    _url, index = _index(postgres_server)
    try:
        for commit, contents in before:
            with index.write_session() as s:
                s.apply_commit(commit, commit.ts, contents, commit.to_bytes())
        sent = count_statements(monkeypatch)
        counts = []
        for commits in (batch[:1], batch[1:]):
            sent.clear()
            with index.write_session() as s:
                s.agent_rows(["a", "b"])
                for commit, contents in commits:
                    assert s.apply_commit(commit, commit.ts, contents, commit.to_bytes())
            counts.append(list(sent))
        # BEGIN, the locks, the rows (sent together); then the planner's settings (key
        # lookups), the rows' one statement, the clock step and COMMIT (sent together).
        # The first batch's rename reads its content from the blobs rows (one SELECT,
        # before any row is held); the second batch's four commits of two agents, a
        # rename of the batch's own content among them, need nothing more.
        keyed = ["SELECT", "WITH", "WITH", "COMMIT"]
        assert counts[0] == ["BEGIN", "SELECT", "SELECT", "SELECT", *keyed], counts
        assert counts[1] == ["BEGIN", "SELECT", "SELECT", *keyed], counts
    finally:
        index.close()


def test_racing_writers_through_the_store_leave_the_rows_a_reindex_makes(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """Writers racing on one PostgreSQL store (group commits of several agents: each
    agent's updates, metadata, deletes, re-creates and renames) leave the same live
    memories, versions and counts as the SQLite index rebuilt from the same log."""
    backend = MemoryBackend()
    url = postgres_server.new_database()
    store = Store(tmp_path / "data", backend=backend, index_location=url)
    agents = [f"w{i}" for i in range(4)]
    errors: list[BaseException] = []
    try:
        for agent in agents:
            store.create_agent(agent)

        def write(agent: str) -> None:
            try:
                for i in range(5):
                    note = f"---\nn: {i}\n---\na {i} [[f{i}]]\n".encode()
                    store.apply(agent, [Put(M + "a.md", note)], actor="t")
                    store.apply(agent, [Put(M + f"f{i}.md", b"made [[a]]\n")], actor="t")
                    if i % 2:
                        store.apply(agent, [Move(M + f"f{i}.md", M + f"g{i}.md")], actor="t")
                    else:
                        store.apply(agent, [Delete(M + f"f{i}.md")], actor="t")
                        store.apply(agent, [Put(M + f"f{i}.md", b"again\n")], actor="t")
            except BaseException as exc:  # reported below
                errors.append(exc)

        writers = [threading.Thread(target=write, args=(a,)) for a in agents]
        for w in writers:
            w.start()
        for w in writers:
            w.join(timeout=300)
        assert not any(w.is_alive() for w in writers)
        assert not errors, errors
        # Entries a server died before indexing (an update with metadata, then a
        # delete, of one path; a new path): the next write adopts them, several
        # commits of one agent and one path in one write session.
        heads = {agent: store.get_agent(agent).revision for agent in agents}
        for agent in agents:
            row = store.get_agent(agent)
            old = store.read(agent, M + "a.md")
            data = b"orphan\n"
            sha = hashlib.sha256(data).hexdigest()
            updated = Change(
                M + "a.md",
                MODIFIED,
                old.version + 1,
                old.sha256,
                sha,
                len(data),
                content=data.decode(),
                metadata={"o": 1},
            )
            deleted = Change(M + "a.md", DELETED, old.version + 2, sha, None)
            made = Change(M + "o.md", CREATED, 1, None, sha, len(data), content=data.decode())
            for n, changes in enumerate(((updated, made), (deleted,)), start=1):
                entry = Commit(agent, row.revision + n, row.last_ts + n, "crashed", "", changes)
                assert backend.put_if_absent(
                    layout.log_key(agent, entry.revision), entry.to_bytes()
                )
        for agent in agents:
            store.apply(agent, [Put(M + "a.md", b"made again\n")], actor="t")
            assert store.get_agent(agent).revision == heads[agent] + 3
    finally:
        store.close()
    rebuilt = Store(tmp_path / "rebuilt", backend=backend)
    reindex(rebuilt)
    pg = Store(tmp_path / "again", backend=backend, index_location=url)
    try:
        for agent in agents:
            assert _agent_state(pg, agent) == _agent_state(rebuilt, agent), agent
    finally:
        pg.close()
        rebuilt.close()


def _agent_state(store: Store, agent: str) -> tuple[Any, ...]:
    with store.index.read_session() as r:
        listing, _more = r.list_memories(
            agent, "/memories", after=None, limit=1000, depth_one=False
        )
        memories = [m for m in listing if isinstance(m, MemoryRow)]
        return (
            r.agent_stats(agent),
            [
                (m.path, m.version, m.sha256, m.metadata, m.created_at, m.updated_at)
                for m in memories
            ],
            [
                (
                    m.path,
                    [(v.version, v.sha256, v.valid_to) for v in r.versions(agent, m.path, 0, 100)],
                )
                for m in memories
            ],
            [link[:4] for link in r.agent_links(agent)],  # not visible_from: a stamp
            [  # the metadata rows the filters read
                r.count_memories(agent, "/memories", depth_one=False, filters=[(k, v)])
                for k, v in (("o", "1"), ("n", "4"), ("n", "3"))
            ],
        )


def test_the_batch_statement_is_parsed_once_and_prepared(postgres_server: PostgresServer) -> None:
    """The rows' statement is a prepared statement of the connection after a few
    batches (its parameters' types never change, whatever rows a batch holds: psycopg
    prepares a statement on its fifth use), and psycopg keeps its parsed form (a
    statement over 4 KiB or 50 parameters is parsed afresh each time, which cost more
    than the statements it replaced)."""
    from psycopg import _queries

    assert len(WRITE) <= _queries.MAX_CACHED_STATEMENT_LENGTH
    assert WRITE.count("%(") <= _queries.MAX_CACHED_STATEMENT_PARAMS
    _url, index = _index(postgres_server)
    log = _Log("a")
    try:
        for n in range(8):  # with and without metadata, renames, deletes
            ops: list[tuple[Any, ...]] = [
                ("put", f"n{n}.md", f"note {n}", {"n": n} if n % 2 else {})
            ]
            if n % 3 == 2:
                ops.append(("move", f"n{n - 1}.md", f"moved{n}.md"))
            if n % 4 == 3:
                ops.append(("delete", f"n{n - 1}.md"))
            commit, contents = log.commit(ops)
            with index.write_session() as s:
                assert s.agent("a") is not None
                assert s.apply_commit(commit, commit.ts, contents, commit.to_bytes())
        with index.read_session() as r:
            prepared = r._all(
                "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE 'WITH a AS%%'"
            )
        assert prepared == [(1,)]
    finally:
        index.close()


def test_the_batch_statement_looks_rows_up_by_their_keys(postgres_server: PostgresServer) -> None:
    """The rows' statement finds the rows it updates and deletes (and those it counts
    out of the agents' totals) by their primary keys, not by a scan of the whole table:
    the planner takes each of its row sources for 100 rows, and a scan is what it
    chose for a table of some thousands (one per batch, growing with the table)."""
    url, index = _index(postgres_server)
    log = _Log("a")
    try:
        for n in range(3):
            commit, contents = log.commit([("put", f"n{n}.md", f"note {n}", {"n": n})])
            with index.write_session() as s:
                assert s.apply_commit(commit, commit.ts, contents, commit.to_bytes())
        with psycopg.connect(url) as conn:
            # A few thousand rows in each table a batch looks rows up in.
            for table, key in (
                ("memories", "path"),
                ("versions", "path"),
                ("memory_meta", "path"),
                ("search_docs", "path"),
            ):
                conn.execute(
                    f"INSERT INTO {table} SELECT (t).* FROM (SELECT"
                    f" jsonb_populate_record(t, jsonb_build_object('{key}', t.{key} || g))"
                    f" AS t FROM {table} t, generate_series(1, 3000) g) x"
                )
            conn.execute("ANALYZE")
            commit, contents = log.commit(
                [("put", "n1.md", "again", {"m": 1}), ("delete", "n2.md")]
            )
            conn.execute(KEYED_JOINS)
            batch = RowBatch()
            batch.add(commit, commit.ts, contents, {}, None)
            plan = "\n".join(
                str(row[0]) for row in conn.execute("EXPLAIN " + WRITE, batch.take()).fetchall()
            )
        for table in ("memories", "versions", "memory_meta", "search_docs"):
            assert f"Seq Scan on {table}" not in plan, plan
    finally:
        index.close()
