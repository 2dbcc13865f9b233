"""The one create-if-absent-and-recheck loop (``memfs.core.cas.append_next``), raced.

Two real threads read the same state (a barrier holds both until each has decided on
it), both try to create object 1 on a real data folder (and on a real SeaweedFS bucket,
where If-None-Match: * decides): exactly one wins, and the
loser re-reads, decides again on the winner's state and creates object 2.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from engine_seaweedfs import SeaweedFS
from memfs.canonical.backend import Backend, LocalBackend
from memfs.core import cas
from memfs.errors import Conflict

PREFIX = "seq/"


@pytest.fixture(params=["local", "s3"])
def racing_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """A data folder, or a bucket of the real SeaweedFS (If-None-Match: * decides)."""
    if request.param == "s3":
        engine: SeaweedFS = request.getfixturevalue("seaweedfs")
        return engine.backend("cas")
    return LocalBackend(tmp_path)


def test_exactly_one_writer_wins_each_object_and_the_loser_decides_again(
    racing_backend: Backend,
) -> None:
    backend = racing_backend
    both_decided = threading.Barrier(2, timeout=60)
    seen: dict[str, list[int]] = {"a": [], "b": []}
    results: dict[str, int] = {}

    def writer(name: str) -> None:
        def decide(count: int) -> cas.Next[int]:
            seen[name].append(count)
            if len(seen[name]) == 1:
                both_decided.wait()  # both decide on the same state before either writes
            return cas.Next(f"{PREFIX}{count + 1:04d}", name.encode(), lambda: count + 1)

        results[name] = cas.append_next(
            lambda: len(list(backend.list(PREFIX))),
            decide,
            backend.put_if_absent,
            tries=5,
            conflict=lambda: Conflict("lost too often"),
        )

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(results.values()) == [1, 2]
    winner = next(n for n, r in results.items() if r == 1)
    loser = "b" if winner == "a" else "a"
    assert seen[winner] == [0]
    assert seen[loser] == [0, 1]  # re-read, and decided again on the winner's state
    assert backend.get(f"{PREFIX}0001") == winner.encode()
    assert backend.get(f"{PREFIX}0002") == loser.encode()


def test_a_decision_that_needs_no_write_writes_nothing(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    answer = cas.append_next(
        lambda: 0,
        lambda _state: cas.Done("nothing to do"),
        backend.put_if_absent,
        tries=1,
        conflict=lambda: Conflict("unused"),
    )
    assert answer == "nothing to do"
    assert list(backend.list(PREFIX)) == []


def test_a_writer_that_always_loses_gets_the_conflict_after_its_tries(tmp_path: Path) -> None:
    calls: list[int] = []

    def decide(state: int) -> cas.Next[int]:
        calls.append(state)
        return cas.Next("k", b"x", lambda: 1)

    try:
        cas.append_next(
            lambda: 0, decide, lambda _k, _d: False, tries=3, conflict=lambda: Conflict("retry")
        )
    except Conflict as exc:
        assert exc.message == "retry"
    else:
        raise AssertionError("no conflict")
    assert calls == [0, 0, 0]


def test_the_loop_counts_attempts_and_stops_at_the_first_answer() -> None:
    tried: list[int] = []

    def attempt(n: int) -> str | cas.Lost:
        tried.append(n)
        return cas.LOST if n < 2 else f"won at {n}"

    assert cas.retry_lost_races(attempt, tries=5, conflict=lambda: Conflict("busy")) == "won at 2"
    assert tried == [0, 1, 2]


def test_a_commit_and_an_append_go_through_the_same_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commits, run events and trigger records share one lost-race loop."""
    from memfs.core.store import Store

    looped: list[str] = []
    real = cas.retry_lost_races

    def spy(attempt: Any, *, tries: int, conflict: Any) -> Any:
        looped.append("loop")
        return real(attempt, tries=tries, conflict=conflict)

    monkeypatch.setattr(cas, "retry_lost_races", spy)
    store = Store(tmp_path / "data")
    try:
        store.create_agent("users/alice/assistant")
        store.write("users/alice/assistant", "/memories/a.md", b"a\n", actor="t")
        assert looped == ["loop"]
        backend = LocalBackend(tmp_path / "seq")
        cas.append_next(
            lambda: 0,
            lambda n: cas.Next(f"{PREFIX}{n + 1}", b"x", lambda: n + 1),
            backend.put_if_absent,
            tries=3,
            conflict=lambda: Conflict("busy"),
        )
        assert looped == ["loop", "loop"]
    finally:
        store.close()
