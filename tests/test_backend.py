"""The Backend contract (memfs.testing.backend_contract) run for every implementation,
plus LocalBackend's claims about real processes racing on one key."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memfs.canonical.backend import Backend, LocalBackend, MemoryBackend
from memfs.canonical.durable import TEMP_PREFIX
from memfs.testing.backend_contract import BackendContract, utf8_sorted


class TestMemoryBackend(BackendContract):
    def make_backend(self, tmp_path: Path) -> Backend:
        return MemoryBackend()


class TestLocalBackend(BackendContract):
    def make_backend(self, tmp_path: Path) -> Backend:
        return LocalBackend(tmp_path / "objects")


_SEGMENT = st.text(alphabet="ab.-/0é", min_size=1, max_size=6)


def _valid(key: str) -> bool:
    return all(p not in ("", ".", "..") for p in key.split("/"))


def _no_file_folder_clash(keys: set[str]) -> bool:
    # A file system can't hold "a" and "a/b" at once; neither may a store.
    return not any(other.startswith(key + "/") for key in keys for other in keys)


@settings(max_examples=20, deadline=None)
@given(
    keys=st.sets(_SEGMENT.filter(_valid), min_size=0, max_size=8).filter(_no_file_folder_clash),
    prefix=st.text(alphabet="ab.-/0é", max_size=3),
    start_after=st.text(alphabet="ab.-/0é", max_size=4),
)
def test_list_matches_a_sorted_filter(keys: set[str], prefix: str, start_after: str) -> None:
    expected = [
        k for k in utf8_sorted(keys) if k.startswith(prefix) and k.encode() > start_after.encode()
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for backend in (MemoryBackend(), LocalBackend(Path(tmp))):
            for key in keys:
                backend.put_if_absent(key, b"")
            assert list(backend.list(prefix, start_after=start_after)) == expected


# ---- LocalBackend with real processes ------------------------------------------------

PAYLOAD_BYTES = 4 * 1024 * 1024
WRITERS = 4
# Each round races on a fresh key; a torn file shows only when the reader runs inside
# the short window of a write, so several rounds make a broken publish hard to miss.
ROUNDS = 4


def _race_key(round_: int) -> str:
    return f"agents/racer-{round_}/.memfs/log/00000000000000000001.json"


_COMMON = textwrap.dedent(
    """
    import hashlib, json, os, sys, time
    from pathlib import Path
    from memfs.canonical.backend import LocalBackend, MissingObject

    SIZE = {size}
    ROUNDS = {rounds}

    def key(r):
        return f"agents/racer-{{r}}/.memfs/log/00000000000000000001.json"

    def payload(i):
        # Distinct per writer, so a torn or mixed file can't match any payload.
        return hashlib.sha256(str(i).encode()).digest() * (SIZE // 32)

    def wait_for(name):
        deadline = time.monotonic() + 60
        while not os.path.exists(name):
            if time.monotonic() > deadline:
                sys.exit("timed out waiting for " + name)
            time.sleep(0.0002)  # leave the CPUs to the reader and the winning writer
    """
).format(size=PAYLOAD_BYTES, rounds=ROUNDS)

_WRITER = _COMMON + textwrap.dedent(
    """
    root, i, sync = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    data = payload(i)
    backend = LocalBackend(Path(root))
    os.nice(5)  # on a busy machine the reader, not the writers, should get the CPU
    results = []
    for r in range(ROUNDS):
        Path(sync, f"ready-{i}-{r}").touch()
        wait_for(os.path.join(sync, f"go-{r}"))
        results.append(backend.put_if_absent(key(r), data))
        Path(sync, f"done-{i}-{r}").touch()
    print(json.dumps(results))
    """
)

_READER = _COMMON + textwrap.dedent(
    """
    root, writers, sync = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    known = {hashlib.sha256(payload(i)).hexdigest(): i for i in range(writers)}
    backend = LocalBackend(Path(root))
    rounds = []
    for r in range(ROUNDS):
        seen = {"missing": 0, "complete": 0, "torn": [], "winners": []}

        def look():
            try:
                data = backend.get(key(r))
            except MissingObject:
                seen["missing"] += 1
                return
            # A short read is torn for sure; only full-length ones are worth hashing.
            full = len(data) == SIZE
            who = known.get(hashlib.sha256(data).hexdigest()) if full else None
            if who is None:
                seen["torn"].append(len(data))
            else:
                seen["complete"] += 1
                if who not in seen["winners"]:
                    seen["winners"].append(who)

        look()  # before anyone writes: the key must be missing
        Path(sync, f"ready-reader-{r}").touch()
        stop = os.path.join(sync, f"stop-{r}")
        while not os.path.exists(stop):
            look()
        look()  # after every writer finished: the winner's payload
        rounds.append(seen)
    print(json.dumps(rounds))
    """
)


def _spawn(script: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.startswith(TEMP_PREFIX)]


def _finish(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return out


def _wait_for_files(folder: Path, names: set[str]) -> None:
    deadline = time.monotonic() + 60
    while not names <= set(os.listdir(folder)):
        assert time.monotonic() < deadline, f"never saw {sorted(names)}"
        time.sleep(0.002)


def test_processes_racing_put_if_absent(tmp_path: Path) -> None:
    root, sync = tmp_path / "objects", tmp_path / "sync"
    sync.mkdir()
    reader = _spawn(_READER, str(root), str(WRITERS), str(sync))
    writers = [_spawn(_WRITER, str(root), str(i), str(sync)) for i in range(WRITERS)]
    try:
        for r in range(ROUNDS):
            _wait_for_files(
                sync, {f"ready-{i}-{r}" for i in range(WRITERS)} | {f"ready-reader-{r}"}
            )
            (sync / f"go-{r}").touch()
            _wait_for_files(sync, {f"done-{i}-{r}" for i in range(WRITERS)})
            (sync / f"stop-{r}").touch()
        results = [json.loads(_finish(w)) for w in writers]
    finally:
        for r in range(ROUNDS):
            (sync / f"go-{r}").touch()
            (sync / f"stop-{r}").touch()
    seen = json.loads(_finish(reader))

    backend = LocalBackend(root)
    for r in range(ROUNDS):
        outcomes = [results[i][r] for i in range(WRITERS)]
        assert sorted(outcomes) == [False] * (WRITERS - 1) + [True], (r, outcomes)
        winner = outcomes.index(True)
        stored = backend.get(_race_key(r))
        assert len(stored) == PAYLOAD_BYTES
        assert stored == hashlib.sha256(str(winner).encode()).digest() * (PAYLOAD_BYTES // 32)
        assert seen[r]["torn"] == [], f"round {r}: a reader saw a partial object"
        assert seen[r]["missing"] >= 1 and seen[r]["complete"] >= 1
        assert seen[r]["winners"] == [winner]  # once visible, the object never changes
    assert _temp_files(root) == []
    assert list(backend.list("")) == sorted(_race_key(r) for r in range(ROUNDS))


def test_no_temp_files_left_and_list_skips_them(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    assert backend.put_if_absent("a/one", b"1")
    assert not backend.put_if_absent("a/one", b"other")
    assert _temp_files(tmp_path) == []
    # What a writer killed between its temp file and its link leaves behind:
    (tmp_path / "a" / f"{TEMP_PREFIX}deadbeef").write_bytes(b"half")
    (tmp_path / f"{TEMP_PREFIX}folder").mkdir()
    (tmp_path / f"{TEMP_PREFIX}folder" / "inner").write_bytes(b"x")
    assert list(backend.list("")) == ["a/one"]
    assert list(backend.list("a/")) == ["a/one"]


def test_local_objects_are_plain_files(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    backend.put_if_absent("agents/x/.memfs/agent.json", b"{}")
    assert (tmp_path / "agents" / "x" / ".memfs" / "agent.json").read_bytes() == b"{}"
    # A file put there by other means is an object too (the store is a plain folder).
    (tmp_path / "agents" / "x" / "extra").write_bytes(b"hand")
    assert backend.get("agents/x/extra") == b"hand"
    assert list(backend.list("agents/")) == ["agents/x/.memfs/agent.json", "agents/x/extra"]


def _iter_all(backend: Backend) -> Iterator[tuple[str, bytes]]:
    for key in backend.list(""):
        yield key, backend.get(key)


def test_memory_and_local_agree_on_a_mixed_history(tmp_path: Path) -> None:
    memory, local = MemoryBackend(), LocalBackend(tmp_path)
    steps: list[tuple[str, str]] = [
        ("put", "x/1"),
        ("put", "x/2"),
        ("put", "x/1"),
        ("delete", "x/1"),
        ("put", "x.y"),
        ("put", "x/1"),
        ("delete", "nope"),
    ]
    for n, (op, key) in enumerate(steps):
        for backend in (memory, local):
            if op == "put":
                backend.put_if_absent(key, str(n).encode())
            else:
                backend.delete(key)
    assert list(_iter_all(memory)) == list(_iter_all(local))
    assert list(_iter_all(local)) == [("x.y", b"4"), ("x/1", b"5"), ("x/2", b"1")]
