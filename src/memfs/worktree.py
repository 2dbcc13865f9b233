"""The working tree: an agent's current memories as plain files (derived state).

``agents/<dir>/memories/…`` mirrors the head of the log so people can ``ls``,
``cat`` and ``grep``. memfs rewrites a file only when it holds what memfs last put
there; a file edited by hand is moved aside to ``<name>.conflict-r<revision>`` rather
than overwritten, so no hand edit is ever lost (``memfs status`` lists it).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

from memfs import durable
from memfs.paths import ROOT


class WorkTree:
    def __init__(self, root: Path) -> None:
        self.root = root  # .../agents/<dir>/memories

    def file(self, path: str) -> Path:
        # One string for pathlib to parse (paths are checked: '/'-separated, no '.'/'..').
        return Path(f"{self.root}/{path[len(ROOT) + 1 :]}")

    def sha256(self, path: str) -> str | None:
        """sha256 of the file now at ``path``; None if there is no regular file."""
        try:
            return hashlib.sha256(self.file(path).read_bytes()).hexdigest()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def stage(self, path: str, data: bytes) -> Path | None:
        """A temp file holding ``data`` beside the file of ``path``, for ``update`` to
        publish (or ``discard``). Making it (a new inode) is the slow part of an
        update, and nobody sees it until it is published; None if it can't be made."""
        folder = self.file(path).parent
        try:
            durable.ensure_dir(folder)
            return durable.write_temp(folder, data)
        except OSError:
            return None  # update() writes the file itself, or reports why it can't

    def discard(self, staged: Path) -> None:
        """Remove a staged temp file that will not be published."""
        staged.unlink(missing_ok=True)
        self._prune(staged.parent)

    def update(
        self,
        path: str,
        before: str | None,
        after: str | None,
        data: bytes | None,
        revision: int,
        staged: Path | None = None,
    ) -> None:
        """Move the file at ``path`` from version ``before`` to ``after`` (None: absent),
        publishing ``staged`` (from ``stage``) if given, else writing ``data``."""
        try:
            current = self.sha256(path)
            if current == after:
                return  # already there (a replayed commit)
            target = self.file(path)
            if current is not None and current != before:
                self._set_aside(target, revision)
            if after is None:
                target.unlink(missing_ok=True)
                self._prune(target.parent)
                return
            assert data is not None
            if target.is_dir():
                self._set_aside(target, revision)
            if staged is not None:
                os.replace(staged, target)
                staged = None
            else:
                durable.replace(target, data, durable=False)
        finally:
            if staged is not None:
                self.discard(staged)

    def _set_aside(self, target: Path, revision: int) -> None:
        aside = target.with_name(f"{target.name}.conflict-r{revision}")
        n = 1
        while aside.exists():
            n += 1
            aside = target.with_name(f"{target.name}.conflict-r{revision}-{n}")
        os.replace(target, aside)

    def _prune(self, folder: Path) -> None:
        # Folders exist only while they hold files, as in the store itself.
        while folder != self.root and folder.is_relative_to(self.root):
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent

    def scan(self) -> Iterator[tuple[str, Path]]:
        """Every regular file in the tree as (memory path, file), temp files skipped."""
        if not self.root.is_dir():
            return
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames.sort()
            rel = os.path.relpath(dirpath, self.root)
            for name in sorted(filenames):
                if durable.is_temp_name(name):
                    continue
                full = Path(dirpath) / name
                if full.is_symlink() or not full.is_file():
                    continue
                parts = [] if rel == "." else rel.split(os.sep)
                yield "/".join([ROOT, *parts, name]), full
