"""The working tree's folders kept open between commits (derived/folders.py).

A commit reaches its tree folder through fds kept from the last commit, each checked
again by inode: a folder replaced by a symlink (or by another folder, or removed)
after memfs kept it open is never written through, and files land in the folder now
at the path, not the old one. The number of fds kept stays bounded however many
folders and agents are written, and closing the store closes them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from memfs.canonical import layout
from memfs.core.commit import TREES_KEPT
from memfs.core.store import Store
from memfs.derived.folders import LIMIT
from memfs.errors import SymlinkRefused

AGENT = "team/folders"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "data")
    opened.create_agent(AGENT)
    yield opened
    opened.close()


def tree(store: Store, agent: str = AGENT) -> Path:
    return layout.worktree_root(store.data_dir, agent)


def open_folders() -> int:
    """Folders this process holds open outside any log (the log's segment writer keeps
    its own folder open: not the tree's)."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own fd, closed by now
            fd = f"/proc/self/fd/{name}"
            if stat.S_ISDIR(os.stat(fd).st_mode) and "/.memfs" not in os.readlink(fd):
                count += 1
    return count


def test_a_kept_folder_replaced_by_a_symlink_is_refused(store: Store, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    store.write(AGENT, "/memories/docs/a.md", b"a\n", actor="t")
    docs = tree(store) / "docs"
    shutil.move(str(docs), str(tmp_path / "moved-docs"))
    docs.symlink_to(outside)
    for path in ("/memories/docs/b.md", "/memories/docs/a.md"):
        with pytest.raises(SymlinkRefused):
            store.write(AGENT, path, b"pwned\n", actor="t")
    assert list(outside.iterdir()) == []
    assert sorted(p.name for p in (tmp_path / "moved-docs").iterdir()) == ["a.md"]
    # The agent's own folder a symlink, after the commit that kept it open.
    docs.unlink()
    agent_folder = layout.agent_folder(store.data_dir, AGENT)
    shutil.move(str(agent_folder), str(tmp_path / "moved-agent"))
    agent_folder.symlink_to(tmp_path / "moved-agent")
    with pytest.raises(SymlinkRefused):
        store.write(AGENT, "/memories/c.md", b"c\n", actor="t")


def test_files_land_in_the_folder_now_at_the_path(store: Store, tmp_path: Path) -> None:
    store.write(AGENT, "/memories/docs/a.md", b"a\n", actor="t")
    docs = tree(store) / "docs"
    shutil.move(str(docs), str(tmp_path / "old-docs"))
    docs.mkdir()  # another folder at the same path (a new inode)
    store.write(AGENT, "/memories/docs/b.md", b"b\n", actor="t")
    assert (docs / "b.md").read_bytes() == b"b\n"
    assert not (tmp_path / "old-docs" / "b.md").exists()
    # The whole tree removed by hand: the next commit makes it again.
    shutil.rmtree(tree(store))
    store.write(AGENT, "/memories/docs/c.md", b"c\n", actor="t")
    assert (docs / "c.md").read_bytes() == b"c\n"
    # A folder emptied by a delete goes, and a write makes it again.
    store.delete(AGENT, "/memories/docs/b.md", actor="t")
    store.delete(AGENT, "/memories/docs/c.md", actor="t")
    assert not docs.exists()
    store.write(AGENT, "/memories/docs/d.md", b"d\n", actor="t")
    assert (docs / "d.md").read_bytes() == b"d\n"


def test_kept_fds_stay_bounded_and_close_with_the_store(tmp_path: Path) -> None:
    before = open_folders()
    store = Store(tmp_path / "data")
    agents = [f"team/a{n}" for n in range(TREES_KEPT + 4)]
    for agent in agents:
        store.create_agent(agent)
        for folder in range(LIMIT + 4):
            store.write(agent, f"/memories/f{folder}/deep/x.md", b"x\n", actor="t")
    # Every file is in its tree, and the fds kept are at most the bounds (each tree
    # also keeps the data folder, the agents folder and its own two folders).
    for agent in agents:
        for folder in range(LIMIT + 4):
            assert (tree(store, agent) / f"f{folder}" / "deep" / "x.md").read_bytes() == b"x\n"
    assert open_folders() - before <= TREES_KEPT * (LIMIT + 1) + 16
    store.close()
    assert open_folders() - before == 0
