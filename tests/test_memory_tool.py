"""memfs's memory tool against the SDK's own: same commands, same texts."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from anthropic.lib.tools._tool_dispatch import tool_error_content, tool_result_content
from anthropic.tools import BetaLocalFilesystemMemoryTool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memfs.domain.memory_tool import ToolResult, execute
from memfs.errors import Conflict, InvalidRequest, NotFound

ROOT = "/memories"
_BAD_CHARS = re.compile(r"[\x00-\x1f\x7f\\]")


class DictStore:
    """A ToolStore in a dict, refusing what the real store refuses."""

    memory_bytes = 64 * 1024 * 1024  # the SCRIPT's big file fits: the limit is tested elsewhere

    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.commits = 0

    def _check(self, path: str) -> None:
        segments = path.split("/")
        if (
            not path.startswith(ROOT + "/")
            or _BAD_CHARS.search(path)
            or any(s in ("", ".", "..") for s in segments[1:])
        ):
            raise InvalidRequest(f"invalid path {path!r}", field="path")

    def read_file(self, path: str) -> str | None:
        self._check(path)
        return self.files.get(path)

    def is_folder(self, path: str) -> bool:
        return path == ROOT or any(p.startswith(path + "/") for p in self.files)

    def files_under(self, folder: str) -> list[tuple[str, int]]:
        return sorted(
            ((p, len(c.encode())) for p, c in self.files.items() if p.startswith(folder + "/")),
            key=lambda item: item[0].encode(),
        )

    def _check_writable(self, path: str) -> None:
        self._check(path)
        parent = path.rsplit("/", 1)[0]
        while parent != ROOT:
            if parent in self.files:
                raise Conflict(f"{parent} is a file")
            parent = parent.rsplit("/", 1)[0]
        if self.is_folder(path):
            raise Conflict(f"{path} is a folder")

    def write_file(self, path: str, content: str, *, create_only: bool) -> None:
        self._check_writable(path)
        if create_only and path in self.files:
            raise Conflict(f"{path} exists")
        self.files[path] = content
        self.commits += 1

    def delete_paths(self, paths: list[str]) -> None:
        for path in paths:
            if path not in self.files:
                raise NotFound(path)
        for path in paths:
            del self.files[path]
        self.commits += 1

    def move_paths(self, moves: list[tuple[str, str]]) -> None:
        moved = {old: self.files.pop(old) for old, _ in moves}
        for old, new in moves:
            self._check_writable(new)
            self.files[new] = moved[old]
        self.commits += 1


def sdk_execute(tool: BetaLocalFilesystemMemoryTool, command: Mapping[str, object]) -> ToolResult:
    """What the SDK's tool runner sends the model (its ``_run_tool``)."""
    try:
        content = tool_result_content(tool.call(dict(command)))
        ok = True
    except Exception as exc:  # the runner turns ToolError and any other error alike
        content = tool_error_content(exc)
        ok = False
    assert isinstance(content, str)
    return ToolResult(ok, content)


def _prune_empty_dirs(root: Path) -> None:
    # memfs folders exist only while they hold a file; make the SDK's tree agree.
    for dirpath, _dirs, _files in os.walk(root, topdown=False):
        if Path(dirpath) != root and not os.listdir(dirpath):
            os.rmdir(dirpath)


def _sdk_files(root: Path) -> dict[str, str]:
    return {
        f"{ROOT}/{p.relative_to(root).as_posix()}": p.read_bytes().decode()
        for p in root.rglob("*")
        if p.is_file()
    }


# Directory sizes are up to the filesystem (4096 on ext4, other sizes on tmpfs).
_DIR_LINE = re.compile(r"^\d+(?:\.\d)?[BKMG]\t(?=.*/$)", re.M)


def _normalise(result: ToolResult) -> ToolResult:
    text = result.result
    if text.startswith("Here're the files"):
        header, first, *rest = text.split("\n")
        first = "4K\t" + first.split("\t", 1)[1]
        text = "\n".join([header, first, *(_DIR_LINE.sub("4K\t", line) for line in rest)])
    return ToolResult(result.ok, text)


