"""A segment's zero tail (canonical/segments.py): appends overwrite preallocated zeros.

Proves: an append writes into the zeros after the last frame, so the file's size (and
the journal commit its fdatasync would need) changes once per ``TAIL_BYTES``, not per
entry, and other processes read every entry; a writer killed with SIGKILL part way
through an append in the zeros leaves bytes no reader serves, which the next appender
(another process) zeroes, with no acknowledged entry lost; a frame that rotted before
the zeros is still damage, never cut; frames after a zeroed header are damage; sealing
cuts the zero tail off.
"""

from __future__ import annotations

import errno
import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memfs.canonical import layout, segments
from memfs.canonical.backend import LocalBackend, MissingObject
from memfs.errors import Damaged
from segment_files import flip_entry, frames, segment_files, sound_frames, used

AGENT = "team/zero"
WAIT = 120


def key(revision: int) -> str:
    return layout.log_key(AGENT, revision)


def entry(revision: int, tag: str = "") -> bytes:
    return json.dumps({"revision": revision, "tag": tag, "pad": "y" * 700}).encode() + b"\n"


_READER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from memfs.canonical import layout
    from memfs.canonical.backend import LocalBackend
    backend = LocalBackend(Path(sys.argv[1]))
    keys = list(backend.list(layout.log_prefix(sys.argv[2])))
    print(json.dumps({k: backend.get(k).decode() for k in keys}))
    """
)


def read_in_another_process(data: Path) -> dict[str, bytes]:
    proc = subprocess.run(
        [sys.executable, "-c", _READER, str(data), AGENT],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return {k: v.encode() for k, v in json.loads(proc.stdout).items()}


def test_appends_overwrite_the_zero_tail_and_grow_it_once_per_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segments, "TAIL_BYTES", 8192)
    monkeypatch.setattr(segments, "TAIL_MIN", 8192)
    backend = LocalBackend(tmp_path)
    assert backend.put_if_absent(key(1), entry(1))
    (segment,) = segment_files(tmp_path, AGENT)
    sizes = [segment.stat().st_size]
    for revision in range(2, 41):
        assert backend.put_if_absent(key(revision), entry(revision))
        sizes.append(segment.stat().st_size)
    # The first append made the segment and its zeros; later ones wrote into them, and
    # only the one that found no room left grew the file (by a chunk, not a frame).
    frame_size = len(segments.frame(40, entry(40)))
    total = sum(len(segments.frame(r, entry(r))) for r in range(1, 41))
    assert sizes[0] == len(segments.frame(1, entry(1))) + 8192
    growths = [b - a for a, b in itertools.pairwise(sizes) if b != a]
    assert growths and len(growths) <= total // 8192 + 1
    assert all(g > 8192 - frame_size for g in growths)
    assert len(used(segment)) == total < segment.stat().st_size
    # Every reader finds the end of the frames in the zeros: this process afresh,
    # another process, and the appender itself.
    expected = {key(r): entry(r) for r in range(1, 41)}
    fresh = LocalBackend(tmp_path)
    assert {k: fresh.get(k) for k in fresh.list(layout.log_prefix(AGENT))} == expected
    assert read_in_another_process(tmp_path) == expected
    assert [r for r, _p in sound_frames(tmp_path, AGENT)] == list(range(1, 41))


def test_a_small_log_is_not_mostly_zeros_and_its_tail_grows_with_it(tmp_path: Path) -> None:
    # A server of many agents: each one's zeros are about what its log holds, up to
    # TAIL_BYTES, not a MiB per agent.
    backend = LocalBackend(tmp_path)
    assert backend.put_if_absent(key(1), entry(1))
    (segment,) = segment_files(tmp_path, AGENT)
    assert segment.stat().st_size == len(used(segment)) + segments.TAIL_MIN
    sizes = {segment.stat().st_size}
    revision = 1
    while len(used(segment)) < 4 * segments.TAIL_MIN:
        revision += 1
        assert backend.put_if_absent(key(revision), entry(revision))
        sizes.add(segment.stat().st_size)
        assert segment.stat().st_size <= 2 * len(used(segment)) + segments.TAIL_MIN
    assert 2 <= len(sizes) <= 4  # doubling: a few growths, not one per frame
    assert LocalBackend(tmp_path).get(key(revision)) == entry(revision)


_KILLED_WRITER = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from memfs.canonical import layout, segments
    from memfs.canonical.backend import LocalBackend

    root, agent, first, count, keep = Path(sys.argv[1]), sys.argv[2], *map(int, sys.argv[3:6])
    segments.TAIL_BYTES = 4096  # the kill may land on an append that grows the file too
    real = os.pwrite
    appends = [0]

    def dies_on_the_last(fd, data, offset):
        if bytes(data[:4]) == segments.MAGIC:  # an append (not the zeroing of torn bytes)
            appends[0] += 1
            if appends[0] == count:
                whole = segments.HEADER.size + int.from_bytes(data[4:8], "little")
                real(fd, data[:keep] if keep >= 0 else data[: whole // 2], offset)
                os.kill(os.getpid(), 9)  # mid-append: before its fdatasync returned
        return real(fd, data, offset)

    os.pwrite = dies_on_the_last
    backend = LocalBackend(root)
    for revision in range(first, first + count):
        body = ('{"revision": %d, "pad": "%s"}\\n' % (revision, "z" * 900)).encode()
        assert backend.put_if_absent(layout.log_key(agent, revision), body)
        print(revision, flush=True)  # acknowledged: durable
    """
)


