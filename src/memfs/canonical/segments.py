"""An agent's log entries in append-only segment files: one ``fdatasync`` per entry.

    agents/<dir>/.memfs/log/segments/<n, 20 digits>.seg   frames, appended in order
    agents/<dir>/.memfs/log/segments/lock                 flock'ed by appenders

A frame is a 20-byte header, ``magic | payload length | crc32 | revision``, then the
payload (the log entry's bytes). The crc32 covers the revision and the payload, so a
bit flipped anywhere in a frame is found when it is read. ``LocalBackend`` serves the
log keys (``layout.log_key``) from here with the Backend contract unchanged: a key is
created at most once, under an exclusive ``flock`` of the agent's lock file, after
the appender has scanned what other processes appended. S3 keeps one object per
entry; segments are a local-disk format only.

The zero tail: the newest segment is followed by zeros its appenders wrote ahead of
time (as many as the segment holds, ``TAIL_MIN`` to ``TAIL_BYTES``, in the same write
as the frame that found no room left).
An append overwrites zeros in place, so its ``fdatasync`` changes no file size and
needs no journal commit (the cost SQLite's reused WAL avoids too); only the append
that grows the tail pays one. So the frames end at the first zero magic (``ZERO``), or
at the file's size in a segment written before zero tails (still valid as it is).
Zeros are no truth: no frame lies in them, nothing acknowledged is overwritten.

Why this is still "truth is immutable":
- a frame is never rewritten; erasure (``erase``) is the one exception, and it
  overwrites the frame's header with the erased magic and its payload with zeros, so
  that no byte of an erased agent is left behind;
- a segment is sealed once a newer one exists (appenders only ever write the newest,
  the one with the highest number); it is started at ``SEAL_BYTES`` or ``SEAL_COUNT``,
  after the zero tail of the one it seals is cut off (``ftruncate`` to its last frame),
  so a sealed segment ends at its last frame and a zero tail means "not sealed";
- a torn tail was never acknowledged: the append that made it had not returned from
  its ``fdatasync``. It is the newest segment ending inside a frame (a header cut
  short, a payload shorter than its length, bytes that are no header with no frame
  after them), or, in the zero tail, a last frame whose crc fails and which still
  holds zeros its write never reached (its last byte, or a sector's worth: an
  acknowledged frame was written whole). The next appender zeroes it under the lock
  before appending, which removes bytes no one was ever told exist. Readers skip it.
- a whole frame whose crc fails is damage wherever it is otherwise, the newest one
  included: it may be an acknowledged entry that rotted, and only the index knows
  (``fsck --repair`` restores it from the index's copy, or quarantines a newest entry
  the index never took, as for a damaged one-file entry). So is a sealed segment cut
  short, or unparseable bytes (a zeroed header too) with frames after them. Damage is
  ``Damaged`` (503 naming ``memfs fsck``), never cut.

Old data folders hold one file per entry (``log/<revision>.json``). Those stay where
they are and are read beside the segments (see ``LocalBackend.get``): lazy dual
read, nothing to move.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import struct
import threading
import urllib.parse
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from memfs.canonical import durable
from memfs.domain import paths
from memfs.errors import Damaged

FOLDER = "segments"
LOCK_NAME = "lock"
SUFFIX = ".seg"
MAGIC = b"MFS1"
ERASED = b"MFSX"
ZERO = bytes(4)  # the magic of the zero tail: where a segment's frames end
HEADER = struct.Struct("<4sIIQ")  # magic, payload length, crc32(revision + payload), revision
SEAL_BYTES = 64 * 1024 * 1024
SEAL_COUNT = 65536
# The zero tail an append extends a segment by when its frame does not fit in the zeros
# left: as many bytes as the segment holds (at least TAIL_MIN, at most TAIL_BYTES), so
# one size-changing fdatasync per TAIL_BYTES once the segment is large, the others
# overwrite in place, and a small agent's log is never mostly zeros (a server of many
# agents would otherwise pay a MiB of disk for each).
TAIL_BYTES = 1024 * 1024
TAIL_MIN = 16 * 1024
_TORN_ZEROS = bytes(512)  # a sector's worth of zeros inside a frame: never written
_MAX_PAYLOAD = 1 << 31
_NAME_DIGITS = 20


def _crc(revision: int, payload: bytes | memoryview) -> int:
    return zlib.crc32(payload, zlib.crc32(revision.to_bytes(8, "little")))


def frame(revision: int, payload: bytes) -> bytes:
    """The bytes one entry takes in a segment."""
    return HEADER.pack(MAGIC, len(payload), _crc(revision, payload), revision) + payload


def segment_name(number: int) -> str:
    return f"{number:0{_NAME_DIGITS}d}{SUFFIX}"


def segment_number(name: str) -> int | None:
    stem = name.removesuffix(SUFFIX)
    if stem != name and len(stem) == _NAME_DIGITS and stem.isascii() and stem.isdigit():
        return int(stem)
    return None


def log_folder_of(key: str) -> tuple[str, int] | None:
    """(log folder key, revision) when ``key`` is an agent's log entry, else None."""
    if not key.endswith(".json") or "/.memfs/log/" not in key:
        return None
    folder, _, name = key.rpartition("/")
    parts = folder.split("/")
    if len(parts) != 4 or parts[0] != "agents" or parts[2:] != [".memfs", "log"]:
        return None
    stem = name.removesuffix(".json")
    if stem == name or len(stem) != 20 or not stem.isascii() or not stem.isdigit():
        return None
    return folder, int(stem)


