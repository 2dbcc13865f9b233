"""durable.Spares: temp files made ahead of need, and what a write does when one is
gone, foreign or left behind by a dead process."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memfs import durable
from memfs.durable import SPARE_PREFIX, Spares


@pytest.fixture
def spares(tmp_path: Path) -> Iterator[Spares]:
    pool = Spares(tmp_path / "spares", 4)
    _wait_ready(pool, 4)
    yield pool
    pool.close()


def _ready(pool: Spares) -> list[Path]:
    return sorted(p for p in pool.folder.iterdir() if p.name.startswith(SPARE_PREFIX))


def _wait_ready(pool: Spares, count: int) -> None:
    deadline = time.monotonic() + 30
    while len(_ready(pool)) < count:
        assert time.monotonic() < deadline, "the background thread made no spares"
        time.sleep(0.01)


def test_a_write_publishes_a_spare_inode_and_more_are_made(
    spares: Spares, tmp_path: Path
) -> None:
    inodes = {p.stat().st_ino for p in _ready(spares)}
    target = tmp_path / "log" / "1.json"
    assert durable.create_new(target, b"entry", spares=spares)
    assert target.read_bytes() == b"entry"
    assert target.stat().st_ino in inodes  # the kernel allocated nothing on this path
    assert target.stat().st_nlink == 1  # the spare's own name is gone
    tree = tmp_path / "tree" / "a.md"
    durable.replace(tree, b"old", durable=False, spares=spares)
    durable.replace(tree, b"new", durable=False, spares=spares)
    assert tree.read_bytes() == b"new"
    _wait_ready(spares, 4)  # the pool refills itself


def test_create_if_absent_holds_with_spares(spares: Spares, tmp_path: Path) -> None:
    target = tmp_path / "one"
    assert durable.create_new(target, b"first", spares=spares)
    _wait_ready(spares, 4)
    before = {p.name for p in _ready(spares)}
    assert not durable.create_new(target, b"second", spares=spares)
    assert target.read_bytes() == b"first"
    # The losing write's spare is removed, not leaked (new ones may be made meanwhile).
    assert len(before - {p.name for p in _ready(spares)}) == 1
    assert not [p for p in tmp_path.iterdir() if durable.is_temp_name(p.name)]


def test_a_spare_removed_under_the_writer_falls_back_to_a_fresh_temp_file(
    spares: Spares, tmp_path: Path
) -> None:
    for spare in _ready(spares):  # e.g. an fsck of another process removed them
        spare.unlink()
    target = tmp_path / "log" / "2.json"
    assert durable.create_new(target, b"entry", spares=spares)
    assert target.read_bytes() == b"entry"
    tree = tmp_path / "tree.md"
    for spare in _ready(spares):
        spare.unlink()
    durable.replace(tree, b"text", durable=False, spares=spares)
    assert tree.read_bytes() == b"text"


def test_a_spare_on_another_filesystem_falls_back(
    spares: Spares, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_link = os.link

    def cross_device(src: str | Path, dst: str | Path) -> None:
        if Path(src).name.startswith(SPARE_PREFIX):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real_link(src, dst)

    monkeypatch.setattr(os, "link", cross_device)
    target = tmp_path / "elsewhere" / "3.json"
    assert durable.create_new(target, b"entry", spares=spares)
    assert target.read_bytes() == b"entry"
    assert target.stat().st_nlink == 1


def test_close_removes_the_spares(tmp_path: Path) -> None:
    pool = Spares(tmp_path / "spares", 3)
    _wait_ready(pool, 3)
    pool.close()
    assert _ready(pool) == []
    assert pool.take() is None  # a closed pool hands out nothing; writers make their own


def test_fsck_keeps_a_live_process_spares_and_reports_a_dead_one(tmp_path: Path) -> None:
    live = Spares(tmp_path / "spares", 2)
    try:
        _wait_ready(live, 2)
        # A spare of a process that has exited (killed before it could clean up).
        child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                               capture_output=True, text=True, check=True)
        dead = tmp_path / "spares" / f"{SPARE_PREFIX}{int(child.stdout)}-0123456789abcdef"
        dead.touch()
        old = time.time() - 3600
        for path in [*_ready(live), dead]:
            os.utime(path, (old, old))
        stale = durable.stale_temp_files(tmp_path, older_than_s=600)
        assert stale == [dead]
    finally:
        live.close()
