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
import os
import secrets
import time
from pathlib import Path

TEMP_PREFIX = ".memfs-tmp-"


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
            folder.mkdir()  # a racing process may make it first; that is as good
        fsync_dir(folder.parent)


def write_temp(folder: Path, data: bytes, *, sync: bool = False, mode: int = 0o644) -> Path:
    """A new temp file in ``folder`` holding ``data`` (fsynced with ``sync``), for the
    caller to publish under its final name or unlink."""
    tmp = Path(f"{folder}/{TEMP_PREFIX}{secrets.token_hex(8)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if sync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def create_new(path: Path, data: bytes, *, mode: int = 0o644) -> bool:
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
