"""The group commit's flush applies a commit with its agent's row checked inside the
commits row's INSERT (``SqliteWrite.apply_next_commit``), and falls back to reading the
row when that row is not the one the commit was planned on: each way a commit can miss
it still ends indexed, at the right visibility, read after its write."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memfs.core.store import Store
from memfs.derived.index import writes

AGENT = "team/fold"


def _visible_at(store: Store, revision: int) -> tuple[int, int]:
    conn = sqlite3.connect(store.index.path)
    try:
        ts, visible_at = conn.execute(
            "SELECT ts, visible_at FROM commits WHERE agent_id=? AND revision=?",
            (AGENT, revision),
        ).fetchone()
    finally:
        conn.close()
    return int(ts), int(visible_at)


def test_a_commit_the_clock_passed_meanwhile_is_visible_after_the_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An asOf pin (or any commit) moved the clock past the commit's timestamp while its
    # entry was made durable: it must become visible after every readTimestamp answered
    # so far, not at its own timestamp, under it.
    store = Store(tmp_path)
    store.create_agent(AGENT)
    store.write(AGENT, "/memories/a.md", b"# a\n", actor="t")
    committer = store.commits
    publish_entry = committer._publish_entry
    pinned: list[int] = []

    def pin_then_publish(key: str, entry: bytes) -> bool:
        with store.index.write_session() as ix:
            pinned.append(ix.clock() + 10_000_000)
            ix.raise_clock(pinned[0])
        return publish_entry(key, entry)

    monkeypatch.setattr(committer, "_publish_entry", pin_then_publish)
    result = store.write(AGENT, "/memories/b.md", b"# b\n", actor="t")
    assert result.revision == 2
    ts, visible_at = _visible_at(store, 2)
    assert ts < pinned[0] and visible_at == pinned[0] + 1
    assert store.read(AGENT, "/memories/b.md").content == b"# b\n"
    store.close()


def test_a_commit_after_one_the_index_missed_catches_it_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # r2's entry is durable but its index transaction failed (acknowledged all the
    # same: the log is the truth): the next commit, planned on the index's r1, loses
    # the race for entry 2, catches the index up from the log and commits r3.
    store = Store(tmp_path)
    store.create_agent(AGENT)
    store.write(AGENT, "/memories/a.md", b"# a\n", actor="t")
    real = writes.apply_next_commit
    calls: list[int] = []

    def fail_once(*args: object, **kwargs: object) -> int | None:
        calls.append(1)
        if len(calls) == 1:
            raise sqlite3.OperationalError("disk I/O error")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(writes, "apply_next_commit", fail_once)
    assert store.write(AGENT, "/memories/b.md", b"# b\n", actor="t").revision == 2
    monkeypatch.setattr(writes, "apply_next_commit", real)
    assert store.write(AGENT, "/memories/c.md", b"# c\n", actor="t").revision == 3
    for path, body in (("a", b"# a\n"), ("b", b"# b\n"), ("c", b"# c\n")):
        assert store.read(AGENT, f"/memories/{path}.md").content == body
    assert store.get_agent(AGENT).revision == 3
    store.close()


def test_a_commit_to_an_agent_made_again_meanwhile_is_not_indexed(tmp_path: Path) -> None:
    # Planned on one store id, flushed on another (the agent erased and created again):
    # the INSERT's check misses, the row read tells the flush it is gone.
    store = Store(tmp_path)
    store.create_agent(AGENT)
    store.write(AGENT, "/memories/a.md", b"# a\n", actor="t")
    with store.index.write_session() as ix:
        found = ix.apply_next_commit(  # type: ignore[attr-defined]
            _next(store), "another-store", {}, b""
        )
    assert found is None
    assert store.get_agent(AGENT).revision == 1
    store.close()


def _next(store: Store) -> object:
    from memfs.domain.commits import Commit

    return Commit(
        agent_id=AGENT, revision=2, ts=2**62, actor="t", message="", changes=(), agent_name=None
    )
