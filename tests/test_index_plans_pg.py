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
