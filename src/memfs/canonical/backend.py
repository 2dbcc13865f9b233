"""The Backend seam: immutable objects by key, the only place canonical bytes live.

Four operations, the ones S3 with conditional writes also offers: create-if-absent
put, get, list by prefix with start-after, delete (for erasure and collection).
Keys are ``/``-separated relative names such as ``agents/x/.memfs/log/…json``.
``LocalBackend`` keeps them as files under a folder; ``MemoryBackend`` in a dict;
``S3Backend`` (``canonical/s3.py``) in an S3-compatible bucket. All pass the one
contract suite, ``memfs.testing.BackendContract``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from memfs.canonical import durable, segments
from memfs.errors import Damaged

_READ_SIZE = 64 * 1024


class MissingObject(LookupError):
    """No object is stored under the key."""


def check_key(key: str) -> str:
    # Substring tests on the key wrapped in slashes (this runs for every object read):
    # "//" is an empty segment, "/./" and "/../" dot segments, "/.memfs-tmp-" a temp name.
    wrapped = f"/{key}/"
    if not key or "//" in wrapped or "/./" in wrapped or "/../" in wrapped or "\x00" in key:
        raise ValueError(f"invalid object key {key!r}")
    if f"/{durable.TEMP_PREFIX}" in wrapped:
        raise ValueError(f"object key {key!r} uses the reserved temp prefix")
    return key


class Backend(Protocol):
    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Store ``data`` under ``key`` durably unless the key exists; True if stored."""

    def get(self, key: str) -> bytes:
        """The bytes under ``key``; raises MissingObject."""

    def exists(self, key: str) -> bool:
        """Whether an object is stored under ``key``."""

    def list(self, prefix: str, start_after: str = "") -> Iterator[str]:
        """Keys starting with ``prefix`` and greater than ``start_after``, bytewise order."""

    def delete(self, key: str) -> None:
        """Remove ``key`` if present (erasure and collection only)."""


@runtime_checkable
class SharedCreate(Protocol):
    """A backend that can create several keys of one folder holding the same bytes with
    one durability point (``LocalBackend``: hard links to one fsync'd file). Deliveries
    use it to make a batch of records durable together; a backend without it gets one
    ``put_if_absent`` per record."""

    def put_shared_if_absent(self, keys: Sequence[str], data: bytes) -> list[bool]:
        """``put_if_absent(key, data)`` of every key, all durable once this returns;
        which keys this call stored, in order."""


