"""A commit leaves its full-text rows to a flush (derived/index/search.py): it writes one
pending row, no FTS5 row; every search (in any process) flushes first, as do erasing an
agent and the background flush once commits pause. The planning read is one statement.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memfs.core.search import search
from memfs.core.store import Store
from memfs.core.tokens import Signer
from memfs.derived.index import Index

AGENT = "team/a"


def _pending(data: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(data / "index.sqlite")
    try:
        return [(str(a), str(p)) for a, p in conn.execute("SELECT * FROM search_pending")]
    finally:
        conn.close()


def _fts_rows(data: Path) -> int:
    conn = sqlite3.connect(data / "index.sqlite")
    try:
        return int(conn.execute("SELECT COUNT(*) FROM search_fts").fetchone()[0])
    finally:
        conn.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "data")
    s.index._idle.close()  # type: ignore[attr-defined]  # no background flush: rows stay pending
    s.create_agent(AGENT, None)
    yield s
    s.close()


def _found(store: Store, query: str) -> list[str]:
    return [h.path for h in search(store, Signer(b"k" * 32), agent_id=AGENT, query=query).results]


def test_a_commit_writes_a_pending_row_and_no_full_text_row(store: Store) -> None:
    statements: list[str] = []
    with store.index.read() as conn:  # type: ignore[attr-defined]
        conn.set_trace_callback(statements.append)
    store.write(AGENT, "/memories/ferry.md", b"The ferry leaves at nine.\n", actor="t")
    with store.index.read() as conn:  # type: ignore[attr-defined]
        conn.set_trace_callback(None)
    assert not [s for s in statements if "search_fts" in s or "search_docs" in s]
    assert _pending(store.data_dir) == [(AGENT, "/memories/ferry.md")]
    assert _fts_rows(store.data_dir) == 0
    # The planning read: the agent, its damage and the clock in one statement.
    assert not [
        s for s in statements if s.startswith(("SELECT file, reason", "SELECT value FROM meta"))
    ]
    assert _found(store, "ferry") == ["/memories/ferry.md"]  # the search flushed first
    assert _pending(store.data_dir) == []
    assert _fts_rows(store.data_dir) == 1


def test_a_search_in_another_process_finds_a_commit_still_pending(store: Store) -> None:
    store.write(AGENT, "/memories/ferry.md", b"The ferry leaves at nine.\n", actor="t")
    store.write(AGENT, "/memories/bus.md", b"The bus leaves at ten.\n", actor="t")
    store.write(AGENT, "/memories/bus.md", b"The tram leaves at ten.\n", actor="t")
    assert len(_pending(store.data_dir)) == 2
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "memfs.cli",
            "--data",
            str(store.data_dir),
            "search",
            AGENT,
            "leaves",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    paths = sorted(hit["path"] for hit in json.loads(done.stdout)["results"])
    assert paths == ["/memories/bus.md", "/memories/ferry.md"]
    assert _pending(store.data_dir) == []
    assert _found(store, "tram") == ["/memories/bus.md"]
    assert _found(store, "bus") == ["/memories/bus.md"]  # the path is indexed too


def test_deletes_renames_and_updates_are_flushed_as_the_live_memories_stand(store: Store) -> None:
    store.write(AGENT, "/memories/a.md", b"alpha words\n", actor="t")
    store.write(AGENT, "/memories/b.md", b"beta words\n", actor="t")
    assert sorted(_found(store, "words")) == ["/memories/a.md", "/memories/b.md"]
    store.write(AGENT, "/memories/a.md", b"gamma words\n", actor="t")
    store.delete(AGENT, "/memories/b.md", actor="t")
    store.rename(AGENT, "/memories/a.md", "/memories/c.md", actor="t")
    assert len(_pending(store.data_dir)) == 3
    assert _found(store, "words") == ["/memories/c.md"]
    assert _found(store, "alpha") == [] and _found(store, "beta") == []
    assert _found(store, "gamma") == ["/memories/c.md"]
    assert _fts_rows(store.data_dir) == 1


def test_the_background_flush_empties_the_pending_rows_once_commits_pause(tmp_path: Path) -> None:
    s = Store(tmp_path / "data")
    try:
        s.create_agent(AGENT, None)
        for i in range(5):
            s.write(AGENT, f"/memories/n{i}.md", f"note {i}\n".encode(), actor="t")
        deadline = time.monotonic() + 60
        while _pending(s.data_dir) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _pending(s.data_dir) == []
        assert _fts_rows(s.data_dir) == 5  # made without a search
    finally:
        s.close()


def test_an_erase_leaves_no_word_of_a_deleted_memory_whose_row_was_pending(store: Store) -> None:
    word = "zqpendingword"
    store.write(AGENT, "/memories/secret.md", f"{word} here\n".encode(), actor="t")
    assert _found(store, word) == ["/memories/secret.md"]  # its words in an FTS5 segment
    store.delete(AGENT, "/memories/secret.md", actor="t")  # pending: the row is still there
    assert _pending(store.data_dir) == [(AGENT, "/memories/secret.md")]
    store.erase_agent(AGENT)
    files = [p for p in store.data_dir.glob("index.sqlite*") if p.is_file()]
    assert files and [p.name for p in files if word.encode() in p.read_bytes()] == []
    assert _pending(store.data_dir) == [] and _fts_rows(store.data_dir) == 0


def test_a_flush_is_shared_by_the_whole_index_file(tmp_path: Path) -> None:
    """Two Stores on one data folder (as two processes): either one's search flushes the
    other's pending rows, and the second finds nothing left to do."""
    one = Store(tmp_path / "data")
    one.index._idle.close()  # type: ignore[attr-defined]
    one.create_agent(AGENT, None)
    two = Store(tmp_path / "data")
    two.index._idle.close()  # type: ignore[attr-defined]
    try:
        one.write(AGENT, "/memories/x.md", b"xylophone\n", actor="t")
        assert [
            h.path
            for h in search(two, Signer(b"k" * 32), agent_id=AGENT, query="xylophone").results
        ] == ["/memories/x.md"]
        assert _found(one, "xylophone") == ["/memories/x.md"]
        assert _fts_rows(one.data_dir) == 1
    finally:
        two.close()
        one.close()


def test_a_session_reads_damage_and_the_clock_again_once_it_wrote(tmp_path: Path) -> None:
    """``agent`` keeps the damage and clock it read alongside, until the session writes."""
    idx = Index(tmp_path / "index.sqlite")
    try:
        with idx.write_session() as s:
            s.put_agent("a", "A", "store-1", 1)
            assert s.agent("a") is not None and s.damage("a") is None
            start = s.clock()
            s.raise_clock(start + 100)
            assert s.clock() == start + 100
            s.mark_damaged("a", "log/1", "bad")
            assert s.damage("a") == ("log/1", "bad")
            assert s.agent("b") is None and s.damage("b") is None
        with idx.read_session() as r:
            assert r.agent("a") is not None
            assert (r.damage("a"), r.clock()) == (("log/1", "bad"), start + 100)
    finally:
        idx.close()
