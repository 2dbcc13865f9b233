"""The Backend contract, one suite for every implementation, plus LocalBackend's
claims about real processes racing on one key."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memfs.canonical.backend import Backend, LocalBackend, MemoryBackend, MissingObject
from memfs.canonical.durable import TEMP_PREFIX


def _utf8_sorted(keys: list[str] | set[str]) -> list[str]:
    return sorted(keys, key=lambda k: k.encode())


@pytest.fixture(params=["memory", "local"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "memory":
        return MemoryBackend()
    return LocalBackend(tmp_path / "objects")


# ---- the contract -----------------------------------------------------------------


def test_put_if_absent_creates_once_and_keeps_the_first_bytes(backend: Backend) -> None:
    assert backend.put_if_absent("a/b/c.json", b"first") is True
    assert backend.put_if_absent("a/b/c.json", b"second") is False
    assert backend.get("a/b/c.json") == b"first"


def test_get_returns_exact_bytes(backend: Backend) -> None:
    data = bytes(range(256)) * 3 + b"\r\n\x00"
    backend.put_if_absent("k", data)
    assert backend.get("k") == data
    backend.put_if_absent("empty", b"")
    assert backend.get("empty") == b""


def test_missing_object(backend: Backend) -> None:
    with pytest.raises(MissingObject):
        backend.get("nothing/here")
    backend.put_if_absent("file", b"x")
    backend.put_if_absent("dir/inner", b"y")
    # Below an object, and a "folder" that only holds objects, are not objects either.
    with pytest.raises(MissingObject):
        backend.get("file/below")
    with pytest.raises(MissingObject):
        backend.get("dir")


def test_exists(backend: Backend) -> None:
    assert not backend.exists("a/x")
    backend.put_if_absent("a/x", b"1")
    assert backend.exists("a/x")
    assert not backend.exists("a")  # a prefix is not an object
    assert not backend.exists("a/x/y")


# Keys where bytewise order differs from naive per-folder order: '-' < '.' < '/' <
# '0', and non-ASCII names sort after every ASCII one.
TRICKY_KEYS = [
    "a!",
    "a-c",
    "a.b",
    "a.b.c/d",
    "a/x",
    "a/y/z",
    "a/yy",
    "a/é",
    "a0",
    "ab",
    "b",
    "z/\u00e9t\u00e9",
    "\u00e9/1",
    "\U0001f600/smile",
    "\uffff",
]


def test_list_in_bytewise_order(backend: Backend) -> None:
    for key in reversed(TRICKY_KEYS):
        backend.put_if_absent(key, key.encode())
    expected = _utf8_sorted(TRICKY_KEYS)
    assert list(backend.list("")) == expected
    assert list(backend.list("a")) == [k for k in expected if k.startswith("a")]
    assert list(backend.list("a/")) == ["a/x", "a/y/z", "a/yy", "a/é"]
    assert list(backend.list("a/y")) == ["a/y/z", "a/yy"]
    assert list(backend.list("a.b")) == ["a.b", "a.b.c/d"]
    assert list(backend.list("\u00e9")) == ["\u00e9/1"]
    assert list(backend.list("nope/")) == []
    assert list(backend.list("b/")) == []  # "b" is an object, not a folder


def test_list_start_after(backend: Backend) -> None:
    for key in TRICKY_KEYS:
        backend.put_if_absent(key, b"")
    expected = _utf8_sorted(TRICKY_KEYS)
    for i, key in enumerate(expected):
        assert list(backend.list("", start_after=key)) == expected[i + 1 :], key
    # start_after need not be a key, and may name a folder or lie inside one.
    assert list(backend.list("", start_after="a/")) == expected[expected.index("a/x") :]
    assert list(backend.list("", start_after="a/y/")) == expected[expected.index("a/y/z") :]
    assert list(backend.list("", start_after="a/z")) == expected[expected.index("a/é") :]
    assert list(backend.list("", start_after="a/\U0010ffff")) == expected[expected.index("a0") :]
    assert list(backend.list("a/", start_after="a/x")) == ["a/y/z", "a/yy", "a/é"]
    assert list(backend.list("a/", start_after="0")) == ["a/x", "a/y/z", "a/yy", "a/é"]
    assert list(backend.list("a/", start_after="b")) == []
    assert list(backend.list("", start_after=expected[-1])) == []
    assert expected[-1] == "\U0001f600/smile"  # 4-byte UTF-8 sorts after U+FFFF


def test_delete_is_idempotent(backend: Backend) -> None:
    backend.put_if_absent("a/b", b"1")
    backend.put_if_absent("a/c", b"2")
    backend.delete("a/b")
    assert not backend.exists("a/b")
    with pytest.raises(MissingObject):
        backend.get("a/b")
    backend.delete("a/b")
    backend.delete("never/was")
    backend.delete("a")  # a folder is not an object: nothing happens
    assert list(backend.list("")) == ["a/c"]
    # A deleted key can be created again (erasure, then a new agent of the same id).
    assert backend.put_if_absent("a/b", b"3") is True
    assert backend.get("a/b") == b"3"


INVALID_KEYS = [
    "",
    "/abs",
    "trailing/",
    "a//b",
    ".",
    "..",
    "../escape",
    "a/../b",
    "a/./b",
    "nul\x00byte",
    TEMP_PREFIX + "x",
    f"a/{TEMP_PREFIX}1/b",
]


@pytest.mark.parametrize("key", INVALID_KEYS)
def test_invalid_keys_are_refused(backend: Backend, key: str) -> None:
    operations: list[Callable[[], object]] = [
        lambda: backend.put_if_absent(key, b"x"),
        lambda: backend.get(key),
        lambda: backend.exists(key),
        lambda: backend.delete(key),
    ]
    for operation in operations:
        with pytest.raises(ValueError):
            operation()
    assert list(backend.list("")) == []


def test_list_with_a_malformed_prefix_finds_nothing(backend: Backend, tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_bytes(b"not an object")
    backend.put_if_absent("a/x", b"")
    backend.put_if_absent("0", b"")
    for prefix in ["//", "a//", "../", "../outside", "./", "a/../", "a/./"]:
        assert list(backend.list(prefix)) == [], prefix


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
        k for k in _utf8_sorted(keys) if k.startswith(prefix) and k.encode() > start_after.encode()
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