def is_log_folder(rel: str) -> bool:
    parts = rel.split("/")
    return len(parts) == 4 and parts[0] == "agents" and parts[2:] == [".memfs", "log"]


def _agent_of(folder: str) -> str:
    """The agent id a log folder key names (its folder name when it encodes none)."""
    name = folder.split("/")[1]
    with contextlib.suppress(Exception):
        agent_id = urllib.parse.unquote(name, errors="strict")
        if paths.agent_dir_name(paths.agent_id(agent_id)) == name:
            return agent_id
    return name


@dataclass
class _Segment:
    name: str
    fd: int
    ino: tuple[int, int]
    end: int = 0  # where the frames read so far end
    count: int = 0
    writable: bool = False  # fd opened O_RDWR (known here: no fcntl per append)
    size: int = 0  # the file's size when last looked at (end < size: a zero tail)
    zeros_seen: bool = False  # the zero tail was read whole once: nothing after it


@dataclass
class _Slot:
    segment: _Segment
    offset: int
    length: int


@dataclass
class _Last:
    """The last frame a scan found: judged torn or not once the zero tail follows."""

    slot: _Slot
    revision: int
    shadowed: _Slot | None  # the slot its revision had before (a torn header's number)


@dataclass
class _State:
    segments: dict[str, _Segment] = field(default_factory=dict)
    entries: dict[int, _Slot] = field(default_factory=dict)
    broken: str | None = None  # unparseable bytes with frames after them: damage
    lock_fd: int = -1
    dir_fd: int = -1  # the segments folder, reached without following a symlink
    listed: bool = False  # the folder was listed since this state began


