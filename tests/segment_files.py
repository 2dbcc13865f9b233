"""Reading and damaging an agent's log segments the way a disk or a hand would.

The log entries of a LocalBackend live in framed segment files
(``canonical/segments.py``), not one file each: tests that damage an entry by hand edit
its frame's payload in place (its checksum then fails), or find its bytes. A segment's
frames end at its zero tail (a zero magic) or at the file's end (``used``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from memfs.canonical import layout, segments
from memfs.canonical.backend import LocalBackend


def segment_folder(data: Path, agent_id: str) -> Path:
    return data / layout.log_prefix(agent_id) / segments.FOLDER


def segment_files(data: Path, agent_id: str) -> list[Path]:
    folder = segment_folder(data, agent_id)
    return sorted(folder.glob(f"*{segments.SUFFIX}")) if folder.is_dir() else []


def frames(path: Path) -> list[tuple[bytes, int, int, bytes]]:
    """(magic, revision, offset, payload) of every frame of a segment file."""
    data = path.read_bytes()
    out = []
    offset = 0
    while offset + segments.HEADER.size <= len(data):
        magic, length, _crc, revision = segments.HEADER.unpack_from(data, offset)
        if magic == segments.ZERO:
            break  # the zero tail: no frame from here on
        start = offset + segments.HEADER.size
        out.append((magic, revision, offset, data[start : start + length]))
        offset = start + length
    return out


def used(path: Path, *, sound: bool = False) -> bytes:
    """A segment's bytes up to where its frames end (its zero tail left off); with
    ``sound``, up to the end of its last frame whose checksum holds (a torn one not)."""
    raw = path.read_bytes()
    end = 0
    for magic, revision, offset, payload in frames(path):
        stop = offset + segments.HEADER.size + len(payload)
        whole = magic == segments.MAGIC and segments.frame(revision, payload) == raw[offset:stop]
        if sound and magic != segments.ERASED and not whole:
            break
        end = stop
    return raw[:end]


def write_at_end(path: Path, data: bytes) -> None:
    """Write ``data`` where the segment's frames end, into its zero tail (or past the
    file's end): what an append that died part way leaves."""
    with path.open("r+b") as f:
        f.seek(len(used(path)))
        f.write(data)


def sound_frames(data: Path, agent_id: str) -> list[tuple[int, bytes]]:
    """(revision, payload) of every live frame in append order, each checked: whole,
    its checksum right (re-framing the payload gives the stored bytes)."""
    out = []
    for path in segment_files(data, agent_id):
        raw = path.read_bytes()
        for magic, revision, offset, payload in frames(path):
            if magic == segments.MAGIC:
                stored = raw[offset : offset + segments.HEADER.size + len(payload)]
                assert segments.frame(revision, payload) == stored, f"{path} at {offset}"
                out.append((revision, payload))
    return out


def entry_revisions(data: Path, agent_id: str) -> list[int]:
    """The revisions of the live frames, in the order they were appended."""
    return [
        rev
        for path in segment_files(data, agent_id)
        for magic, rev, _o, _p in frames(path)
        if magic == segments.MAGIC
    ]


def where_is(data: Path, agent_id: str, revision: int) -> tuple[Path, int, int]:
    """(segment file, payload offset, payload length) of the live frame of ``revision``."""
    for path in segment_files(data, agent_id):
        for magic, rev, offset, payload in frames(path):
            if magic == segments.MAGIC and rev == revision:
                return path, offset + segments.HEADER.size, len(payload)
    raise AssertionError(f"no frame of revision {revision} of {agent_id!r}")


def flip_entry(data: Path, agent_id: str, revision: int, old: bytes, new: bytes) -> None:
    """Replace ``old`` by ``new`` (same length) inside the entry's stored payload."""
    assert len(old) == len(new)
    path, start, length = where_is(data, agent_id, revision)
    raw = bytearray(path.read_bytes())
    at = raw.find(old, start, start + length)
    assert at >= 0, f"{old!r} is not in entry {revision}"
    raw[at : at + len(old)] = new
    path.write_bytes(bytes(raw))


def drop_frame(data: Path, agent_id: str, revision: int) -> None:
    """Cut the frame of ``revision`` out of its segment, as a hand edit could."""
    path, start, length = where_is(data, agent_id, revision)
    raw = path.read_bytes()
    path.write_bytes(raw[: start - segments.HEADER.size] + raw[start + length :])


def as_file_entry(
    data: Path, agent_id: str, revision: int, change: Callable[[bytes], bytes]
) -> None:
    """Make entry ``revision`` a one-file entry (as an older memfs wrote them) holding
    ``change`` of its bytes, its frame erased."""
    backend = LocalBackend(data)
    key = layout.log_key(agent_id, revision)
    (data / key).write_bytes(change(backend.get(key)))
    assert backend.drop_frame(key)
