"""The SQLite index's visibility clock is derived from the newest commit's row (no meta
row rewritten per commit) and still never moves back: not when the agent holding the
newest commit is dropped (an erase), nor when the commit rows are cleared (a rebuild).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memfs.derived.index.connection import Index
from memfs.testing.index_fixtures import AGENT, _commit


def meta_clock(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT value FROM meta WHERE key='clock'").fetchone()[0])
    finally:
        conn.close()


def test_a_commit_moves_the_clock_without_writing_the_meta_row(tmp_path: Path) -> None:
    ix = Index(tmp_path / "index.sqlite")
    try:
        commit, contents = _commit(1, "/memories/a.md", b"# a\n", ts=1_000)
        with ix.write_session() as s:
            s.put_agent(AGENT, "Alice", "store-1", 5)
            s.apply_commit(commit, 7_000, contents, commit.to_bytes())
        with ix.read_session() as s:
            assert s.clock() == 7_000
            assert s.agent(AGENT) is not None and s.clock() == 7_000  # the head's, too
        assert meta_clock(ix.path) == 0
    finally:
        ix.close()


def test_dropping_the_agent_of_the_newest_commit_keeps_the_clock(tmp_path: Path) -> None:
    ix = Index(tmp_path / "index.sqlite")
    try:
        commit, contents = _commit(1, "/memories/a.md", b"# a\n", ts=1_000)
        with ix.write_session() as s:
            s.put_agent(AGENT, "Alice", "store-1", 5)
            s.apply_commit(commit, 9_000, contents, commit.to_bytes())
        with ix.write_session() as s:
            s.drop_agent(AGENT)
        with ix.read_session() as s:
            assert s.agent(AGENT) is None
            assert s.clock() == 9_000
        with ix.write_session() as s:
            s.put_agent(AGENT, "Alice", "store-2", 6)
            s.clear_tables(["commits"])
            assert s.clock() == 9_000
    finally:
        ix.close()