def is_file(path: str) -> bool:
    """Whether a plain file stands at ``path``, as ``Path.is_file`` answers but raising
    any error other than "not there". ``os.stat`` of a joined string: pathlib's parsing
    was most of the cost of this call, made on every delivery and run event (a stat is
    about a microsecond)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            raise
        return False


class MemoryBackend:
    """Objects in a dict: the test double, with the same contract as LocalBackend."""

    def __init__(self) -> None:
        self._objects: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def put_if_absent(self, key: str, data: bytes) -> bool:
        check_key(key)
        with self._lock:
            if key in self._objects:
                return False
            self._objects[key] = bytes(data)
            return True

    def get(self, key: str) -> bytes:
        with self._lock:
            try:
                return self._objects[check_key(key)]
            except KeyError:
                raise MissingObject(key) from None

    def exists(self, key: str) -> bool:
        with self._lock:
            return check_key(key) in self._objects

    def list(self, prefix: str, start_after: str = "") -> Iterator[str]:
        with self._lock:
            keys = sorted(k for k in self._objects if k.startswith(prefix) and k > start_after)
        yield from keys

    def delete(self, key: str) -> None:
        with self._lock:
            self._objects.pop(check_key(key), None)


class LocalBackend:
    """Objects as files under ``root``: temp + fsync + ``os.link`` + directory fsync;
    log entries appended to the agent's segments (``canonical/segments.py``), one
    fdatasync each. A log entry an older memfs wrote as a file is read from its file
    (lazy dual read: old folders open as they are, nothing is moved)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.segments = segments.Segments(root)

    def close(self) -> None:
        """Close the segments' open descriptors (a later call opens them again)."""
        self.segments.close()

    def _path(self, key: str) -> Path:
        return Path(f"{self.root}/{check_key(key)}")

    def put_if_absent(self, key: str, data: bytes) -> bool:
        entry = segments.log_folder_of(check_key(key))
        if entry is not None:
            folder, revision = entry
            log = self.segments.of(folder)
            return log.append(revision, data)
        # Folder by folder from the root, never through a symlink (durable.open_folder).
        return durable.create_new_at(self.root, key.split("/"), data)

    def put_shared_if_absent(self, keys: Sequence[str], data: bytes) -> list[bool]:
        """Every key of one folder (not a log folder) as a hard link to one durable file
        of ``data``: one file fsync and one folder fsync for all (``durable.link_new_at``)."""
        folders = {check_key(key).rpartition("/")[0] for key in keys}
        if len(folders) != 1 or any(segments.log_folder_of(key) for key in keys):
            raise ValueError("shared keys must be files of one folder, not log entries")
        folder = folders.pop()
        if not folder:
            raise ValueError("shared keys must be below a folder")
        names = [key.rpartition("/")[2] for key in keys]
        return durable.link_new_at(self.root, folder.split("/"), names, data)

    def get(self, key: str) -> bytes:
        entry = segments.log_folder_of(key)
        if entry is None:
            return self._get_file(key)
        # A frame this process knows of first (the common case, and a whole log read in
        # order); then a one-file entry (an older folder's, or one fsck restored); then
        # the segments read afresh (another process's append).
        log = self.segments.of(entry[0])
        try:
            data = log.known(entry[1])
        except Damaged:
            data = None
        if data is not None:
            return data
        with contextlib.suppress(MissingObject):
            return self._get_file(key)
        data = log.get(entry[1])
        if data is None:
            raise MissingObject(key)
        return data

    def drop_frame(self, key: str) -> bool:
        """Erase the segment frame of the log entry ``key``, keeping a one-file entry
        of it (fsck --repair: the restored file is then the entry's only copy, so a
        frame that reads as sound but is wrong can't shadow it)."""
        entry = segments.log_folder_of(check_key(key))
        return entry is not None and self.segments.of(entry[0]).erase(entry[1])

    def raw_log_entry(self, key: str) -> bytes:
        """The stored bytes of the log entry ``key``, checksum unchecked (for fsck's
        quarantine of an unreadable entry); raises MissingObject."""
        with contextlib.suppress(MissingObject):
            return self._get_file(key)
        entry = segments.log_folder_of(key)
        data = None if entry is None else self.segments.of(entry[0]).raw(entry[1])
        if data is None:
            raise MissingObject(key)
        return data

    def _get_file(self, key: str) -> bytes:
        # A plain string join: keys are '/'-separated like POSIX paths, and pathlib's
        # parsing was a third of the cost of reading a log entry.
        # os.open/os.read in 64 KiB reads: a third of the cost of open() and its buffered
        # file object (a read of 1 MiB costs 5x more here: the buffer is allocated first).
        try:
            fd = os.open(f"{self.root}/{check_key(key)}", os.O_RDONLY | os.O_NOFOLLOW)
        except (FileNotFoundError, NotADirectoryError):
            raise MissingObject(key) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise durable.refuse_symlink(key) from None
            raise
        try:
            chunks: list[bytes] = []
            while True:
                try:
                    chunk = os.read(fd, _READ_SIZE)
                except IsADirectoryError:
                    raise MissingObject(key) from None
                chunks.append(chunk)
                if len(chunk) < _READ_SIZE:  # a short read of a regular file is its end
                    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        finally:
            os.close(fd)

    def exists(self, key: str) -> bool:
        entry = segments.log_folder_of(check_key(key))
        if entry is not None and entry[1] in self.segments.of(entry[0]).state.entries:
            return True
        if is_file(f"{self.root}/{key}"):
            return True
        return entry is not None and self.segments.of(entry[0]).has(entry[1])

    def list(self, prefix: str, start_after: str = "") -> Iterator[str]:
        # Start the walk at the deepest folder the prefix names whole.
        base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        if base and any(p in ("", ".", "..") or durable.is_temp_name(p) for p in base.split("/")):
            return  # no valid key lies there, and '..' must not walk outside the root
        if base:
            durable.check_no_symlink(self.root, base.split("/"))
        start = self.root.joinpath(*base.split("/")) if base else self.root
        for key in self._walk(start, base, start_after):
            if key.startswith(prefix) and key > start_after:
                yield key

    def _walk(self, folder: Path, rel: str, start_after: str) -> Iterator[str]:
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return
        # (name, is a folder): in a log folder, the segments folder is not objects but
        # the entries it holds, listed as their keys among the one-file entries.
        names = [
            (e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False))
            for e in entries
            if not durable.is_temp_name(e.name)
        ]
        if segments.is_log_folder(rel):
            files = {name for name, _d, is_file in names if is_file}
            names = [n for n in names if n[0] != segments.FOLDER or not n[1]]
            names += [
                (name, False, True)
                for revision in self.segments.of(rel).revisions()
                if (name := f"{revision:020d}.json") not in files
            ]

        # Bytewise key order: "a/x" sorts after "a.b" because "/" > "."; sorting the
        # names with a trailing "/" for folders gives exactly the key order.
        def order(entry: tuple[str, bool, bool]) -> bytes:
            return entry[0].encode() + (b"/" if entry[1] else b"")

        for name, is_dir, is_file in sorted(names, key=order):
            key = f"{rel}/{name}" if rel else name
            if is_dir:
                # Every key below sorts before start_after: skip the folder unread, as
                # S3 would, so start_after can leap over whole subtrees.
                if start_after > key + "/" and not start_after.startswith(key + "/"):
                    continue
                yield from self._walk(folder / name, key, start_after)
            elif is_file:
                yield key

    def delete(self, key: str) -> None:
        durable.delete_at(self.root, check_key(key).split("/"))
        entry = segments.log_folder_of(key)
        if entry is not None:
            self.segments.of(entry[0]).erase(entry[1])
