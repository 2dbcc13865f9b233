"""The working tree: an agent's current memories as plain files (derived state).

``agents/<dir>/memories/…`` mirrors the head of the log so people can ``ls``,
``cat`` and ``grep``. memfs rewrites a file only when it holds what memfs last put
there; a file edited by hand is moved aside to ``<name>.conflict-r<revision>`` rather
than overwritten, so no hand edit is ever lost (``memfs status`` lists it).

Every write, rename and delete reaches its folder from the data folder one component
at a time with ``O_NOFOLLOW`` (``derived.folders``: the folders stay open between
commits, each checked again by inode at every use): a symlink planted in the tree (or
as the agent's folder) is refused or replaced itself, never followed out of the data
folder. One lock per tree: the commit path, its group commit's flush and fsck may
use one tree from several threads.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from memfs.canonical import durable
from memfs.derived.folders import Folders
from memfs.domain.paths import ROOT, is_git_segment
from memfs.errors import SymlinkRefused

_LINK = "symlink"  # what sha256() answers for a symlink: never equal to a sha256
_FOLDER = "folder"  # what _open_file(folders=True) answers for a folder


class Staged(NamedTuple):
    """A temp file made by ``WorkTree.stage``: its folder (below ``memories``), its name."""

    folder: tuple[str, ...]
    name: str


class WorkTree:
    stages = True  # ``stage`` makes temp files (``NoTree``: nothing to hand a helper)

    def __init__(self, root: Path) -> None:
        self.root = root  # .../agents/<dir>/memories
        self._base = root.parent.parent.parent  # the data folder
        # agents, <dir>, memories (root.relative_to(base).parts, at a third of the cost)
        self._prefix = root.parts[-3:]
        self._folders = Folders(self._base)
        self._lock = threading.RLock()

    def recheck(self) -> None:
        """Check the kept folders again at their next use (``derived.folders``): each
        commit calls it before its symlink checks."""
        with self._lock:
            self._folders.expire()

    def close(self) -> None:
        """Close the folders kept open (the tree stays usable: it opens them again)."""
        with self._lock:
            self._folders.close()

    def file(self, path: str) -> Path:
        # One string for pathlib to parse (paths are checked: '/'-separated, no '.'/'..').
        return Path(f"{self.root}/{path[len(ROOT) + 1 :]}")

    @staticmethod
    def _parts(path: str) -> list[str]:
        return path[len(ROOT) + 1 :].split("/")

    def _folder(self, segments: list[str] | tuple[str, ...], *, create: bool = False) -> int:
        """A borrowed fd (kept open by ``_folders``: never closed here), lock held."""
        return self._folders.folder((*self._prefix, *segments), create=create)

    def check(self, path: str) -> None:
        """Refuse (SymlinkRefused) if a symlink stands anywhere on the way to ``path``."""
        parts = self._parts(path)
        with self._lock:
            try:
                folder = self._folder(parts[:-1])
            except (FileNotFoundError, NotADirectoryError):
                return  # nothing further to follow
            if _kind(folder, parts[-1]) == stat.S_IFLNK:
                raise durable.refuse_symlink("/".join([*self._prefix, *parts]))

    def check_root(self) -> None:
        """Refuse if the agent's folder or its ``memories`` folder is a symlink."""
        with self._lock, contextlib.suppress(FileNotFoundError, NotADirectoryError):
            self._folder(())

    def check_beside(self, name: str) -> None:
        """Refuse if ``name`` in the agent's folder (``.memfs``) is a symlink."""
        with self._lock:
            try:
                folder = self._folders.folder(self._prefix[:2])
            except (FileNotFoundError, NotADirectoryError):
                return
            if _kind(folder, name) == stat.S_IFLNK:
                raise durable.refuse_symlink("/".join([*self._prefix[:2], name]))

    def _open(self, path: str) -> _Opened | str | None:
        """The regular file at ``path`` opened, _LINK for a symlink, None otherwise."""
        parts = self._parts(path)
        with self._lock:
            try:
                folder = self._folder(parts[:-1])
            except (FileNotFoundError, NotADirectoryError, SymlinkRefused):
                return None
            return _open_file(folder, parts[-1])

    def read(self, path: str) -> bytes | None:
        """The bytes of the regular file at ``path``, never read through a symlink."""
        opened = self._open(path)
        if not isinstance(opened, tuple):
            return None
        return _read_all(opened)

    def sha256(self, path: str) -> str | None:
        """sha256 of the file now at ``path``; None if there is no regular file (a
        symlink there answers a marker that matches no sha256)."""
        return _sha256(self._open(path))

    def stage(self, path: str, data: bytes) -> Staged | None:
        """A temp file holding ``data`` beside the file of ``path``, for ``update`` to
        publish (or ``discard``). Making it (a new inode) is the slow part of an
        update, and nobody sees it until it is published; None if it can't be made."""
        parts = self._parts(path)
        with self._lock:
            try:
                folder = self._folder(parts[:-1], create=True)
            except (OSError, SymlinkRefused):
                return None  # update() writes the file itself, or reports why it can't
            try:
                name = durable.write_temp_at(folder, data, sync=False)
            except OSError:
                return None
        return Staged(tuple(parts[:-1]), name)

    def discard(self, staged: Staged) -> None:
        """Remove a staged temp file that will not be published."""
        with self._lock:
            with contextlib.suppress(OSError, SymlinkRefused):
                os.unlink(staged.name, dir_fd=self._folder(staged.folder))
            self._prune(list(staged.folder))

    def update(
        self,
        path: str,
        before: str | None,
        after: str | None,
        data: bytes | None,
        revision: int,
        staged: Staged | None = None,
    ) -> None:
        """Move the file at ``path`` from version ``before`` to ``after`` (None: absent),
        publishing ``staged`` (from ``stage``) if given, else writing ``data``."""
        parts = self._parts(path)
        with self._lock:
            try:
                if any(is_git_segment(s) for s in parts):
                    # An old history may hold one (memfs refuses them now): never put a
                    # .git folder where an operator's git would run what it holds.
                    return
                try:
                    folder = self._folder(parts[:-1], create=after is not None)
                except (FileNotFoundError, NotADirectoryError):
                    if after is None:
                        return  # nothing to delete
                    raise
                name = parts[-1]
                # One open tells a file, a folder and nothing apart (a create's usual
                # answer: nothing, with no second look).
                found = _open_file(folder, name, folders=True)
                is_folder = found == _FOLDER
                current = None if is_folder else _sha256(found)
                if current == after:
                    return  # already there (a replayed commit)
                if current is not None and current != before:
                    self._set_aside(folder, name, revision)
                if after is None:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(name, dir_fd=folder)
                    self._prune(parts[:-1])
                    return
                assert data is not None
                if is_folder:
                    self._set_aside(folder, name, revision)
                if staged is not None and staged.folder == tuple(parts[:-1]):
                    os.replace(staged.name, name, src_dir_fd=folder, dst_dir_fd=folder)
                    staged = None
                else:
                    tmp = durable.write_temp_at(folder, data, sync=False)
                    os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
            finally:
                if staged is not None:
                    self.discard(staged)

    def restore(self, path: str, data: bytes) -> None:
        """Set the file at ``path`` to ``data`` (fsck --repair), never through a symlink."""
        parts = self._parts(path)
        with self._lock:
            folder = self._folder(parts[:-1], create=True)
            tmp = durable.write_temp_at(folder, data, sync=False)
            os.replace(tmp, parts[-1], src_dir_fd=folder, dst_dir_fd=folder)

    def _set_aside(self, folder: int, name: str, revision: int) -> None:
        aside = f"{name}.conflict-r{revision}"
        n = 1
        while _kind(folder, aside) is not None:
            n += 1
            aside = f"{name}.conflict-r{revision}-{n}"
        # rename() moves a symlink itself, never what it points at.
        os.replace(name, aside, src_dir_fd=folder, dst_dir_fd=folder)

    def _prune(self, segments: list[str]) -> None:
        # Folders exist only while they hold files, as in the store itself.
        while segments:
            try:
                parent = self._folder(segments[:-1])
            except (OSError, SymlinkRefused):
                return
            try:
                os.rmdir(segments[-1], dir_fd=parent)
            except OSError:
                return
            self._folders.forget((*self._prefix, *segments))
            segments = segments[:-1]

    def symlinks(self) -> list[str]:
        """Every symlink in the tree, as a memory-style path (memfs follows none)."""
        found: list[str] = []
        if not self.root.is_dir() or self.root.is_symlink():
            return found
        for dirpath, dirnames, filenames in os.walk(self.root):
            rel = os.path.relpath(dirpath, self.root)
            parts = [] if rel == "." else rel.split(os.sep)
            for name in sorted(dirnames + filenames):
                if os.path.islink(os.path.join(dirpath, name)):
                    found.append("/".join([ROOT, *parts, name]))
        return sorted(found)

    def scan(self) -> Iterator[tuple[str, Path]]:
        """Every regular file in the tree as (memory path, file), temp files and
        symlinks skipped; refuses if the tree itself is reached through a symlink."""
        self.check_root()
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


