"""Open folders below a data folder, kept open between commits (the working tree's).

Walking from the data folder one component at a time with ``O_NOFOLLOW``
(``durable.open_folder``) costs an ``open`` and a ``close`` per component on every
call: three or four walks per commit were most of a commit's system calls. Here each
folder is opened once, with ``O_NOFOLLOW`` relative to its parent's fd, and kept with
its inode. After ``expire`` (each commit calls it once, before its symlink checks) the
next use checks each component again with one ``fstatat`` relative to its parent's
kept fd (no symlink followed) and compares its inode: a folder replaced by anything
else (another folder, a symlink, nothing) is dropped and walked afresh, so a symlink
planted between two commits is refused as before. Until the next ``expire`` a checked
folder is trusted: a folder replaced within that window (a commit's few milliseconds)
is at worst written into where it was, never followed anywhere. A kept fd holds its
inode, so no new folder can reuse its number while it is kept.

Not thread-safe by itself: its owner (``WorkTree``) holds a lock around every use,
and the fds it hands out are borrowed (never closed by the caller) until then.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from memfs.canonical import durable

# Folders kept open per owner: enough for an agent's usual folders, few enough that
# many agents' trees stay far below the process's fd limit (see core/commit.py).
LIMIT = 16

_Kept = tuple[int, int, int]  # (fd, st_dev, st_ino)


class Folders:
    def __init__(self, base: Path, limit: int = LIMIT) -> None:
        self.base = base
        self.limit = limit
        self._root: _Kept | None = None
        self._kept: dict[tuple[str, ...], _Kept] = {}
        self._checked: set[tuple[str, ...]] = set()  # since the last expire()
        # Whole walks checked since the last expire(): a commit asks for its file's
        # folder three or four times (symlink check, stage, publish), walked once.
        self._ready: dict[tuple[str, ...], int] = {}
        self._root_checked = False

    def expire(self) -> None:
        """Check every kept folder again at its next use."""
        self._checked.clear()
        self._ready.clear()
        self._root_checked = False

    def folder(self, parts: Sequence[str], *, create: bool = False) -> int:
        """A borrowed fd of ``base/parts…``, reached without following a symlink below
        ``base`` (missing folders made with ``create``). Raises SymlinkRefused, or
        FileNotFoundError / NotADirectoryError when it is not there."""
        whole = tuple(parts)
        ready = self._ready.get(whole)
        if ready is not None:
            return ready
        fd = self._root_fd(create)
        kept = self._kept
        for i in range(len(parts)):
            key = tuple(parts[: i + 1])
            name = parts[i]
            known = kept.get(key)
            if known is not None and key in self._checked:
                fd = known[0]
                continue
            if known is not None:
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    st = None
                if (
                    st is not None
                    and st.st_ino == known[2]
                    and st.st_dev == known[1]
                    and stat.S_ISDIR(st.st_mode)
                ):
                    self._checked.add(key)
                    fd = known[0]
                    continue
                self.forget(key)
            child = durable.open_child(fd, name, key, create=create)
            st = os.fstat(child)
            if len(kept) >= self.limit:
                self._evict(key)
            kept[key] = (child, st.st_dev, st.st_ino)
            self._checked.add(key)
            fd = child
        self._ready[whole] = fd
        return fd

    def forget(self, parts: Sequence[str]) -> None:
        """Close the kept fd of ``parts`` (its folder was removed or replaced)."""
        key = tuple(parts)
        # The folders below it were reached through it: checked again, by their inode.
        n = len(key)
        self._checked = {k for k in self._checked if k[:n] != key}
        self._ready.clear()
        known = self._kept.pop(key, None)
        if known is not None:
            os.close(known[0])

    def close(self) -> None:
        """Close every kept fd (the object stays usable: it opens them again)."""
        kept, self._kept = self._kept, {}
        self._checked.clear()
        self._ready.clear()
        for fd, _dev, _ino in kept.values():
            os.close(fd)
        root, self._root = self._root, None
        self._root_checked = False
        if root is not None:
            os.close(root[0])

    def __del__(self) -> None:
        # At interpreter shutdown, or after a failed __init__: nothing more to do.
        with contextlib.suppress(OSError, AttributeError):
            self.close()

    def _root_fd(self, create: bool) -> int:
        # The data folder itself may be a symlink (an operator's choice): it is stat'ed
        # by path, following it, and reopened if another folder now stands there.
        root = self._root
        if root is not None and self._root_checked:
            return root[0]
        try:
            st = os.stat(self.base)
        except FileNotFoundError:
            if not create:
                raise
            st = None
        if root is not None and st is not None and (st.st_dev, st.st_ino) == root[1:]:
            self._root_checked = True
            return root[0]
        self.close()  # every kept folder was below the old one
        fd = durable.open_root(self.base, create=create)
        st = os.fstat(fd)
        self._root = (fd, st.st_dev, st.st_ino)
        self._root_checked = True
        return fd

    def _evict(self, keep: tuple[str, ...]) -> None:
        # Full: close every kept folder but the ones on the way to ``keep`` (their fds
        # are in use by the walk that is making room).
        for key in [k for k in self._kept if keep[: len(k)] != k]:
            self.forget(key)
