"""The working tree's side of a commit, off its critical path: staged on a helper
thread while the entry is made (``tree_commit.Stager``), and, switched on
(``Committer.tree_before_index``, off as shipped), renamed into place once the entry
is durable and before it is indexed; proved with real processes and real files.

- a real process is killed -9 between the tree file's rename and the index
  transaction (the test-only fault point ``MEMFS_TEST_FAULT=after-tree-before-index``):
  the tree then holds the update the log holds and the index lacks; ``memfs status``
  does not take it for a hand edit, and writing that path again (a real ``memfs
  serve``) leaves no ``.conflict-r`` file and the right content, in the tree and
  through the API, with fsck clean;
- an agent erased once its commit's tree file is in place keeps no tree file of it;
- a staging handed to the helper and not yet begun when the commit loses its race is
  cancelled: nothing of it is ever made;
- a staging that fails leaves the commit standing and its file written all the same.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from memfs.canonical import layout
from memfs.core import tree_commit
from memfs.core.commit import Committer
from memfs.core.store import Store
from memfs.errors import NotFound
from servers_real import RealServer, memfs_cli

WAIT = 120.0  # seconds; generous for a loaded machine, never reached when all is well
MARKDOWN = {"Content-Type": "text/markdown"}
RAW = {"Accept": "text/markdown"}
AGENT = "tb/notes"


def _url(agent: str, path: str = "") -> str:
    base = f"/v1/agents/{quote(agent, safe='')}"
    return f"{base}/memories/{path}" if path else base


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _tree_files(data: Path, agent: str) -> list[str]:
    root = layout.worktree_root(data, agent)
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# The child: a Store with the tree renamed before the index (``tree_before_index``, off
# as shipped), writing v1 then v2 of one path; the fault point parks v2 once its tree
# file is in place, before its index transaction.
_CHILD = """
import sys
from pathlib import Path
from memfs.core.store import Store
store = Store(Path(sys.argv[1]))
store.commits.tree_before_index = True
store.create_agent(sys.argv[2])
store.write(sys.argv[2], "/memories/plan.md", b"# plan\\nv1\\n", actor="t")
store.write(sys.argv[2], "/memories/plan.md", b"# plan\\nv2\\n", actor="t")
print("acknowledged", flush=True)  # never reached: parked, then killed
"""


def test_kill_between_the_tree_rename_and_the_index_is_no_hand_edit(tmp_path: Path) -> None:
    data, marker = tmp_path / "data", tmp_path / "parked"
    second, third = b"# plan\nv2\n", b"# plan\nv3\n"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
    env["MEMFS_TEST_FAULT"] = "after-tree-before-index:1"  # v1 goes through, v2 parks
    env["MEMFS_TEST_FAULT_FILE"] = str(marker)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(data), AGENT],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        _wait_for(lambda: marker.exists() or child.poll() is not None, "no fault point")
        assert marker.exists(), child.communicate()
        # Parked: its entry is durable and its tree file in place, its index row not.
        assert (layout.worktree_root(data, AGENT) / "plan.md").read_bytes() == second
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=WAIT)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(WAIT)
    assert b"acknowledged" not in out

    # Before any process catches the index up: the file is the log's head, no hand edit.
    shown = memfs_cli("status", AGENT, data=data, timeout=WAIT)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "plan.md" not in shown.stdout, shown.stdout

    server = RealServer(data).start()
    try:
        with server.client() as client:
            assert client.get(_url(AGENT, "plan.md"), headers=RAW).content == second
            put = client.put(_url(AGENT, "plan.md"), content=third, headers=MARKDOWN)
            assert put.status_code == 200, put.text
            assert client.get(_url(AGENT, "plan.md"), headers=RAW).content == third
            assert client.get(_url(AGENT)).json()["revision"] == 3
    finally:
        server.close()
    assert _tree_files(data, AGENT) == ["plan.md"]  # no plan.md.conflict-r… beside it
    assert (layout.worktree_root(data, AGENT) / "plan.md").read_bytes() == third
    checked = memfs_cli("fsck", data=data, timeout=WAIT)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_an_agent_erased_once_its_tree_file_is_placed_keeps_no_tree_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The erase runs after the commit's tree file is renamed into place and before its
    flush (no index lock is held there): the flush answers 404 and removes the file."""
    data = tmp_path / "data"
    store = Store(data)
    store.commits.tree_before_index = True
    try:
        store.create_agent(AGENT)
        real = Committer._place_tree
        placed: list[bool] = []

        def place_then_erase(self: Committer, tree: tree_commit.TreeCommit) -> None:
            real(self, tree)
            placed.append((layout.worktree_root(data, AGENT) / "docs/m.md").exists())
            store.erase_agent(AGENT)

        monkeypatch.setattr(Committer, "_place_tree", place_then_erase)
        with pytest.raises(NotFound):
            store.write(AGENT, "/memories/docs/m.md", b"# m\n", actor="t")
        monkeypatch.undo()
        assert placed == [True]
        assert not layout.worktree_root(data, AGENT).exists()  # no file, no folder left
        store.create_agent(AGENT)
        assert store.write(AGENT, "/memories/docs/m.md", b"# m2\n", actor="t").revision == 1
        assert _tree_files(data, AGENT) == ["docs/m.md"]
    finally:
        store.close()