def _kind(folder: int, name: str) -> int | None:
    """The file type (stat.S_IFMT) of ``name`` in ``folder``, None if nothing is there."""
    try:
        return stat.S_IFMT(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return None


# A regular file opened by ``_open_file``: its fd and its size when opened (the
# ``fstat`` that told it a regular file: reading it needs no second one).
_Opened = tuple[int, int]


def _open_file(folder: int, name: str, *, folders: bool = False) -> _Opened | str | None:
    """The regular file ``name`` in ``folder`` opened, _LINK for a symlink, else None
    (with ``folders``, _FOLDER for a folder)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    except OSError as exc:
        return _LINK if exc.errno == errno.ELOOP else None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return _FOLDER if folders and stat.S_ISDIR(st.st_mode) else None
    return fd, st.st_size


def _sha256(opened: _Opened | str | None) -> str | None:
    """sha256 of the file ``opened`` (closed), or ``opened`` itself if it is no file."""
    if not isinstance(opened, tuple):
        return opened
    return hashlib.sha256(_read_all(opened)).hexdigest()


def _read_all(opened: _Opened) -> bytes:
    """The bytes of the regular file ``opened``, which is closed. Plain reads: a
    buffered file object costs two more ``fstat``s, an ``ioctl`` and two ``lseek``s
    (each update probes the file it replaces)."""
    fd, size = opened
    try:
        chunks = [os.read(fd, size + 1)]
        while len(chunks[-1]) > size:  # it grew meanwhile: read on to its end
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size = 0
        return b"".join(chunks) if len(chunks) > 1 else chunks[0]
    finally:
        os.close(fd)


class NoTree(WorkTree):
    """The working tree switched off (objects on S3: several servers share them, and
    a tree on one server's disk would lag the others' commits). Writes do nothing;
    the tree reads as empty."""

    stages = False

    def check(self, path: str) -> None:
        return None

    def check_root(self) -> None:
        return None

    def recheck(self) -> None:
        return None

    def check_beside(self, name: str) -> None:
        # No tree, but the agent's folder (its .memfs) is still on this disk.
        durable.check_no_symlink(self._base, [*self._prefix[:2], name])

    def read(self, path: str) -> bytes | None:
        return None

    def sha256(self, path: str) -> str | None:
        return None

    def stage(self, path: str, data: bytes) -> Staged | None:
        return None

    def discard(self, staged: Staged) -> None:
        return None

    def update(
        self,
        path: str,
        before: str | None,
        after: str | None,
        data: bytes | None,
        revision: int,
        staged: Staged | None = None,
    ) -> None:
        return None

    def restore(self, path: str, data: bytes) -> None:
        return None

    def symlinks(self) -> list[str]:
        return []

    def scan(self) -> Iterator[tuple[str, Path]]:
        return iter(())
