"""The one helper through which every durable file of memfs is written.

A file is written to a unique temp name beside its final name, fsynced, then
published atomically and the directory fsynced. Canonical (immutable) files are
published with ``os.link`` so that publishing fails if the name exists
(create-if-absent); derived files are published with ``os.replace``. A crash at any
instant leaves either nothing or the whole file under the final name, plus at most a
stray temp file that ``is_temp_name`` recognises and ``fsck`` removes.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import secrets
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path

# The reserved prefix is a path rule (domain); durable names its temp files with it.
from memfs.domain.paths import TEMP_PREFIX as TEMP_PREFIX
from memfs.errors import SymlinkRefused

# Everything under the data folder is the server user's alone: memories, secrets
# (trigger records hold whsec_ secrets in plain) and the index alike.
FILE_MODE = 0o600
DIR_MODE = 0o700
UMASK = 0o077


def private_folder(path: Path) -> None:
    """Make ``path`` (the data folder) a folder only its owner can enter, and make every
    file this process creates from now on private (umask), SQLite's files included."""
    os.umask(UMASK)
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    if path.stat().st_mode & 0o077:
        os.chmod(path, DIR_MODE)


def is_temp_name(name: str) -> bool:
    """True for the name of a temp file this module may have left behind."""
    return name.startswith(TEMP_PREFIX)


def stale_temp_files(root: Path, *, older_than_s: float) -> list[Path]:
    """Temp files under ``root`` untouched for ``older_than_s`` seconds: left by a crash.

    Younger ones may belong to a writer that is still running, so they are left alone.
    """
    cutoff = time.time() - older_than_s
    found: list[Path] = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            if is_temp_name(name):
                path = Path(dirpath) / name
                with contextlib.suppress(FileNotFoundError):
                    if path.lstat().st_mtime < cutoff:
                        found.append(path)
    return sorted(found)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path: Path) -> None:
    """Create ``path`` and missing parents, making each new entry durable."""
    if path.is_dir():
        return
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=DIR_MODE)  # a racing process may make it first; as good
        fsync_dir(folder.parent)


# Temp names: this process's id and a counter, not random bytes (a getrandom call per
# file, on every commit's tree file). Unique among live processes, and O_EXCL refuses
# a name a dead process with the same id left behind: then a random one is taken.
_counter = itertools.count()
_pid = os.getpid()


def _after_fork() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_after_fork)


def pid() -> int:
    """This process's id, kept current by the fork hook above: hot paths that must
    start afresh in a forked child (segment locks, the index's background flush)
    compare it without a getpid system call each time."""
    return _pid


def _temp_name(fresh: bool) -> str:
    if fresh:
        return f"{TEMP_PREFIX}{_pid:x}-{next(_counter):x}"
    return f"{TEMP_PREFIX}{secrets.token_hex(8)}"


def _create_temp(open_name: Callable[[str], int]) -> tuple[str, int]:
    """(name, fd) of a new temp file made by ``open_name`` (O_CREAT | O_EXCL)."""
    try:
        name = _temp_name(True)
        return name, open_name(name)
    except FileExistsError:
        name = _temp_name(False)  # a leftover of a dead process with our id
        return name, open_name(name)


def _write_all(fd: int, data: bytes, *, sync: bool) -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may write fewer), then fsync
    it with ``sync``."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    if sync:
        os.fsync(fd)