def test_a_lost_commit_cancels_its_staging_not_yet_begun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper is held busy: the commit's staging is still queued when another
    writer takes its entry; nothing is staged for it, and its retry commits."""
    data = tmp_path / "data"
    store = Store(data)
    other = Store(data)  # another process's writer, as far as the first is concerned
    try:
        store.create_agent(AGENT)
        store.write(AGENT, "/memories/docs/a.md", b"# a\n", actor="t")
        hold = threading.Event()
        staged: list[tuple[int, list[str]]] = []
        real_stage = tree_commit.TreeCommit.stage

        def stage(self: tree_commit.TreeCommit) -> None:
            paths = [change.path for change in self.commit.changes]
            staged.append((self.commit.revision, paths))
            real_stage(self)

        monkeypatch.setattr(tree_commit.TreeCommit, "stage", stage)
        real_entry = store.commits._publish_entry
        raced: list[Any] = []

        def publish_entry(key: str, entry: bytes) -> bool:
            if not raced:  # the first attempt: another writer takes revision 2 first
                raced.append(other.write(AGENT, "/memories/docs/b.md", b"# b\n", actor="o"))
            return real_entry(key, entry)

        busy = store.commits._stager.submit(_Blocking(hold))  # type: ignore[arg-type]
        monkeypatch.setattr(store.commits, "_publish_entry", publish_entry)
        result = store.write(AGENT, "/memories/docs/c.md", b"# c\n", actor="t")
        hold.set()
        store.commits._stager.settle(busy, run=False)
        assert result.revision == 3
        # The lost attempt (c.md as revision 2) staged nothing; its retry staged on the
        # caller's thread (the helper was still busy), and its file is in place.
        assert [rev for rev, paths in staged if paths == ["/memories/docs/c.md"]] == [3]
        assert _tree_files(data, AGENT) == ["docs/a.md", "docs/b.md", "docs/c.md"]
    finally:
        other.close()
        store.close()


class _Blocking:
    """A stand-in job's tree commit that keeps the helper busy until ``hold`` is set."""

    def __init__(self, hold: threading.Event) -> None:
        self.hold = hold

    def stage(self) -> None:
        assert self.hold.wait(WAIT)


def test_a_staging_that_fails_still_leaves_the_file_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper's staging raises: the commit stands and its file is written from the
    contents, so the next update of that path is no hand edit either."""
    data = tmp_path / "data"
    store = Store(data)
    try:
        store.create_agent(AGENT)

        def failing(self: tree_commit.TreeCommit) -> None:
            raise RuntimeError("staging failed")

        monkeypatch.setattr(tree_commit.TreeCommit, "stage", failing)
        assert store.write(AGENT, "/memories/docs/m.md", b"# m1\n", actor="t").revision == 1
        assert store.write(AGENT, "/memories/docs/m.md", b"# m2\n", actor="t").revision == 2
        monkeypatch.undo()
        assert store.write(AGENT, "/memories/docs/m.md", b"# m3\n", actor="t").revision == 3
        assert _tree_files(data, AGENT) == ["docs/m.md"]
        assert (layout.worktree_root(data, AGENT) / "docs/m.md").read_bytes() == b"# m3\n"
    finally:
        store.close()