class Pair:
    """The SDK tool on a temp dir and ``execute`` on a dict store, in step."""

    def __init__(self, base: str) -> None:
        self.sdk = BetaLocalFilesystemMemoryTool(base)
        self.root = Path(base) / "memories"
        self.store = DictStore()

    def run(self, command: Mapping[str, object]) -> ToolResult:
        expected = _normalise(sdk_execute(self.sdk, command))
        _prune_empty_dirs(self.root)
        got = execute(self.store, command)
        assert got == expected, command
        assert self.store.files == _sdk_files(self.root), command
        return got


LONG = "\n".join(f"line {i}" for i in range(1, 11)) + "\n"

# (command, expected ok); every text is compared with the SDK's.
SCRIPT: list[tuple[dict[str, object], bool]] = [
    ({"command": "view", "path": "/memories"}, True),
    ({"command": "view", "path": "/memories/"}, True),
    ({"command": "create", "path": "/memories/notes.md", "file_text": LONG}, True),
    ({"command": "create", "path": "/memories/notes.md", "file_text": "again"}, False),
    ({"command": "create", "path": "/memories/a/b/c/deep.md", "file_text": "deep\n"}, True),
    ({"command": "create", "path": "/memories/a/b/x.md", "file_text": "x" * 1536}, True),
    ({"command": "create", "path": "/memories/a/top.md", "file_text": ""}, True),
    ({"command": "create", "path": "/memories/a-b.md", "file_text": "é" * 3000}, True),
    ({"command": "create", "path": "/memories/a/.hidden.md", "file_text": "h"}, True),
    ({"command": "create", "path": "/memories/.secret/s.md", "file_text": "s"}, True),
    ({"command": "create", "path": "/memories/big.md", "file_text": "z" * 1536 * 1024}, True),
    ({"command": "create", "path": "/memories/crlf.md", "file_text": "one\r\ntwo\r\n"}, True),
    ({"command": "create", "path": "/memories/a", "file_text": "folder"}, False),
    ({"command": "create", "path": "/memories", "file_text": "root"}, False),
    ({"command": "create", "path": "/memories/notes.md/x.md", "file_text": "x"}, False),
    ({"command": "create", "path": "/memories/notes.md/y/x.md", "file_text": "x"}, False),
    ({"command": "create", "path": "/etc/passwd", "file_text": "x"}, False),
    ({"command": "create", "path": "/memories/../escape.md", "file_text": "x"}, False),
    ({"command": "create", "path": "/memories/a/../../x.md", "file_text": "x"}, False),
    ({"command": "create", "path": "/memories/../memoriesx/y.md", "file_text": "x"}, False),
    ({"command": "create", "path": "/memories/a/./../dots.md", "file_text": "d"}, True),
    ({"command": "create", "path": "/memoriesquirk.md", "file_text": "q"}, True),
    ({"command": "create", "path": "/memories//double//slash.md", "file_text": "d"}, True),
    ({"command": "create", "path": "/memories/trail.md/", "file_text": "t"}, True),
    ({"command": "view", "path": "/memories"}, True),
    ({"command": "view", "path": "/memories/"}, True),
    ({"command": "view", "path": "/memories/a"}, True),
    ({"command": "view", "path": "/memories/a/b/"}, True),
    ({"command": "view", "path": "/memories/.secret"}, True),
    ({"command": "view", "path": "/memories/notes.md"}, True),
    ({"command": "view", "path": "/memories/notes.md/"}, True),
    ({"command": "view", "path": "/memories/a/top.md"}, True),
    ({"command": "view", "path": "/memories/crlf.md"}, True),
    ({"command": "view", "path": "/memoriesquirk.md"}, True),
    ({"command": "view", "path": "/memories/notes.md", "view_range": [2, 4]}, True),
    ({"command": "view", "path": "/memories/notes.md", "view_range": [3, -1]}, True),
    ({"command": "view", "path": "/memories/notes.md", "view_range": [0, 2]}, True),
    ({"command": "view", "path": "/memories/notes.md", "view_range": [-5, 1]}, True),
    ({"command": "view", "path": "/memories/notes.md", "view_range": [5, 2]}, True),
    ({"command": "view", "path": "/memories/notes.md", "view_range": [50, 60]}, True),
    ({"command": "view", "path": "/memories/notes.md", "view_range": [2, -3]}, True),
    ({"command": "view", "path": "/memories/notes.md", "view_range": [9, 1000]}, True),
    ({"command": "view", "path": "/memories/notes.md", "view_range": [1, 2, 3]}, True),
    ({"command": "view", "path": "/memories/notes.md", "view_range": [4]}, True),
    ({"command": "view", "path": "/memories/notes.md", "view_range": []}, True),
    ({"command": "view", "path": "/memories/notes.md", "view_range": None}, True),
    ({"command": "view", "path": "/memories/missing.md"}, False),
    ({"command": "view", "path": "/memories/notes.md/inside"}, False),
    ({"command": "view", "path": "/other"}, False),
    ({"command": "view", "path": ""}, False),
    ({"command": "view", "path": "memories/notes.md"}, False),
    ({"command": "view", "path": "/memories/.."}, False),
    ({"command": "view", "path": "/memories/a/\x00"}, False),
    (
        {
            "command": "str_replace",
            "path": "/memories/notes.md",
            "old_str": "line 5",
            "new_str": "five",
        },
        True,
    ),
    (
        {
            "command": "str_replace",
            "path": "/memories/notes.md",
            "old_str": "line 1",
            "new_str": "x",
        },
        False,
    ),
    (
        {"command": "str_replace", "path": "/memories/notes.md", "old_str": "nope", "new_str": "x"},
        False,
    ),
    (
        {"command": "str_replace", "path": "/memories/notes.md", "old_str": "e", "new_str": "E"},
        False,
    ),
    (
        {"command": "str_replace", "path": "/memories/notes.md", "old_str": "", "new_str": "x"},
        False,
    ),
    (
        {"command": "str_replace", "path": "/memories/a/top.md", "old_str": "", "new_str": "top\n"},
        True,
    ),
    (
        {
            "command": "str_replace",
            "path": "/memories/notes.md",
            "old_str": "line 10\n",
            "new_str": "",
        },
        True,
    ),
    (
        {
            "command": "str_replace",
            "path": "/memories/notes.md",
            "old_str": "line 2\n",
            "new_str": "2\n2b\n",
        },
        True,
    ),
    (
        {"command": "str_replace", "path": "/memories/crlf.md", "old_str": "two\r", "new_str": "2"},
        True,
    ),
    (
        {"command": "str_replace", "path": "/memories/missing.md", "old_str": "a", "new_str": "b"},
        False,
    ),
    ({"command": "str_replace", "path": "/memories/a", "old_str": "a", "new_str": "b"}, False),
    ({"command": "str_replace", "path": "/memories", "old_str": "a", "new_str": "b"}, False),
    (
        {"command": "str_replace", "path": "/memories/notes.md/x", "old_str": "a", "new_str": "b"},
        False,
    ),
    ({"command": "str_replace", "path": "/tmp/x", "old_str": "a", "new_str": "b"}, False),
    (
        {
            "command": "insert",
            "path": "/memories/notes.md",
            "insert_line": 0,
            "insert_text": "first\n",
        },
        True,
    ),
    (
        {"command": "insert", "path": "/memories/notes.md", "insert_line": 3, "insert_text": "mid"},
        True,
    ),
    (
        {
            "command": "insert",
            "path": "/memories/notes.md",
            "insert_line": 12,
            "insert_text": "end\n\n",
        },
        True,
    ),
    (
        {"command": "insert", "path": "/memories/notes.md", "insert_line": 14, "insert_text": "x"},
        False,
    ),
    (
        {"command": "insert", "path": "/memories/notes.md", "insert_line": -1, "insert_text": "x"},
        False,
    ),
    (
        {"command": "insert", "path": "/memories/a/top.md", "insert_line": 1, "insert_text": ""},
        True,
    ),
    (
        {
            "command": "insert",
            "path": "/memories/crlf.md",
            "insert_line": 1,
            "insert_text": "mid\r\n",
        },
        True,
    ),
    (
        {"command": "insert", "path": "/memories/missing.md", "insert_line": 0, "insert_text": "x"},
        False,
    ),
    ({"command": "insert", "path": "/memories/a/b", "insert_line": 0, "insert_text": "x"}, False),
    ({"command": "insert", "path": "/nope", "insert_line": 0, "insert_text": "x"}, False),
    ({"command": "view", "path": "/memories/notes.md"}, True),
    ({"command": "view", "path": "/memories/a/top.md"}, True),
    ({"command": "view", "path": "/memories/crlf.md", "view_range": [2, -1]}, True),
    (
        {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/a-b.md"},
        False,
    ),
    ({"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/a"}, False),
    ({"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories"}, False),
    ({"command": "rename", "old_path": "/memories", "new_path": "/memories/new"}, False),
    ({"command": "rename", "old_path": "/memories/", "new_path": "/memories/new"}, False),
    ({"command": "rename", "old_path": "/memories/gone.md", "new_path": "/memories/new.md"}, False),
    (
        {"command": "rename", "old_path": "/memories/no/gone.md", "new_path": "/memories/n/new.md"},
        False,
    ),
    (
        {"command": "rename", "old_path": "/memories/gone.md", "new_path": "/memories/notes.md/x"},
        False,
    ),
    (
        {
            "command": "rename",
            "old_path": "/memories/no/gone.md",
            "new_path": "/memories/notes.md/x",
        },
        False,
    ),
    (
        {
            "command": "rename",
            "old_path": "/memories/no/gone.md",
            "new_path": "/memories/notes.md/y/x",
        },
        False,
    ),
    (
        {"command": "rename", "old_path": "/memories/notes.md/q", "new_path": "/memories/q.md"},
        False,
    ),
    (
        {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/notes.md/x"},
        False,
    ),
    ({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/a/b/inner"}, False),
    (
        {"command": "rename", "old_path": "/memories/a", "new_path": "/memories/a/top.md/inner"},
        False,
    ),
    ({"command": "rename", "old_path": "/memories/a", "new_path": "/memories/../a"}, False),
    ({"command": "rename", "old_path": "/outside", "new_path": "/memories/x"}, False),
    ({"command": "rename", "old_path": "/memories/notes.md", "new_path": "/elsewhere"}, False),
    (
        {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/n/notes.md"},
        True,
    ),
    ({"command": "rename", "old_path": "/memories/a/b", "new_path": "/memories/moved/b2"}, True),
    ({"command": "rename", "old_path": "/memories/a-b.md", "new_path": "/memories/a/b.md"}, True),
    (
        {"command": "rename", "old_path": "/memoriesquirk.md", "new_path": "/memories/quirk2.md"},
        True,
    ),
    ({"command": "view", "path": "/memories"}, True),
    ({"command": "view", "path": "/memories/moved"}, True),
    ({"command": "delete", "path": "/memories"}, False),
    ({"command": "delete", "path": "/memories/"}, False),
    ({"command": "delete", "path": "/memories/a/.."}, False),
    ({"command": "delete", "path": "/memories/missing.md"}, False),
    ({"command": "delete", "path": "/memories/n/notes.md/x"}, False),
    ({"command": "delete", "path": "/home"}, False),
    ({"command": "delete", "path": "/memories/../x"}, False),
    ({"command": "delete", "path": "/memories/n/notes.md"}, True),
    ({"command": "delete", "path": "/memories/n/notes.md"}, False),
    ({"command": "delete", "path": "/memories/moved"}, True),
    ({"command": "delete", "path": "/memories/moved/b2/x.md"}, False),
    ({"command": "view", "path": "/memories/moved"}, False),
    ({"command": "view", "path": "/memories"}, True),
    ({"command": "frobnicate", "path": "/memories"}, False),
]


def test_same_texts_as_the_sdk(tmp_path: Path) -> None:
    pair = Pair(str(tmp_path))
    for command, ok in SCRIPT:
        assert pair.run(command).ok is ok, command


def test_line_limit(tmp_path: Path) -> None:
    pair = Pair(str(tmp_path))
    lines = "x\n" * 999_999 + "end"  # one line too many
    pair.run({"command": "create", "path": "/memories/huge.md", "file_text": lines})
    assert not pair.run({"command": "view", "path": "/memories/huge.md"}).ok
    pair.run(
        {"command": "str_replace", "path": "/memories/huge.md", "old_str": "\nend", "new_str": ""}
    )
    assert pair.run({"command": "view", "path": "/memories/huge.md", "view_range": [1, 2]}).ok


def test_many_matches_stay_linear() -> None:
    store = DictStore()
    store.files = {"/memories/big.md": "a\n" * 200_000}
    command = {"command": "str_replace", "path": "/memories/big.md", "old_str": "a", "new_str": ""}
    result = execute(store, command)
    assert result.result.endswith(", 199999, 200000. Please ensure it is unique")


def test_view_output_format() -> None:
    store = DictStore()
    store.files = {"/memories/a/b.md": "one\ntwo", "/memories/a-b.md": "x" * 1536}
    listing = execute(store, {"command": "view", "path": "/memories"})
    assert listing == ToolResult(
        True,
        "Here're the files and directories up to 2 levels deep in /memories, "
        "excluding hidden items:\n4K\t/memories\n4K\t/memories/a/\n"
        "7B\t/memories/a/b.md\n1.5K\t/memories/a-b.md",
    )
    file_view = execute(store, {"command": "view", "path": "/memories/a/b.md"})
    assert file_view.result.endswith("\n     1\tone\n     2\ttwo")


@pytest.mark.parametrize(
    ("command", "text"),
    [
        ({}, "Error: `command` must be one of"),
        ({"command": 3}, "Error: `command` must be one of"),
        ({"command": "view"}, "Error: `path` must be a string"),
        ({"command": "view", "path": 5}, "Error: `path` must be a string"),
        ({"command": "view", "path": "/memories", "view_range": ["a", 2]}, "Error: `view_range`"),
        ({"command": "view", "path": "/memories", "view_range": "1-2"}, "Error: `view_range`"),
        ({"command": "create", "path": "/memories/x.md"}, "Error: `file_text` must be"),
        (
            {"command": "create", "path": "/memories/x.md", "file_text": "\ud800"},
            "Error: `file_text`",
        ),
        (
            {"command": "insert", "path": "/memories/x.md", "insert_line": "1", "insert_text": ""},
            "Error: `insert_line`",
        ),
        (
            {"command": "insert", "path": "/memories/x.md", "insert_line": True, "insert_text": ""},
            "Error: `insert_line`",
        ),
        (
            {
                "command": "insert",
                "path": "/memories/x.md",
                "insert_line": 10**5000,
                "insert_text": "",
            },
            "Error: `insert_line`",
        ),
        (
            {"command": "view", "path": "/memories", "view_range": [1, -(10**5000)]},
            "Error: `view_range`",
        ),
        ({"command": "rename", "old_path": "/memories/x.md"}, "Error: `new_path` must be"),
        (
            {"command": "create", "path": "/memories/a\\b.md", "file_text": ""},
            "The path /memories/a\\b.md contains a control character or backslash",
        ),
        (
            {"command": "view", "path": "/memories/a\tb.md"},
            "The path /memories/a\tb.md contains a control character or backslash",
        ),
        ({"command": "bogus"}, "NotImplementedError('Unknown command: bogus')"),
    ],
)
def test_malformed_commands_are_refused(command: dict[str, object], text: str) -> None:
    result = execute(DictStore(), command)
    assert not result.ok
    assert result.result.startswith(text)


def test_documented_limits_are_the_only_other_refusals() -> None:
    store = DictStore()
    store.memory_bytes = 10
    store.files = {"/memories/f/a.md": "1234567890", "/memories/d/" + "n" * 250: "x"}
    long_path = "/memories/" + "/".join(["p" * 200] * 6)
    deep = "/memories/" + "/".join(["e" * 250] * 3 + ["e" * 20])  # 783 bytes
    cases = [
        (
            {"command": "view", "path": long_path},
            f"The path {long_path} exceeds the maximum length of 1,024 bytes.",
        ),
        (
            {"command": "create", "path": "/memories/" + "s" * 256, "file_text": ""},
            f"The path /memories/{'s' * 256} has a name longer than the maximum of 255 bytes.",
        ),
        (
            {"command": "create", "path": "/memories/big.md", "file_text": "x" * 11},
            "File /memories/big.md exceeds maximum size of 10 bytes.",
        ),
        (
            {"command": "insert", "path": "/memories/f/a.md", "insert_line": 0, "insert_text": "y"},
            "File /memories/f/a.md exceeds maximum size of 10 bytes.",
        ),
        (
            {"command": "str_replace", "path": "/memories/f/a.md", "old_str": "1", "new_str": "11"},
            "File /memories/f/a.md exceeds maximum size of 10 bytes.",
        ),
        (
            {"command": "create", "path": "/memories/.memfs-tmp-x", "file_text": ""},
            "The path /memories/.memfs-tmp-x can't be used: a path segment can't start with",
        ),
        (
            # the folder's name fits, the file inside it would not
            {"command": "rename", "old_path": "/memories/d", "new_path": deep},
            f"The path {deep} exceeds the maximum length of 1,024 bytes.",
        ),
    ]
    for command, text in cases:
        result = execute(store, command)
        assert (result.ok, result.result[: len(text)]) == (False, text), command
    assert store.commits == 0


def test_lost_create_race_reads_as_already_exists() -> None:
    class Racing(DictStore):
        def write_file(self, path: str, content: str, *, create_only: bool) -> None:
            raise Conflict("created meanwhile")

    result = execute(Racing(), {"command": "create", "path": "/memories/x.md", "file_text": ""})
    assert result == ToolResult(False, "File /memories/x.md already exists")


def test_each_change_is_one_commit() -> None:
    store = DictStore()
    store.files = {f"/memories/d/{i}.md": str(i) for i in range(5)}
    assert execute(
        store, {"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}
    ).ok
    assert execute(store, {"command": "delete", "path": "/memories/e"}).ok
    assert store.commits == 2 and store.files == {}


# -- property tests -------------------------------------------------------

_FIELDS = ["command", "path", "view_range", "file_text", "old_str", "new_str",
           "insert_line", "insert_text", "old_path", "new_path"]  # fmt: skip
_COMMAND_NAMES = ["view", "create", "str_replace", "insert", "delete", "rename"]
_SEGMENTS = ["a", "b.md", "c", ".h", "..", ".", ""]
_paths = st.builds(
    lambda prefix, parts: prefix + "/".join(parts),
    st.sampled_from(["/memories/", "/memories", "/memoriesx/", "/mem/", "", "memories/"]),
    st.lists(st.sampled_from(_SEGMENTS), max_size=4),
)
_texts = st.text(alphabet="ab\n\r", max_size=8)
_any_value: st.SearchStrategy[object] = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), _texts, _paths, st.text(),
    st.lists(st.integers(), max_size=3), st.lists(st.text(), max_size=2),
    st.dictionaries(st.text(), st.integers(), max_size=2),
)  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(st.sampled_from(_FIELDS), _any_value, max_size=6),
    st.sampled_from([*_COMMAND_NAMES, "undo", ""]),
    st.booleans(),
)
def test_random_commands_never_raise(fields: dict[str, object], name: str, set_name: bool) -> None:
    store = DictStore()
    store.files = {"/memories/a/b.md": "ab\nab\n", "/memories/c": "x"}
    command = {**fields, "command": name} if set_name else fields
    result = execute(store, command)
    assert isinstance(result, ToolResult) and isinstance(result.result, str)


_line = st.integers(min_value=-2, max_value=6)
_commands = st.one_of(
    st.fixed_dictionaries(
        {"command": st.just("view"), "path": _paths},
        optional={"view_range": st.lists(_line, min_size=0, max_size=3)},
    ),
    st.fixed_dictionaries({"command": st.just("create"), "path": _paths, "file_text": _texts}),
    st.fixed_dictionaries(
        {"command": st.just("str_replace"), "path": _paths, "old_str": _texts, "new_str": _texts}
    ),
    st.fixed_dictionaries(
        {"command": st.just("insert"), "path": _paths, "insert_line": _line, "insert_text": _texts}
    ),
    st.fixed_dictionaries({"command": st.just("delete"), "path": _paths}),
    st.fixed_dictionaries({"command": st.just("rename"), "old_path": _paths, "new_path": _paths}),
)


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(_commands, min_size=1, max_size=12))
def test_random_sessions_match_the_sdk(commands: Sequence[Mapping[str, object]]) -> None:
    with tempfile.TemporaryDirectory() as base:
        pair = Pair(base)
        for command in commands:
            pair.run(command)
