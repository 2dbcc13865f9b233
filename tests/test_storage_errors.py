"""A full or failing disk answers 503 (retryable) and recovers by itself; a commit
whose log entry is durable is acknowledged even when the index could not take it."""

from __future__ import annotations

import contextlib
import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from http_fixtures import Api, memory_url, open_api
from memfs.derived import index

MARKDOWN = {"Content-Type": "text/markdown"}


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str = "4m") -> Iterator[Path]:
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.fail(
            "this test needs to mount a small tmpfs (it runs as root in CI, as "
            f"scripts/test does); 'mount -t tmpfs' failed: {mounted.stderr.strip()}. "
            "Run the suite as root, or in a container with CAP_SYS_ADMIN."
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with open_api(tmp_path) as opened:
        yield opened


def fill(folder: Path) -> Path:
    """A file that takes every free byte of the file system ``folder`` is on."""
    filler = folder / "filler"
    with filler.open("wb") as out:
        chunk = b"\0" * 65536
        with contextlib.suppress(OSError):
            while True:
                out.write(chunk)
                out.flush()
    with contextlib.suppress(OSError), filler.open("ab") as out:
        while True:  # the last few bytes, one at a time
            out.write(b"\0")
            out.flush()
    return filler


def test_a_full_disk_answers_503_retryable_and_writes_resume_when_space_is_freed(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "mnt") as mnt, open_api(mnt) as api:
        api.create_agent()
        api.must_write("/memories/before.md", "written before the disk filled")
        filler = fill(mnt)
        refused = [
            api.put(memory_url(f"/memories/full-{i}.md"), content=b"x" * 20_000, headers=MARKDOWN)
            for i in range(3)
        ]
        for response in refused:
            assert response.status_code == 503, response.text
            body = response.json()
            assert body["code"] == "unavailable" and body["details"]["retryable"] is True
            assert "storage" in body["message"] and "ENOSPC" in body["message"]
        # Reads go on meanwhile.
        got = api.get(memory_url("/memories/before.md"))
        assert got.status_code == 200
        filler.unlink()
        again = api.put(memory_url("/memories/full-0.md"), content=b"x" * 20_000, headers=MARKDOWN)
        assert again.status_code == 201, again.text
        assert api.get(memory_url("/memories/full-0.md")).json()["bytes"] == 20_000


def test_a_durable_commit_is_acknowledged_when_the_index_fails(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.create_agent()
    real = index.SqliteWrite.apply_commit
    real_next = index.SqliteWrite.apply_next_commit
    failed: list[int] = []

    def disk_full(*args: Any, **kwargs: Any) -> bool:
        failed.append(1)
        raise OSError(errno.ENOSPC, "No space left on device")

    # The store applies commits through its write session (a commit planned on the
    # agent's row as it stands, through apply_next_commit): fail it there.
    monkeypatch.setattr(index.SqliteWrite, "apply_commit", disk_full)
    monkeypatch.setattr(index.SqliteWrite, "apply_next_commit", disk_full)
    first = api.put(memory_url("/memories/a.md"), content=b"committed", headers=MARKDOWN)
    assert failed, "the index's apply_commit was never called: the fault missed"
    assert first.status_code == 201, first.text  # the log entry is the commit
    monkeypatch.setattr(index.SqliteWrite, "apply_commit", real)
    monkeypatch.setattr(index.SqliteWrite, "apply_next_commit", real_next)
    second = api.put(memory_url("/memories/b.md"), content=b"next", headers=MARKDOWN)
    assert second.status_code == 201
    # The index caught up with the log on that write: nothing was lost.
    got = api.get(memory_url("/memories/a.md"))
    assert got.status_code == 200 and got.json()["content"] == "committed"
    assert [v["revision"] for v in api.versions("/memories/a.md")] == [1]
    assert [v["revision"] for v in api.versions("/memories/b.md")] == [2]