def kill_mid_append(data: Path, first: int, count: int, keep: int) -> list[int]:
    """Run a writer that appends ``count`` entries from ``first`` and is killed part way
    through the last append (``keep`` bytes of its write land; -1: half of them)."""
    proc = subprocess.run(
        [sys.executable, "-c", _KILLED_WRITER, str(data), AGENT, str(first), str(count), str(keep)],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    return [int(line) for line in proc.stdout.split()]


@pytest.mark.parametrize("keep", [3, 11, 30, -1], ids=["magic", "header", "payload", "half"])
def test_a_writer_killed_mid_append_in_the_zero_tail_loses_no_acknowledged_entry(
    tmp_path: Path, keep: int
) -> None:
    data = tmp_path / "data"
    acked = kill_mid_append(data, 1, 6, keep)
    assert acked == [1, 2, 3, 4, 5]
    (segment,) = segment_files(data, AGENT)
    torn = segment.read_bytes()
    assert len(torn.rstrip(b"\0")) > len(used(segment, sound=True))  # the torn bytes
    reader = LocalBackend(data)
    assert list(reader.list(layout.log_prefix(AGENT))) == [key(r) for r in acked]
    with pytest.raises(MissingObject):
        reader.get(key(6))
    assert segment.read_bytes() == torn  # a reader cuts nothing
    # The next writer (another process, killed again later) zeroes the torn bytes
    # and appends where they were; then a third one appends after it.
    acked += kill_mid_append(data, 6, 4, keep)
    assert acked == [1, 2, 3, 4, 5, 6, 7, 8]
    writer = LocalBackend(data)
    assert writer.put_if_absent(key(9), entry(9, "after"))
    assert [r for r, _p in sound_frames(data, AGENT)] == list(range(1, 10))
    assert segment.read_bytes().rstrip(b"\0") == used(segment, sound=True)  # none torn
    for revision in acked:
        assert json.loads(reader.get(key(revision)))["revision"] == revision
    assert reader.get(key(9)) == entry(9, "after")


def test_a_torn_header_whose_revision_reads_as_another_entry_s_hides_nothing(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    backend = LocalBackend(data)
    for revision in range(1, 6):
        assert backend.put_if_absent(key(revision), entry(revision))
    # Revision 261 is 0x105: a header cut after the revision's first byte reads as 5.
    assert kill_mid_append(data, 261, 1, segments.HEADER.size - 7) == []
    for reader in (LocalBackend(data), backend):
        assert [reader.get(key(r)) for r in range(1, 6)] == [entry(r) for r in range(1, 6)]
        assert not reader.put_if_absent(key(5), b"a second entry 5")
        with pytest.raises(MissingObject):
            reader.get(key(261))
    assert backend.put_if_absent(key(6), entry(6))
    assert [r for r, _p in sound_frames(data, AGENT)] == [1, 2, 3, 4, 5, 6]


def test_a_disk_too_full_for_new_zeros_still_takes_the_frame(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segments, "SEAL_COUNT", 3)
    backend = LocalBackend(tmp_path)
    real = os.pwrite

    def full(fd: int, data: bytes, offset: int) -> int:
        if len(data) > 4096:  # room for a frame, not for a new zero tail
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", full)
    for revision in range(1, 6):  # every append found no zeros: a frame each, acknowledged
        assert backend.put_if_absent(key(revision), entry(revision))
    monkeypatch.setattr(os, "pwrite", real)
    assert backend.put_if_absent(key(6), entry(6))  # room again: the tail grows zeros
    files = segment_files(tmp_path, AGENT)
    assert files[0].read_bytes() == used(files[0])  # sealed: no zero tail
    assert files[1].stat().st_size > len(used(files[1]))
    reader = LocalBackend(tmp_path)
    assert [reader.get(key(r)) for r in range(1, 7)] == [entry(r) for r in range(1, 7)]


def test_a_rotted_frame_before_the_zero_tail_is_damage_never_cut(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    for revision in (1, 2, 3):
        assert backend.put_if_absent(key(revision), entry(revision, "kept"))
    flip_entry(tmp_path, AGENT, 3, b"kept", b"kepT")  # the newest frame, zeros after it
    (segment,) = segment_files(tmp_path, AGENT)
    rotted = used(segment)
    other = LocalBackend(tmp_path)
    with pytest.raises(Damaged, match="memfs fsck") as caught:
        other.get(key(3))
    assert "checksum" in caught.value.reason
    assert not other.put_if_absent(key(3), b"x")  # still taken: never cut as torn
    assert other.put_if_absent(key(4), entry(4))  # appended after it
    assert used(segment) == rotted + segments.frame(4, entry(4))


def test_a_rotted_frame_before_an_erased_one_is_damage_never_cut(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    for revision in (1, 2, 3):
        assert backend.put_if_absent(key(revision), entry(revision, "kept") + bytes(600))
    backend.delete(key(3))  # the newest frame erased: zeros after frame 2 and after it
    (segment,) = segment_files(tmp_path, AGENT)
    flip_entry(tmp_path, AGENT, 2, b"kept", b"kepT")  # frame 2 rots (it holds zeros)
    rotted = used(segment)
    other = LocalBackend(tmp_path)
    with pytest.raises(Damaged, match="memfs fsck"):
        other.get(key(2))
    assert other.put_if_absent(key(4), entry(4))  # after the erased frame, nothing cut
    assert used(segment) == rotted + segments.frame(4, entry(4))


def test_frames_after_a_zeroed_header_are_damage_not_an_end(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    for revision in (1, 2, 3):
        assert backend.put_if_absent(key(revision), entry(revision))
    (segment,) = segment_files(tmp_path, AGENT)
    second = frames(segment)[1][2]
    raw = bytearray(segment.read_bytes())
    raw[second : second + segments.HEADER.size] = bytes(segments.HEADER.size)  # a lost sector
    segment.write_bytes(bytes(raw))
    reader = LocalBackend(tmp_path)
    assert reader.get(key(1)) == entry(1)
    with pytest.raises(Damaged, match="memfs fsck"):
        reader.get(key(3))
    with pytest.raises(Damaged):
        reader.put_if_absent(key(4), entry(4))
    assert segment.read_bytes() == bytes(raw)  # nothing cut, nothing appended


def test_sealing_cuts_the_zero_tail_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segments, "SEAL_COUNT", 3)
    backend = LocalBackend(tmp_path)
    for revision in range(1, 8):
        assert backend.put_if_absent(key(revision), entry(revision))
    files = segment_files(tmp_path, AGENT)
    assert [[r for _m, r, _o, _p in frames(f)] for f in files] == [[1, 2, 3], [4, 5, 6], [7]]
    for sealed in files[:-1]:  # a sealed segment ends at its last frame
        assert sealed.read_bytes() == used(sealed)
    assert files[-1].stat().st_size > len(used(files[-1]))  # the newest has zeros
    # A sealed segment cut short is still damage, zeros or not.
    files[0].write_bytes(used(files[0])[:-3])
    with pytest.raises(Damaged):
        LocalBackend(tmp_path).get(key(9))
