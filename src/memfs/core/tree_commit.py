"""The working tree's side of a commit: staged while the commit's log entry is made
(on a helper thread, ``Stager``), published once it stands (inside the group commit's
index transaction, ``core/commit.py``; before it with ``Committer.tree_before_index``),
discarded if it does not.

The tree is derived: a file that can't be published is logged and left to
``fsck --repair``; the commit stands.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections import deque
from types import TracebackType

from memfs.derived.worktree import Staged, WorkTree
from memfs.domain.commits import Commit
from memfs.errors import SymlinkRefused

# The store's own messages: they keep the logger name operators configured.
log = logging.getLogger("memfs.store")

# A staging job's states (``_Job.state``).
_QUEUED, _RUNNING, _DONE = 0, 1, 2


def publish(
    tree: WorkTree,
    commit: Commit,
    contents: dict[str, bytes],
    staged: dict[str, Staged] | None,
    *,
    skip: frozenset[str] = frozenset(),
) -> None:
    """Bring the tree to ``commit`` (``staged``: temp files made for it beforehand),
    but for the paths in ``skip``."""
    for change in commit.changes:
        if change.path in skip:
            continue
        try:
            data = contents.get(change.after) if change.after else None
            tmp = staged.get(change.path) if staged else None
            tree.update(change.path, change.before, change.after, data, commit.revision, tmp)
        except (OSError, SymlinkRefused) as exc:
            log.warning(
                "working tree of %s not updated at %s: %s", commit.agent_id, change.path, exc
            )


class _Job:
    """One commit's staging handed to the ``Stager``; ``finished`` is held until done."""

    __slots__ = ("error", "finished", "state", "tree")

    def __init__(self, tree: TreeCommit) -> None:
        self.tree = tree
        self.state = _QUEUED
        self.finished = threading.Lock()
        self.finished.acquire()
        self.error: BaseException | None = None


