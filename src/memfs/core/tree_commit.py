"""The working tree's side of a commit: staged while the commit is decided, published
once it stands (inside the group commit's index transaction, ``core/commit.py``),
discarded if it does not.

The tree is derived: a file that can't be published is logged and left to
``fsck --repair``; the commit stands.
"""

from __future__ import annotations

import contextlib
import logging
from types import TracebackType

from memfs.derived.worktree import Staged, WorkTree
from memfs.domain.commits import Commit
from memfs.errors import SymlinkRefused

# The store's own messages: they keep the logger name operators configured.
log = logging.getLogger("memfs.store")


def publish(
    tree: WorkTree, commit: Commit, contents: dict[str, bytes], staged: dict[str, Staged] | None
) -> None:
    """Bring the tree to ``commit`` (``staged``: temp files made for it beforehand)."""
    for change in commit.changes:
        try:
            data = contents.get(change.after) if change.after else None
            tmp = staged.get(change.path) if staged else None
            tree.update(change.path, change.before, change.after, data, commit.revision, tmp)
        except (OSError, SymlinkRefused) as exc:
            log.warning(
                "working tree of %s not updated at %s: %s", commit.agent_id, change.path, exc
            )


class TreeCommit:
    """``with TreeCommit(...) as t: …; t.stage()``: on success the staged files are
    published, on any error they are discarded (nothing of a lost commit stays)."""

    def __init__(self, tree: WorkTree, commit: Commit, contents: dict[str, bytes]) -> None:
        self.tree, self.commit, self.contents = tree, commit, contents
        self.staged: dict[str, Staged] = {}

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

    def publish(self) -> None:
        """Bring the tree to the commit (the staged files are used up: publishing again,
        after a failed index transaction, writes from the contents)."""
        staged, self.staged = self.staged, {}
        publish(self.tree, self.commit, self.contents, staged)

    def discard(self) -> None:
        """Remove the staged files (the commit lost, failed, or was published by a
        catch-up); a second call does nothing."""
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