class AgentLog:
    """The segments of one agent's log folder, as this process knows them.

    Held per process (``pid``); a forked child starts afresh, since flock locks and
    file offsets are shared with the parent through inherited descriptors."""

    def __init__(self, root: Path, folder: str) -> None:
        self.root = root
        self.folder = folder  # "agents/<dir>/.memfs/log"
        self.parts = [*folder.split("/"), FOLDER]
        self.agent_id = _agent_of(folder)
        self.mutex = threading.Lock()
        self.pid = durable.pid()
        self.state = _State()

    # ---- reading ---------------------------------------------------------------------

    def known(self, revision: int) -> bytes | None:
        """The payload of ``revision`` if this process already knows where it is (no
        lock, no scan: the read of a whole log goes frame by frame at this cost)."""
        with self.mutex:
            slot = self.state.entries.get(revision)
            return None if slot is None else self._read(revision, slot)

    def get(self, revision: int) -> bytes | None:
        """The payload of ``revision``, None if no segment holds it."""
        with self.mutex:
            for fresh in (False, True):
                slot = self.state.entries.get(revision)
                if slot is None:
                    self._refresh(exclusive=False)
                    slot = self.state.entries.get(revision)
                    if slot is None:
                        if self.state.broken is not None:
                            raise self._damaged(self.state.broken)
                        return None
                try:
                    return self._read(revision, slot)
                except Damaged:
                    if fresh:
                        raise
                    # What this process knew may be stale (a segment replaced or
                    # edited under it): read the segments afresh once before judging.
                    self._reset()
            raise AssertionError("unreachable")

    def _read(self, revision: int, slot: _Slot) -> bytes | None:
        data = os.pread(slot.segment.fd, HEADER.size + slot.length, slot.offset)
        if len(data) < HEADER.size:
            raise self._bad(revision, slot, "it is cut short")
        magic, length, crc, rev = HEADER.unpack_from(data)
        if magic == ERASED:
            del self.state.entries[revision]
            return None
        payload = memoryview(data)[HEADER.size :]
        if magic != MAGIC or length != slot.length or rev != revision or len(payload) < length:
            raise self._bad(revision, slot, "its frame is unreadable")
        if _crc(revision, payload) != crc:
            raise self._bad(revision, slot, "its checksum does not match")
        return bytes(payload)

    def _bad(self, revision: int, slot: _Slot, why: str) -> Damaged:
        # Named by its log key, as a damaged one-file entry is: fsck's advice and
        # --repair find the entry by that name.
        where = f"{self.folder}/{revision:0{_NAME_DIGITS}d}.json"
        segment = self._segment_key(slot.segment)
        return self._damaged(where, f"{why} ({segment}, byte {slot.offset})")

    def raw(self, revision: int) -> bytes | None:
        """The payload of ``revision`` as stored, checksum unchecked."""
        with self.mutex:
            self._refresh(exclusive=False)
            slot = self.state.entries.get(revision)
            if slot is None:
                return None
            return os.pread(slot.segment.fd, slot.length, slot.offset + HEADER.size)

    def revisions(self) -> list[int]:
        """Every revision the segments hold (after reading what others appended)."""
        with self.mutex:
            self._refresh(exclusive=False)
            return sorted(self.state.entries)

    def has(self, revision: int) -> bool:
        with self.mutex:
            if revision in self.state.entries:
                return True
            self._refresh(exclusive=False)
            return revision in self.state.entries

    def close(self) -> None:
        """Close this log's descriptors; a later use opens and reads them again."""
        with self.mutex:
            self._reset()

    # ---- writing ---------------------------------------------------------------------

    def append(self, revision: int, payload: bytes) -> bool:
        """Append ``revision`` unless it is stored; True if this call stored it (a
        one-file entry of an old folder counts as stored)."""
        if len(payload) >= _MAX_PAYLOAD:
            raise ValueError("a log entry this large is not a log entry")
        with self.mutex:
            fd = self._lock(exclusive=True)
            try:
                return self._append(revision, payload)
            finally:
                _unlock(fd)

    def _append(self, revision: int, payload: bytes) -> bool:
        """``append`` with the mutex and the exclusive flock held."""
        state = self.state
        if revision in state.entries or self._has_file(revision):
            return False
        if state.broken is not None:
            raise self._damaged(state.broken)
        tail = self._tail()
        if tail is None or tail.end >= SEAL_BYTES or tail.count >= SEAL_COUNT:
            tail = self._new_segment(tail)
        data = frame(revision, payload)
        start = tail.end
        # Into the zero tail when the frame fits (the fdatasync then changes no size and
        # needs no journal commit); else the frame and a new zero tail in one write.
        grow = start + len(data) > tail.size
        zeros = min(TAIL_BYTES, max(TAIL_MIN, start + len(data))) if grow else 0
        out = data + bytes(zeros) if grow else data
        try:
            written = self._write(tail, out, start, len(data))
            if written < len(data):
                raise OSError(errno.EIO, "short write to a log segment")
            os.fdatasync(tail.fd)
        except BaseException:
            # Not acknowledged: zero the bytes again so that no reader ever adopts an
            # entry its writer was told failed. If even this fails the disk is
            # failing; the frame may then surface later, as the entry of a writer
            # that crashed after its fdatasync (catch-up applies it, as it would).
            with contextlib.suppress(OSError):
                os.pwrite(tail.fd, bytes(len(data)), start)
                os.fdatasync(tail.fd)
            raise
        if written == len(out) and grow:
            tail.size = start + written
            tail.zeros_seen = True
        elif written < len(out):  # the frame alone, maybe some zeros: as the file says
            tail.size = os.fstat(tail.fd).st_size
        tail.end = start + len(data)
        tail.count += 1
        state.entries[revision] = _Slot(tail, start, len(payload))
        return True

    @staticmethod
    def _write(tail: _Segment, out: bytes, start: int, frame_bytes: int) -> int:
        """``pwrite`` of a frame (and new zeros after it); a disk too full for the zeros
        still takes the frame alone (the next append tries to grow them again)."""
        try:
            written = os.pwrite(tail.fd, out, start)
        except OSError as exc:
            if exc.errno != errno.ENOSPC or len(out) == frame_bytes:
                raise
            written = 0
        if written < len(out) and len(out) > frame_bytes:
            written = os.pwrite(tail.fd, out[:frame_bytes], start)
        return written

    def _has_file(self, revision: int) -> bool:
        """Whether the log folder holds ``revision`` as a one-file entry (or anything
        under its name: a symlink there is refused by reads, and taken here).

        A ``stat`` every time, under the lock: memfs makes no one-file entry past the
        index's head, but a hand or a partial copy (rsync) may put one into a live
        folder, and the commit that would take its revision must find it (damage,
        ``tests/test_damage.py``), so no fact learnt earlier can stand in for it."""
        name = f"../{revision:0{_NAME_DIGITS}d}.json"  # beside segments/, no symlink between
        try:
            os.stat(name, dir_fd=self.state.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return False
        return True

    def erase(self, revision: int) -> bool:
        """Overwrite the frame of ``revision`` (erasure and collection only): its header
        becomes the erased magic, its payload zeros. A sealed segment left with no live
        frame is removed; the newest stays (removing it would make a sealed one the
        newest, written again) unless the whole log is now empty (an erased agent:
        every segment goes, and a log made later starts afresh). True if a frame was
        erased."""
        with self.mutex, self._locked(exclusive=True):
            slot = self.state.entries.pop(revision, None)
            if slot is None:
                return False
            segment = slot.segment
            header = HEADER.pack(ERASED, slot.length, 0, 0)
            os.pwrite(segment.fd, header + bytes(slot.length), slot.offset)
            os.fdatasync(segment.fd)
            if not self.state.entries:
                for each in list(self.state.segments.values()):
                    self._remove(each)
            elif segment is not self._tail() and not any(
                s.segment is segment for s in self.state.entries.values()
            ):
                self._remove(segment)
            return True

    # ---- the scan --------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[None]:
        """The agent's flock (shared for readers that scan, exclusive for appenders),
        with what other processes appended read in."""
        fd = self._lock(exclusive=exclusive)
        try:
            yield
        finally:
            _unlock(fd)

    def _lock(self, *, exclusive: bool) -> int:
        """``_locked``'s entry, for ``append`` (a generator context manager per commit
        cost more than the rest of the lock's Python): the locked fd, -1 for none."""
        if durable.pid() != self.pid:  # a forked child: the parent's fds and locks are not ours
            self.pid, self.state = durable.pid(), _State()
        while True:
            fd = self._lock_fd(create=exclusive)
            if fd < 0:  # no segments folder (yet, or erased): nothing to read, no one to exclude
                self._reset()
                return -1
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                # The known tail still linked and nothing changed but its new frames:
                # then the lock file is still linked too, no need to look (see
                # ``_caught_up``). Else erasure may have removed the folder, and a lock
                # on a removed file excludes no one.
                if self._caught_up(cut=exclusive):
                    return fd
                if self._lock_is_current(fd):
                    self._list(cut=exclusive)
                    return fd
            except BaseException:
                fcntl.flock(fd, fcntl.LOCK_UN)
                raise
            self._reset()

    def _refresh(self, *, exclusive: bool) -> None:
        with self._locked(exclusive=exclusive):
            pass

    def _lock_fd(self, *, create: bool) -> int:
        if self.state.lock_fd >= 0:
            return self.state.lock_fd
        try:
            folder = durable.open_folder(self.root, self.parts, create=create)
        except (FileNotFoundError, NotADirectoryError):
            return -1
        try:
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            self.state.lock_fd = os.open(LOCK_NAME, flags, durable.FILE_MODE, dir_fd=folder)
        except BaseException:
            os.close(folder)
            raise
        self.state.dir_fd = folder
        return self.state.lock_fd

    def _lock_is_current(self, fd: int) -> bool:
        # Erasure removes the folder and the lock file with it; only this name is ever
        # the lock (made with O_CREAT, never renamed), so a lock file still linked is it.
        return os.fstat(fd).st_nlink > 0

    def _reset(self) -> None:
        for segment in self.state.segments.values():
            with contextlib.suppress(OSError):
                os.close(segment.fd)
        for fd in (self.state.lock_fd, self.state.dir_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.state = _State()

    def _caught_up(self, *, cut: bool) -> bool:
        """True if this process's view was only behind by frames appended to its tail,
        now read (an ``fstat`` and a ``pread`` when nothing was appended).

        It also answers "is the lock file still the lock": only the removal of the
        whole segments folder unlinks the lock file, and memfs removes a folder only
        after deleting every log key in it (``Store.erase_agent``, fsck's leftovers),
        whose last ``erase`` unlinks every segment under this lock first. So a known
        tail still linked means the lock file is too, and the lock's own ``fstat`` is
        only needed when the tail is not (then the folder is listed afresh anyway). A
        folder removed by hand while appenders run loses what it holds whatever they
        do; a lock file unlinked alone, beside linked segments, is no state memfs
        makes."""
        tail = self._tail()
        return self.state.listed and tail is not None and self._only_tail_grew(tail, cut=cut)

    def _list(self, *, cut: bool) -> None:
        """Read the frames appended since the last look, by listing the segments folder:
        new, removed or replaced segments too."""
        state = self.state
        folder = state.dir_fd
        state.listed = True
        names = sorted(n for n in os.listdir(folder) if segment_number(n) is not None)
        for gone in set(state.segments) - set(names):
            self._forget(state.segments.pop(gone))
        for name in names:
            segment = state.segments.get(name)
            st = os.stat(name, dir_fd=folder, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode):
                raise durable.refuse_symlink(f"{'/'.join(self.parts)}/{name}")
            if segment is not None and segment.ino != (st.st_dev, st.st_ino):
                self._forget(state.segments.pop(name))
                segment = None
            if segment is None:
                flags = (os.O_RDWR if cut else os.O_RDONLY) | os.O_NOFOLLOW | os.O_CLOEXEC
                fd = os.open(name, flags, dir_fd=folder)
                segment = _Segment(name, fd, (st.st_dev, st.st_ino), writable=cut)
                state.segments[name] = segment
            elif cut and not segment.writable:
                fd = os.open(name, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
                os.close(segment.fd)
                segment.fd, segment.writable = fd, True
            # Shorter than its frames were, or a newest segment shorter than it was
            # (its zero tail hides a cut): read afresh. A sealed one shorter than it
            # was lost its zero tail to the sealing: its new frames are read on.
            if st.st_size < segment.end or (name == names[-1] and st.st_size < segment.size):
                self._forget(state.segments.pop(name))
                state.segments[name] = segment = _Segment(
                    name, _reopen(folder, name, cut), (st.st_dev, st.st_ino), writable=cut
                )
            segment.size = st.st_size
            if st.st_size != segment.end:
                self._read_frames(segment, st.st_size, newest=name == names[-1], cut=cut)

    def _only_tail_grew(self, tail: _Segment, *, cut: bool) -> bool:
        """Read what was appended to ``tail`` if nothing else changed, and say so.

        Segments are only ever added as the next number and sealed ones never grow, so
        "no segment after the tail, and the tail still linked" means the tail's new
        frames are all there is to read: two system calls, not a folder listing. A tail
        whose zero tail is still there is not sealed (sealing cuts the zero tail off
        before the next segment is made), so the zeros where the next frame would start
        answer both questions: an fstat and a pread."""
        st = os.fstat(tail.fd)
        if st.st_nlink == 0 or st.st_size < tail.end or st.st_size < tail.size:
            # Removed (erasure), cut under us, or shorter than it was (sealed by another
            # process, or edited by hand): list the folder afresh.
            return False
        if cut and not tail.writable:
            return False
        tail.size = st.st_size
        if (
            tail.zeros_seen
            and st.st_size - tail.end >= HEADER.size
            and os.pread(tail.fd, HEADER.size, tail.end) == bytes(HEADER.size)
        ):
            return True
        following = segment_name((segment_number(tail.name) or 0) + 1)
        try:
            os.stat(following, dir_fd=self.state.dir_fd, follow_symlinks=False)
            return False
        except FileNotFoundError:
            pass
        if st.st_size != tail.end:
            self._read_frames(tail, st.st_size, newest=True, cut=cut)
        return True

    def _read_frames(self, segment: _Segment, size: int, *, newest: bool, cut: bool) -> None:
        """Index the frames of ``segment`` from its known end to ``size`` (or to its
        zero tail)."""
        state = self.state
        offset = segment.end
        last: _Last | None = None  # the last frame found here
        while offset < size:
            header = os.pread(segment.fd, HEADER.size, offset)
            torn = len(header) < HEADER.size
            if not torn:
                magic, length, _crc32, revision = HEADER.unpack(header)
                end = offset + HEADER.size + length
                if magic == ZERO and newest:
                    # The zero tail, or bytes after it: the end, damage or a torn tail.
                    if not self._zero_tail(segment, offset, size, header, cut=cut):
                        return
                    if last is not None and self._torn_last(segment, last, offset, cut=cut):
                        offset = last.slot.offset
                    break
                if magic not in (MAGIC, ERASED) or length >= _MAX_PAYLOAD:
                    if not newest or self._frames_after(segment, offset, size):
                        state.broken = f"{self._segment_key(segment)} at byte {offset}"
                        return
                    torn = True
                elif end > size:
                    torn = True
            if torn:
                if not newest:
                    state.broken = f"{self._segment_key(segment)} at byte {offset} (cut short)"
                elif cut:
                    self._cut(segment, offset, size)
                break
            if magic == MAGIC:
                slot = _Slot(segment, offset, length)
                last = _Last(slot, revision, state.entries.get(revision))
                state.entries[revision] = slot
                segment.count += 1
            else:
                last = None  # a frame came after it: that append had returned
            offset = end
        segment.end = offset

    def _zero_tail(
        self, segment: _Segment, offset: int, size: int, header: bytes, *, cut: bool
    ) -> bool:
        """At ``offset`` a zero magic: True if the frames end there (zeros to the end,
        or torn bytes that are now cut or skipped); False (``broken`` set) if a frame
        follows: acknowledged entries lie beyond, this is damage."""
        if segment.zeros_seen and header == bytes(HEADER.size):
            return True  # read whole before; appenders write only at its start
        rest = os.pread(segment.fd, size - offset, offset)
        if rest.count(0) == len(rest):
            segment.zeros_seen = True
            return True
        if self._frames_after(segment, offset, size, rest):
            self.state.broken = f"{self._segment_key(segment)} at byte {offset}"
            return False
        if cut:  # a torn append's bytes (a header cut short) in the zeros
            self._cut(segment, offset, size, rest)
        return True

    def _torn_last(self, segment: _Segment, last: _Last, end: int, *, cut: bool) -> bool:
        """Whether the last frame before the zero tail is a torn append: its checksum
        fails and it still holds zeros the write never reached (its last byte, or a
        sector's worth). An acknowledged frame was written whole before its append
        returned; one that rotted has no such zeros, and stays damage for fsck."""
        slot, revision = last.slot, last.revision
        data = os.pread(segment.fd, HEADER.size + slot.length, slot.offset)
        payload = memoryview(data)[HEADER.size :]
        if _crc(revision, payload) == HEADER.unpack_from(data)[2]:
            return False
        if data[-1] != 0 and _TORN_ZEROS not in data:
            return False
        # A torn header's revision may be cut to another entry's number: that entry
        # (an earlier frame) stays where it is.
        if last.shadowed is None:
            del self.state.entries[revision]
        else:
            self.state.entries[revision] = last.shadowed
        segment.count -= 1
        if cut:
            self._cut(segment, slot.offset, end)
        return True

    def _cut(self, segment: _Segment, offset: int, size: int, rest: bytes | None = None) -> None:
        """Zero a torn tail's bytes from ``offset`` (under the exclusive lock): no reader
        adopts them, and the next frame is written there. Zeros, not ``ftruncate``: the
        zero tail stays, and an append into it needs no size change."""
        if rest is None:
            rest = os.pread(segment.fd, size - offset, offset)
        used = len(rest.rstrip(b"\0"))
        if used:
            os.pwrite(segment.fd, bytes(used), offset)
            os.fdatasync(segment.fd)
        segment.zeros_seen = True

    def _frames_after(
        self, segment: _Segment, offset: int, size: int, rest: bytes | None = None
    ) -> bool:
        """True if a frame header follows the bad bytes at ``offset``: acknowledged
        entries would be cut with them, so they are damage, not a torn tail."""
        if rest is None:
            rest = os.pread(segment.fd, size - offset, offset)
        return rest.find(MAGIC, 1) >= 0 or rest.find(ERASED, 1) >= 0

    def _tail(self) -> _Segment | None:
        if not self.state.segments:
            return None
        return self.state.segments[max(self.state.segments)]

    def _new_segment(self, tail: _Segment | None) -> _Segment:
        """Start the next segment (which seals ``tail``): ``tail``'s zero tail cut off
        first (a sealed segment ends at its last frame, so "cut short" still means
        damage, and a zero tail means "not sealed"), then the new one created and its
        folder entry made durable, once per segment."""
        if tail is not None and tail.size > tail.end:
            os.ftruncate(tail.fd, tail.end)
            os.fdatasync(tail.fd)
            tail.size = tail.end
        number = 1 if tail is None else (segment_number(tail.name) or 0) + 1
        name = segment_name(number)
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, durable.FILE_MODE, dir_fd=self.state.dir_fd)
        os.fsync(self.state.dir_fd)
        st = os.fstat(fd)
        segment = _Segment(name, fd, (st.st_dev, st.st_ino), writable=True)
        self.state.segments[name] = segment
        return segment

    def _remove(self, segment: _Segment) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(segment.name, dir_fd=self.state.dir_fd)
        os.fsync(self.state.dir_fd)
        self.state.segments.pop(segment.name, None)
        self._forget(segment)

    def _forget(self, segment: _Segment) -> None:
        for revision in [r for r, s in self.state.entries.items() if s.segment is segment]:
            del self.state.entries[revision]
        with contextlib.suppress(OSError):
            os.close(segment.fd)

    def _segment_key(self, segment: _Segment) -> str:
        return f"{self.folder}/{FOLDER}/{segment.name}"

    def _damaged(self, where: str, reason: str = "unreadable bytes in the log") -> Damaged:
        return Damaged(self.agent_id, where, reason)


def _reopen(folder: int, name: str, writable: bool) -> int:
    flags = (os.O_RDWR if writable else os.O_RDONLY) | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(name, flags, dir_fd=folder)


def _unlock(fd: int) -> None:
    if fd >= 0:
        fcntl.flock(fd, fcntl.LOCK_UN)


class Segments:
    """The ``AgentLog`` of the agent folders a backend touched last, by log folder.

    Each holds open descriptors (the folder, the lock, one per segment), so only the
    ``OPEN_LOGS`` most recently used are kept: an evicted one is closed, and the next
    use of that agent reads its segments afresh. Two ``AgentLog``s of one folder in
    one process (one evicted while in use) still exclude each other: each has its own
    open lock file, and ``flock`` locks belong to the open file, not the process."""

    OPEN_LOGS = 256

    def __init__(self, root: Path) -> None:
        self.root = root
        self._logs: OrderedDict[str, AgentLog] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, folder: str) -> AgentLog:
        with self._lock:
            log = self._logs.get(folder)
            if log is None:
                log = self._logs[folder] = AgentLog(self.root, folder)
                while len(self._logs) > self.OPEN_LOGS:
                    _name, evicted = self._logs.popitem(last=False)
                    evicted.close()
            else:
                self._logs.move_to_end(folder)
            return log

    def close(self) -> None:
        """Close every kept log's descriptors (the owning ``Store.close``); a later use
        of a folder opens and reads it again, as after an eviction."""
        with self._lock:
            logs, self._logs = list(self._logs.values()), OrderedDict()
        for log in logs:
            log.close()