class Stager:
    """One helper thread that stages commits' tree files while their callers make the
    log entries durable: a single writer's wall time is then the longer of the two (the
    temp file's inode and the entry's ``fdatasync`` both run in the kernel with the GIL
    released), not their sum.

    A job the helper has not begun when its commit needs it (``settle``) is taken back
    and run, or cancelled, by the caller itself: 16 writers' stagings never queue
    behind one thread, at worst each caller stages its own as before."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._jobs: deque[_Job] = deque()
        self._bell: threading.Lock | None = None  # held: the helper sleeps on it
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._forks = _forks[0]

    def submit(self, tree: TreeCommit) -> _Job:
        job = _Job(tree)
        if self._forks != _forks[0]:
            # A forked child: the helper thread is not here, and the mutex may have been
            # held by a thread that is not here either.
            self._mutex, self._jobs, self._bell = threading.Lock(), deque(), None
            self._thread, self._forks = None, _forks[0]
        with self._mutex:
            if self._thread is None:  # none yet, or stopped
                self._stopping = False
                self._thread = threading.Thread(
                    target=self._run, name="memfs-tree-stager", daemon=True
                )
                self._thread.start()
            self._jobs.append(job)
            bell, self._bell = self._bell, None
        if bell is not None:
            bell.release()
        return job

    def settle(self, job: _Job, *, run: bool) -> None:
        """Return once ``job`` is done: taken back and run on this thread if the helper
        has not begun it (``run=False``: cancelled instead, nothing was staged)."""
        with self._mutex:
            mine = job.state == _QUEUED
            if mine:
                job.state = _DONE  # the helper skips it
        if mine:
            if run:
                job.tree.stage()
            return
        with job.finished:  # released by the helper once the job is done
            pass
        if job.error is not None:
            raise job.error

    def stop(self) -> None:
        """End the helper thread once its jobs are done (the Store closes); a later
        ``submit`` starts another."""
        with self._mutex:
            thread, self._thread = self._thread, None
            if thread is None:
                return
            self._stopping = True
            bell, self._bell = self._bell, None
        if bell is not None:
            bell.release()
        if thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            with self._mutex:
                job = self._jobs.popleft() if self._jobs else None
                if job is None:
                    if self._stopping:
                        return
                    bell = self._bell = threading.Lock()
                    bell.acquire()
                elif job.state != _QUEUED:
                    continue  # taken back by its caller
                else:
                    job.state = _RUNNING
            if job is None:
                bell.acquire()  # until a job (or stop) rings it
                continue
            try:
                job.tree.stage()
            except BaseException as exc:  # the caller raises it (settle)
                job.error = exc
            job.state = _DONE
            job.finished.release()


# Bumped in a forked child: a Stager's thread is not there (see ``Stager.submit``).
_forks = [0]


def _forked() -> None:
    _forks[0] += 1


os.register_at_fork(after_in_child=_forked)


class TreeCommit:
    """``with TreeCommit(...) as t: …; t.stage()``: on success the staged files are
    published, on any error they are discarded (nothing of a lost commit stays)."""

    def __init__(self, tree: WorkTree, commit: Commit, contents: dict[str, bytes]) -> None:
        self.tree, self.commit, self.contents = tree, commit, contents
        self.staged: dict[str, Staged] = {}
        self._stager: Stager | None = None
        self._job: _Job | None = None
        self.published = False

    def stage(self) -> None:
        """Temp files holding the tree files the commit writes, made while it is decided."""
        staged: dict[str, Staged] = {}
        for change in self.commit.changes:
            data = self.contents.get(change.after) if change.after else None
            if data is not None:
                tmp = self.tree.stage(change.path, data)
                if tmp is not None:
                    staged[change.path] = tmp
        self.staged = staged

    def stage_beside(self, stager: Stager) -> None:
        """``stage`` on ``stager``'s helper thread while this one goes on (``settle``
        waits for it); nothing to hand over when the commit writes no file."""
        if self.tree.stages and any(change.after for change in self.commit.changes):
            self._stager, self._job = stager, stager.submit(self)

    def settle(self) -> None:
        """Return once the staging handed over (``stage_beside``) is done."""
        self._settle(run=True)

    def _settle(self, *, run: bool) -> None:
        stager, job = self._stager, self._job
        if stager is not None and job is not None:
            self._stager = self._job = None
            stager.settle(job, run=run)

    def publish(self) -> None:
        """Bring the tree to the commit, once: a second call does nothing (the commit's
        caller publishes it before its flush, which then finds it done)."""
        if self.published:
            return
        try:
            self._settle(run=True)
        except Exception as exc:  # the files are written from the contents instead
            log.warning("working tree of %s not staged: %s", self.commit.agent_id, exc)
        staged, self.staged = self.staged, {}
        publish(self.tree, self.commit, self.contents, staged)
        # Only now: a publish that raised is done again by the flush, from the contents.
        self.published = True

    def placed(self) -> frozenset[str]:
        """The paths this commit's tree files were published at (none before then)."""
        if not self.published:
            return frozenset()
        return frozenset(change.path for change in self.commit.changes)

    def withdraw(self) -> None:
        """Remove the files ``publish`` placed, where they still hold this commit's
        version (the agent was erased while the commit was made: nothing of it stays)."""
        if not self.published:
            return
        for change in self.commit.changes:
            if change.after is None or self.tree.sha256(change.path) != change.after:
                continue
            try:
                self.tree.update(change.path, change.after, None, None, self.commit.revision)
            except (OSError, SymlinkRefused) as exc:
                log.warning("working tree of %s: %s left: %s", self.commit.agent_id, change.path, exc)

    def discard(self) -> None:
        """Remove the staged files (the commit lost, failed, or was published by a
        catch-up); a second call does nothing. A staging not begun is cancelled."""
        with contextlib.suppress(Exception):
            self._settle(run=False)
        staged, self.staged = self.staged, {}
        for tmp in staged.values():
            with contextlib.suppress(OSError):
                self.tree.discard(tmp)

    def __enter__(self) -> TreeCommit:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.publish()
        else:
            self.discard()
