"""What a commit's planning reads in PostgreSQL does not grow with the agent.

The planner's path lookup (``path_states``) joined each asked path to the agent's
memories; on a table without statistics yet (a new database, an import, an agent that
grew fast) PostgreSQL planned that join as a scan of the agent's every memory,
filtered by path, so each commit read the whole agent. It is now a lookup by the whole
primary key. Counted by PostgreSQL itself (``pg_stat_xact_user_tables``: rows fetched
in this transaction), not timed.
"""

from __future__ import annotations

from pathlib import Path

from memfs.canonical.backend import MemoryBackend
from memfs.core.store import Store

AGENT = "plans/a"
SIZE = 200


def _fetched(conn: object) -> int:
    row = conn.execute(  # type: ignore[attr-defined]
        "SELECT COALESCE(SUM(idx_tup_fetch + seq_tup_read), 0) FROM pg_stat_xact_user_tables"
        " WHERE relname='memories'"
    ).fetchone()
    return int(row[0])


def test_a_commits_path_lookup_reads_a_few_rows_however_big_the_agent(
    postgres_url: str,
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "data", backend=MemoryBackend(), index_location=postgres_url)
    try:
        store.create_agent(AGENT)
        for i in range(SIZE):  # one memory a commit, as agents write
            store.write(AGENT, f"/memories/f/{i:05d}.md", b"# m %d\n" % i, actor="test")
        with store.index.read_session() as ix:
            assert ix.agent(AGENT) is not None
            before = _fetched(ix.conn)  # type: ignore[attr-defined]
            states = ix.path_states(AGENT, ["/memories/f/00100.md", "/memories/new.md"])
            read = _fetched(ix.conn) - before  # type: ignore[attr-defined]
        assert states["/memories/f/00100.md"].memory is not None
        assert states["/memories/new.md"].memory is None
        assert read <= 10, f"{read} memory rows read to plan a commit of 2 paths at {SIZE}"
    finally:
        store.close()


def _planning_plans(conn: object) -> tuple[int, int]:
    """(generic, custom) plans of this connection's prepared planning reads."""
    row = conn.execute(  # type: ignore[attr-defined]
        "SELECT COALESCE(SUM(generic_plans), 0), COALESCE(SUM(custom_plans), 0)"
        " FROM pg_prepared_statements WHERE statement LIKE '%SELECT MAX(version) FROM versions%'"
    ).fetchone()
    return int(row[0]), int(row[1])


def test_a_commits_planning_read_is_planned_once_then_reused(
    postgres_url: str,
    tmp_path: Path,
) -> None:
    """The planning read of a one-path commit (every PUT: the agent's head and the
    path's state in one statement) is prepared, and PostgreSQL
    keeps its generic plan instead of planning it afresh on every commit (125 us of
    PostgreSQL's CPU per commit with the array parameter, whose generic plan never won);
    the generic plan still looks each path up by key, however big the agent."""
    store = Store(tmp_path / "data", backend=MemoryBackend(), index_location=postgres_url)
    try:
        store.create_agent(AGENT)
        for i in range(SIZE):
            store.write(AGENT, f"/memories/f/{i:05d}.md", b"# m %d\n" % i, actor="test")
        with store.index.read_session() as ix:
            conn = ix.conn  # type: ignore[attr-defined]
            for i in range(20):  # psycopg prepares at the 6th run, PostgreSQL's choice after 5 more
                ix.plan_head(AGENT, [f"/memories/f/{i:05d}.md"])
            generic, custom = _planning_plans(conn)
            before = _fetched(conn)
            head = ix.plan_head(AGENT, ["/memories/f/00100.md"])
            read = _fetched(conn) - before
        assert head.agent is not None and head.agent.revision == SIZE
        assert head.states["/memories/f/00100.md"].memory is not None
        assert generic >= 5, (
            f"planning read planned afresh each time: {generic} generic, {custom} custom"
        )
        assert read <= 5, f"{read} memory rows read by the generic plan at {SIZE}"
    finally:
        store.close()


def test_path_states_answer_alike_for_any_number_of_paths(
    postgres_url: str,
    tmp_path: Path,
) -> None:
    """One path per parameter up to eight, an array beyond: the same states either way
    (live, deleted with its last version, new, and a path that is a folder)."""
    store = Store(tmp_path / "data", backend=MemoryBackend(), index_location=postgres_url)
    try:
        store.create_agent(AGENT)
        for i in range(6):
            store.write(AGENT, f"/memories/p/{i}.md", b"# m %d\n" % i, actor="test")
        store.write(AGENT, "/memories/dir/inner.md", b"# inner\n", actor="test")
        store.delete(AGENT, "/memories/p/3.md", actor="test")
        paths = [f"/memories/p/{i}.md" for i in range(8)] + ["/memories/dir", "/memories/new.md"]
        with store.index.read_session() as ix:
            together = ix.path_states(AGENT, paths)  # ten: the array form
            alone = {p: ix.path_states(AGENT, [p])[p] for p in paths}
            by_eight = ix.path_states(AGENT, paths[:8]) | ix.path_states(AGENT, paths[8:])
            planned = ix.plan_head(AGENT, paths[:8]).states | ix.plan_head(AGENT, paths[8:]).states
            planned_all = ix.plan_head(AGENT, paths).states
        assert together == alone == by_eight == planned == planned_all
        assert together["/memories/p/3.md"].memory is None
        assert together["/memories/p/3.md"].last_version == 2
        assert together["/memories/p/0.md"].memory is not None
        assert together["/memories/dir"].is_folder
        assert together["/memories/new.md"].last_version == 0
    finally:
        store.close()
