"""Commits planned a batch at a time: one thread plans every commit waiting, in one read
session, then each caller makes its own log entry durable. One caller's failure is its
own: of a batch planned together,

- the commit whose log ``fdatasync`` fails (the fault points' failing sync, on one
  agent's log only) raises the disk's EIO (over HTTP a retryable 503), is not in the
  log, the index or the working tree, and the agent's next commit is its revision 1;
- a commit to an agent that does not exist is answered 404;
- every other commit is acknowledged durable, indexed (read-after-write) and in the tree;
- a batch whose read session fails (the index's disk, for a moment) fails none of its
  commits: each caller plans its own alone, in a session of its own.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memfs.canonical import layout
from memfs.core import fault_points
from memfs.core.store import Store, WriteResult
from memfs.domain.paths import agent_dir_name
from memfs.errors import NotFound

WAIT = 120.0  # seconds; generous for a loaded machine, never reached when all is well
PATH = "/memories/m.md"


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _in_one_batch(
    store: Store, monkeypatch: pytest.MonkeyPatch, callers: list[str], fail_session: bool = False
) -> tuple[list[int], dict[str, WriteResult | BaseException]]:
    """Each of ``callers`` writes PATH at once. The first caller's batch is held until
    every other caller is queued: those are then planned together, in one batch (whose
    read session fails, with ``fail_session``). The batches' sizes, and the answers."""
    committer = store.commits
    plan_batch = committer._plan_batch
    plan_alone = committer._plan_alone
    read_session = store.index.read_session
    sizes: list[int] = []
    failing: list[int] = []  # the thread whose next read session fails

    def session() -> object:
        if failing and failing[0] == threading.get_ident():
            failing.clear()
            raise sqlite3.OperationalError("disk I/O error")
        return read_session()

    def first(req: object) -> None:
        # The first caller found nobody planning: it plans alone, on its thread (the
        # fast path), and is held there until every other caller is queued.
        if not sizes:
            sizes.append(1)
            _wait_for(
                lambda: committer.planning.waiting() == len(callers) - 1,
                "the other commits did not queue to be planned",
            )
        plan_alone(req)  # type: ignore[arg-type]

    def held(batch: list[object]) -> None:
        sizes.append(len(batch))
        if len(sizes) == 2 and fail_session:
            failing.append(threading.get_ident())
        plan_batch(batch)  # type: ignore[arg-type]

    monkeypatch.setattr(committer, "_plan_alone", first)
    monkeypatch.setattr(committer, "_plan_batch", held)
    monkeypatch.setattr(store.index, "read_session", session)
    answers: dict[str, WriteResult | BaseException] = {}

    def write(agent: str) -> None:
        try:
            answers[agent] = store.write(agent, PATH, f"# {agent}\n".encode(), actor="t")
        except BaseException as exc:
            answers[agent] = exc

    threads = [threading.Thread(target=write, args=(agent,)) for agent in callers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    return sizes, answers


def test_a_batch_acknowledges_each_durable_commit_and_none_whose_fsync_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    store = Store(data)
    good = [f"gc/g{i}" for i in range(3)]
    for agent in [*good, "gc/bad"]:
        store.create_agent(agent)
    callers = [*good, "gc/bad", "gc/missing"]
    real_sync = os.fdatasync
    bad_log = f"/agents/{agent_dir_name('gc/bad')}/.memfs/log"
    monkeypatch.setattr(os, "fdatasync", fault_points._failing(real_sync, bad_log))

    sizes, answers = _in_one_batch(store, monkeypatch, callers)
    assert sizes == [1, len(callers) - 1]

    for agent in good:
        answer = answers[agent]
        assert isinstance(answer, WriteResult) and answer.revision == 1, answer
        body = f"# {agent}\n".encode()
        assert store.read(agent, PATH).content == body  # read-after-write
        assert (layout.worktree_root(data, agent) / "m.md").read_bytes() == body
        assert store.backend.exists(layout.log_key(agent, 1))
    assert isinstance(answers["gc/missing"], NotFound), answers["gc/missing"]
    failed = answers["gc/bad"]
    assert isinstance(failed, OSError) and failed.errno == errno.EIO, failed
    with pytest.raises(NotFound):
        store.read("gc/bad", PATH)
    assert not store.backend.exists(layout.log_key("gc/bad", 1))
    tree = layout.worktree_root(data, "gc/bad")
    assert not tree.exists() or [p.name for p in tree.rglob("*")] == []

    monkeypatch.setattr(os, "fdatasync", real_sync)  # the disk is fine again
    again = store.write("gc/bad", PATH, b"# again\n", actor="t")
    assert again.revision == 1
    assert store.read("gc/bad", PATH).content == b"# again\n"
    store.close()


def test_a_batch_whose_read_session_fails_plans_each_commit_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "data")
    callers = [f"gc/s{i}" for i in range(4)]
    for agent in callers:
        store.create_agent(agent)
    sizes, answers = _in_one_batch(store, monkeypatch, callers, fail_session=True)
    assert sizes == [1, len(callers) - 1]
    for agent in callers:  # the batch's session failed: each caller planned alone, and won
        answer = answers[agent]
        assert isinstance(answer, WriteResult) and answer.revision == 1, answer
        assert store.read(agent, PATH).content == f"# {agent}\n".encode()
    store.close()


def test_a_lone_writer_plans_its_commits_itself_with_no_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nobody else planning: each commit is planned on its caller's thread without the
    # queue's hand-off (the batch machinery cost a single writer about 2 % of a commit).
    store = Store(tmp_path / "data")
    store.create_agent("gc/lone")
    committer = store.commits
    batches: list[int] = []
    plan_batch = committer._plan_batch

    def counted(batch: list[object]) -> None:
        batches.append(len(batch))
        plan_batch(batch)  # type: ignore[arg-type]

    monkeypatch.setattr(committer, "_plan_batch", counted)
    for i in range(5):
        result = store.write("gc/lone", f"/memories/n{i}.md", b"# n\n", actor="t")
        assert result.revision == i + 1
    assert batches == []
    assert committer.planning.waiting() == 0 and committer.planning.flushes == 5
    assert store.read("gc/lone", "/memories/n4.md").content == b"# n\n"
    store.close()
