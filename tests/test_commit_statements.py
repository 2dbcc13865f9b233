"""A commit's SQLite statements: the planning read is one statement (the agent's head,
its damage, the clock and every path's state, in autocommit: one snapshot), and the
write transaction writes its rows, the agent's row and the clock read inside the commits
row's INSERT (it goes ahead only on the row the commit was planned on).

Counted by a trace callback on every index connection (transaction control included),
so a statement added to the commit path fails here with the list of what ran."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from memfs.canonical.backend import LocalBackend
from memfs.core.store import Store

AGENT = "team/statements"
N = 10


def note(i: int, salt: str = "") -> bytes:
    return f"---\ndescription: note {i}{salt}\nkind: test\n---\nbody {i}{salt}\n".encode()


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    statements: list[str] = []
    real = sqlite3.connect

    def connect(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = real(*args, **kwargs)  # type: ignore[arg-type]
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    yield statements


def _run(tmp_path: Path, statements: list[str], *, updates: bool) -> list[str]:
    store = Store(tmp_path, backend=LocalBackend(tmp_path))
    # Held off: the full-text flush runs once no commit came for 50 ms, which a loaded
    # machine makes happen between two of these commits (its BEGIN, reads of
    # search_pending and COMMIT were counted as the commits'), and a checkpoint pass.
    store.index._idle._idle_s = 1e9  # type: ignore[attr-defined]
    store.index._idle._every = 1 << 60  # type: ignore[attr-defined]
    store.index._checkpoints._every = 1 << 60  # type: ignore[attr-defined]
    try:
        store.create_agent(AGENT)
        for i in range(3):  # the folders, the segment and the index exist from here on
            store.write(AGENT, f"/memories/docs/warm{i}.md", note(i), actor="test")
        if updates:
            for i in range(N):
                store.write(AGENT, f"/memories/docs/n{i}.md", note(i), actor="test")
        statements.clear()
        for i in range(N):
            salt = " v2" if updates else ""
            store.write(AGENT, f"/memories/docs/n{i}.md", note(i, salt), actor="test")
        # Only the commits' own statements (no checkpoint or full-text flush thread).
        ran = [s for s in statements if "search_fts" not in s and "wal_checkpoint" not in s]
        assert not [s for s in ran if "search_pending" in s and not s.startswith("INSERT")]
        assert store.read(AGENT, f"/memories/docs/n{N - 1}.md").content == note(N - 1, salt)
    finally:
        store.close()
    return ran


def test_a_create_runs_ten_statements(tmp_path: Path, traced: list[str]) -> None:
    ran = _run(tmp_path, traced, updates=False)
    # The planning read (no BEGIN/COMMIT around it); BEGIN IMMEDIATE, the commits row
    # (the agent's row and the clock read inside it), the versions, memories,
    # memory_meta, blobs and search_pending rows, the agent's counters, COMMIT.
    assert len(ran) == 10 * N, "\n".join(s[:100] for s in ran[:14])
    first = ran[:10]
    assert first[0].startswith("WITH p(path) AS (VALUES") and "agents a" in first[0]
    assert first[1] == "BEGIN IMMEDIATE" and first[-1] == "COMMIT"
    assert first[2].startswith("INSERT OR IGNORE INTO commits VALUES") and "FROM agents" in first[2]
    assert "BEGIN" not in ran  # no read transaction of its own


def test_an_update_runs_twelve_statements(tmp_path: Path, traced: list[str]) -> None:
    # As a create, and the old version closed and the old metadata rows removed.
    ran = _run(tmp_path, traced, updates=True)
    assert len(ran) == 12 * N, "\n".join(s[:100] for s in ran[:16])
    assert "BEGIN" not in ran
