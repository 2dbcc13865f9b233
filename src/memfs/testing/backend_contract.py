"""The Backend contract: one suite every implementation runs.

A new backend runs the whole suite by subclassing::

    class TestMyBackend(BackendContract):
        def make_backend(self, tmp_path: Path) -> Backend:
            return MyBackend(...)

``tests/test_backend.py`` runs it for MemoryBackend and LocalBackend,
``tests/test_backend_s3.py`` for S3Backend on a real SeaweedFS.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from memfs.canonical.backend import Backend, MissingObject
from memfs.domain.paths import TEMP_PREFIX


def utf8_sorted(keys: list[str] | set[str]) -> list[str]:
    return sorted(keys, key=lambda k: k.encode())


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


class BackendContract:
    """What every Backend promises; subclasses say how to make one."""

    def make_backend(self, tmp_path: Path) -> Backend:
        raise NotImplementedError

    @pytest.fixture
    def backend(self, tmp_path: Path) -> Backend:
        return self.make_backend(tmp_path)

    def test_put_if_absent_creates_once_and_keeps_the_first_bytes(self, backend: Backend) -> None:
        assert backend.put_if_absent("a/b/c.json", b"first") is True
        assert backend.put_if_absent("a/b/c.json", b"second") is False
        assert backend.get("a/b/c.json") == b"first"

    def test_get_returns_exact_bytes(self, backend: Backend) -> None:
        data = bytes(range(256)) * 3 + b"\r\n\x00"
        backend.put_if_absent("k", data)
        assert backend.get("k") == data
        backend.put_if_absent("empty", b"")
        assert backend.get("empty") == b""

    def test_missing_object(self, backend: Backend) -> None:
        with pytest.raises(MissingObject):
            backend.get("nothing/here")
        backend.put_if_absent("file", b"x")
        backend.put_if_absent("dir/inner", b"y")
        # Below an object, and a "folder" that only holds objects, are not objects either.
        with pytest.raises(MissingObject):
            backend.get("file/below")
        with pytest.raises(MissingObject):
            backend.get("dir")

    def test_exists(self, backend: Backend) -> None:
        assert not backend.exists("a/x")
        backend.put_if_absent("a/x", b"1")
        assert backend.exists("a/x")
        assert not backend.exists("a")  # a prefix is not an object
        assert not backend.exists("a/x/y")

    def test_list_in_bytewise_order(self, backend: Backend) -> None:
        for key in reversed(TRICKY_KEYS):
            backend.put_if_absent(key, key.encode())
        expected = utf8_sorted(TRICKY_KEYS)
        assert list(backend.list("")) == expected
        assert list(backend.list("a")) == [k for k in expected if k.startswith("a")]
        assert list(backend.list("a/")) == ["a/x", "a/y/z", "a/yy", "a/é"]
        assert list(backend.list("a/y")) == ["a/y/z", "a/yy"]
        assert list(backend.list("a.b")) == ["a.b", "a.b.c/d"]
        assert list(backend.list("\u00e9")) == ["\u00e9/1"]
        assert list(backend.list("nope/")) == []
        assert list(backend.list("b/")) == []  # "b" is an object, not a folder

    def test_list_start_after(self, backend: Backend) -> None:
        for key in TRICKY_KEYS:
            backend.put_if_absent(key, b"")
        expected = utf8_sorted(TRICKY_KEYS)
        for i, key in enumerate(expected):
            assert list(backend.list("", start_after=key)) == expected[i + 1 :], key
        # start_after need not be a key, and may name a folder or lie inside one.
        assert list(backend.list("", start_after="a/")) == expected[expected.index("a/x") :]
        assert list(backend.list("", start_after="a/y/")) == expected[expected.index("a/y/z") :]
        assert list(backend.list("", start_after="a/z")) == expected[expected.index("a/é") :]
        assert (
            list(backend.list("", start_after="a/\U0010ffff")) == expected[expected.index("a0") :]
        )
        assert list(backend.list("a/", start_after="a/x")) == ["a/y/z", "a/yy", "a/é"]
        assert list(backend.list("a/", start_after="0")) == ["a/x", "a/y/z", "a/yy", "a/é"]
        assert list(backend.list("a/", start_after="b")) == []
        assert list(backend.list("", start_after=expected[-1])) == []
        assert expected[-1] == "\U0001f600/smile"  # 4-byte UTF-8 sorts after U+FFFF

    def test_start_after_a_folder_name_still_lists_the_folder(self, backend: Backend) -> None:
        # "a/x" > "a" bytewise, so AWS's StartAfter=a lists it; SeaweedFS's own
        # StartAfter skips every key below a folder named exactly like it.
        for key in ["a/x", "a/y/z", "a!", "a0", "b/c"]:
            backend.put_if_absent(key, b"")
        assert list(backend.list("", start_after="a")) == ["a!", "a/x", "a/y/z", "a0", "b/c"]
        assert list(backend.list("a", start_after="a")) == ["a!", "a/x", "a/y/z", "a0"]
        assert list(backend.list("a/", start_after="a/y")) == ["a/y/z"]
        assert list(backend.list("", start_after="b")) == ["b/c"]

    def test_delete_is_idempotent(self, backend: Backend) -> None:
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

    @pytest.mark.parametrize("key", INVALID_KEYS)
    def test_invalid_keys_are_refused(self, backend: Backend, key: str) -> None:
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

    def test_list_with_a_malformed_prefix_finds_nothing(
        self, backend: Backend, tmp_path: Path
    ) -> None:
        (tmp_path / "outside.txt").write_bytes(b"not an object")
        backend.put_if_absent("a/x", b"")
        backend.put_if_absent("0", b"")
        for prefix in ["//", "a//", "../", "../outside", "./", "a/../", "a/./"]:
            assert list(backend.list(prefix)) == [], prefix

    def test_a_folder_emptied_by_deletes_lists_nothing(self, backend: Backend) -> None:
        # Erasure deletes every key of an agent: nothing may be left to list, though
        # some stores keep the emptied folders (SeaweedFS lists them as markers).
        backend.put_if_absent("agent/log/1.json", b"1")
        backend.put_if_absent("agent/objects/ab/cd", b"2")
        backend.put_if_absent("other/x", b"3")
        for key in list(backend.list("agent/")):
            backend.delete(key)
        assert list(backend.list("agent/")) == []
        assert list(backend.list("")) == ["other/x"]
        assert not backend.exists("agent/log")
        with pytest.raises(MissingObject):
            backend.get("agent/log")

    # ---- log entries: the keys LocalBackend keeps in segments, not files ------------

    def test_log_entries_keep_the_contract(self, backend: Backend) -> None:
        log = "agents/a%2Fb/.memfs/log/"
        keys = [f"{log}{n:020d}.json" for n in (1, 2, 3, 10)]
        for key in reversed(keys):  # in any order, as a restore or a race may
            assert backend.put_if_absent(key, key.encode()) is True
        assert backend.put_if_absent(keys[0], b"again") is False
        assert backend.get(keys[0]) == keys[0].encode()
        backend.put_if_absent("agents/a%2Fb/.memfs/agent.json", b"{}")
        backend.put_if_absent("agents/a%2Fb/.memfs/objects/ab/cd", b"blob")
        backend.put_if_absent(f"{log}notes.txt", b"not an entry")
        assert list(backend.list("agents/a%2Fb/")) == [
            "agents/a%2Fb/.memfs/agent.json",
            *keys,
            f"{log}notes.txt",
            "agents/a%2Fb/.memfs/objects/ab/cd",
        ]
        assert list(backend.list(log, start_after=keys[1])) == [*keys[2:], f"{log}notes.txt"]
        assert backend.exists(keys[3]) and not backend.exists(f"{log}{4:020d}.json")
        with pytest.raises(MissingObject):
            backend.get(f"{log}{4:020d}.json")
        backend.delete(keys[1])
        assert not backend.exists(keys[1])
        with pytest.raises(MissingObject):
            backend.get(keys[1])
        assert list(backend.list(log)) == [keys[0], *keys[2:], f"{log}notes.txt"]
        assert backend.put_if_absent(keys[1], b"new") is True
        assert backend.get(keys[1]) == b"new"
        for key in list(backend.list("agents/")):
            backend.delete(key)
        assert list(backend.list("agents/")) == []