def write_temp(folder: Path, data: bytes, *, sync: bool = False, mode: int = FILE_MODE) -> Path:
    """A new temp file in ``folder`` holding ``data`` (fsynced with ``sync``), for the
    caller to publish under its final name or unlink."""
    name, fd = _create_temp(
        lambda name: os.open(f"{folder}/{name}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    )
    tmp = Path(f"{folder}/{name}")
    try:
        _write_all(fd, data, sync=sync)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def create_new(path: Path, data: bytes, *, mode: int = FILE_MODE) -> bool:
    """Durably create ``path`` with ``data`` unless it exists; True if this call made it."""
    ensure_dir(path.parent)
    tmp = write_temp(path.parent, data, sync=True, mode=mode)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
    return True


def replace(path: Path, data: bytes, *, durable: bool = True, mode: int | None = None) -> None:
    """Atomically set the content of a derived file (readers see old or new, never part)."""
    ensure_dir(path.parent)
    # Made with ``mode`` from the start: a secret is never readable by others, even briefly.
    tmp = write_temp(path.parent, data, sync=durable, mode=0o644 if mode is None else mode)
    try:
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


# ---- below a root, never through a symlink -------------------------------------------
# The working tree and the object store are walked one component at a time from the
# data folder, each opened relative to its parent's fd with O_NOFOLLOW: a symlink
# planted anywhere below the data folder can't send a write, rename or delete outside.

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def refuse_symlink(where: str) -> SymlinkRefused:
    return SymlinkRefused(
        f"{where} is a symlink; memfs never follows symlinks in its data folder: "
        "replace it with a real file or folder (memfs fsck lists them)",
        field="path",
    )


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def open_child(parent: int, name: str, where: Sequence[str], *, create: bool = False) -> int:
    """An fd of the folder ``name`` in the folder ``parent`` (made with ``create``),
    never through a symlink; ``where`` (its parts below the root) names it in a
    refusal. Raises SymlinkRefused, or FileNotFoundError / NotADirectoryError."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        if not create:
            raise
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, DIR_MODE, dir_fd=parent)
            os.fsync(parent)
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(name, parent):
            raise refuse_symlink("/".join(where)) from None
        raise


def open_root(root: Path, *, create: bool = False) -> int:
    """An fd of ``root`` itself (the data folder may be reached through a symlink)."""
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        if not create:
            raise
        ensure_dir(root)
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def open_folder(root: Path, parts: Sequence[str], *, create: bool = False) -> int:
    """An fd of the folder ``root/parts…`` reached without following a symlink below
    ``root`` (missing folders made with ``create``); raises SymlinkRefused, or
    FileNotFoundError / NotADirectoryError when it is not there."""
    fd = open_root(root, create=create)
    try:
        for i, name in enumerate(parts):
            child = open_child(fd, name, parts[: i + 1], create=create)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_no_symlink(root: Path, parts: Sequence[str]) -> None:
    """Refuse if any existing component of ``root/parts…`` is a symlink (read-only)."""
    probe = str(root)
    for i, name in enumerate(parts):
        probe = f"{probe}/{name}"
        try:
            mode = os.lstat(probe).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return
        if stat.S_ISLNK(mode):
            raise refuse_symlink("/".join(parts[: i + 1]))
        if not stat.S_ISDIR(mode):
            return


def write_temp_at(dir_fd: int, data: bytes, *, sync: bool) -> str:
    """A new temp file in the folder ``dir_fd`` holding ``data``; its name."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    name, fd = _create_temp(lambda name: os.open(name, flags, FILE_MODE, dir_fd=dir_fd))
    try:
        _write_all(fd, data, sync=sync)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=dir_fd)
        raise
    os.close(fd)
    return name


def create_new_at(root: Path, parts: Sequence[str], data: bytes) -> bool:
    """``create_new`` of ``root/parts…`` without following a symlink below ``root``."""
    fd = open_folder(root, parts[:-1], create=True)
    try:
        tmp = write_temp_at(fd, data, sync=True)
        try:
            os.link(tmp, parts[-1], src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
        except FileExistsError:
            return False
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
        os.fsync(fd)
        return True
    finally:
        os.close(fd)


def delete_at(root: Path, parts: Sequence[str]) -> bool:
    """Remove the file ``root/parts…`` (a symlink there is removed itself, never
    followed); True if something was removed."""
    try:
        fd = open_folder(root, parts[:-1])
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        try:
            os.unlink(parts[-1], dir_fd=fd)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError):
            return False
        os.fsync(fd)
        return True
    finally:
        os.close(fd)


def link_new_at(root: Path, parts: Sequence[str], names: Sequence[str], data: bytes) -> list[bool]:
    """``create_new_at`` of several names in the one folder ``root/parts…`` that all hold
    the same ``data``, made durable together: one temp file (one fsync), a hard link per
    name (create-if-absent each: a name that exists is left as it is), one folder fsync
    for all of them. Which names this call made, in order.

    A name is published only once the bytes are durable, and the call returns only once
    the names are; if the folder's fsync fails, the names made are removed again (best
    effort: the disk is failing) so that nothing the caller was told failed stays."""
    fd = open_folder(root, parts, create=True)
    try:
        tmp = write_temp_at(fd, data, sync=True)
        made: list[bool] = []
        try:
            for name in names:
                try:
                    os.link(tmp, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
                except FileExistsError:
                    made.append(False)
                else:
                    made.append(True)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
        if any(made):
            try:
                os.fsync(fd)
            except BaseException:
                for name, created in zip(names, made, strict=True):
                    if created:
                        with contextlib.suppress(OSError):
                            os.unlink(name, dir_fd=fd)
                raise
        return made
    finally:
        os.close(fd)
