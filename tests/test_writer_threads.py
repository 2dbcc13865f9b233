"""The server's writer threads (``http/context.py`` ``Writers``): commits of different
agents run at once, up to ``WRITERS``; a commit's error reaches its request; a
shutdown lets the commits already handed over finish and refuses new ones."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memfs.errors import Conflict
from memfs.http.context import WRITERS, Writers

WAIT_S = 60.0  # generous: the machine is shared


def test_as_many_commits_as_writer_threads_run_at_once() -> None:
    # Each call waits until all WRITERS are running: only WRITERS threads at once
    # let every one of them through (fewer would leave the barrier broken).
    barrier = threading.Barrier(WRITERS, timeout=WAIT_S)
    writers = Writers()

    def commit() -> str:
        barrier.wait()
        return threading.current_thread().name

    async def main() -> list[str]:
        return await asyncio.gather(*(writers.run(commit) for _ in range(WRITERS)))

    try:
        names = asyncio.run(main())
    finally:
        writers.shutdown(wait=True)
    assert len(set(names)) == WRITERS
    assert all(name.startswith("memfs-writer") for name in names)


def test_a_commits_error_is_raised_to_its_caller_and_the_next_commit_runs() -> None:
    writers = Writers(2)

    def refused() -> None:
        raise Conflict("taken")

    async def main() -> int:
        with pytest.raises(Conflict, match="taken"):
            await writers.run(refused)
        return await writers.run(lambda: 7)

    try:
        assert asyncio.run(main()) == 7
    finally:
        writers.shutdown(wait=True)


def test_shutdown_finishes_what_was_handed_over_then_refuses() -> None:
    writers = Writers(1)
    started, release = threading.Event(), threading.Event()
    done: list[int] = []

    def slow() -> int:
        started.set()
        assert release.wait(WAIT_S)
        done.append(1)
        return 1

    async def main() -> None:
        call = asyncio.ensure_future(writers.run(slow))
        await asyncio.to_thread(started.wait, WAIT_S)
        stopper = threading.Thread(target=writers.shutdown)
        stopper.start()
        release.set()
        assert await call == 1
        await asyncio.to_thread(stopper.join, WAIT_S)
        assert not stopper.is_alive()
        with pytest.raises(RuntimeError, match="shut down"):
            await writers.run(lambda: 2)

    asyncio.run(main())
    assert done == [1]
