"""Design §2: agent ids, memory paths and folder prefixes, checked before any use."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memfs.core.store import Store
from memfs.domain import paths
from memfs.errors import InvalidRequest

# ---- agent ids ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "a",
        "users/alice/assistant",
        "A.b_c-d/E9",
        "x/.hidden/y",  # a dot that is not a whole '.' or '..' segment is fine
        "...",
        "a" * 256,
        "/".join(["a" * 127, "b" * 128]),  # 256 bytes in two segments
    ],
)
def test_valid_agent_ids(value: str) -> None:
    assert paths.agent_id(value) == value


@pytest.mark.parametrize(
    "value",
    [
        "",
        "a" * 257,
        "/".join(["a" * 128, "b" * 128]),  # 257 bytes
        "/leading",
        "trailing/",
        "a//b",
        ".",
        "..",
        "a/./b",
        "a/../b",
        "../escape",
        "with space",
        "colon:x",
        "back\\slash",
        "caf\u00e9",
        "nul\x00",
        "new\nline",
        "percent%2F",
    ],
)
def test_invalid_agent_ids(value: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        paths.agent_id(value)
    assert caught.value.field == "agentId"


def test_agent_id_error_names_the_rule() -> None:
    with pytest.raises(InvalidRequest, match=r"users/alice/assistant"):
        paths.agent_id("bad id")
    with pytest.raises(InvalidRequest, match="256 bytes"):
        paths.agent_id("a" * 257)


def test_scopes_cover_on_segment_boundaries() -> None:
    assert paths.in_scope("users/alice", "users/alice")
    assert paths.in_scope("users/alice/assistant", "users/alice")
    assert not paths.in_scope("users/alice2/assistant", "users/alice")
    assert not paths.in_scope("users", "users/alice")
    assert paths.in_scope("anything/at/all", "*")


def test_long_agent_ids_get_distinct_short_folders() -> None:
    one, two = "a" * 255 + "b", "a" * 255 + "c"
    names = {paths.agent_dir_name(one), paths.agent_dir_name(two)}
    assert len(names) == 2
    assert all(len(name.encode()) <= 255 for name in names)
    assert paths.agent_dir_name("users/alice/assistant") == "users%2Falice%2Fassistant"


# ---- memory paths -------------------------------------------------------------------


def _path_of_bytes(total: int) -> str:
    """A /memories path of exactly ``total`` UTF-8 bytes with segments <= 255 bytes."""
    rest = total - len("/memories/")
    segments: list[str] = []
    while rest > 0:
        take = min(200, rest)
        if rest - take == 1:  # never leave a bare '/' for the last segment
            take -= 1
        segments.append("s" * take)
        rest -= take + 1
    value = "/memories/" + "/".join(segments)
    assert len(value.encode()) == total
    return value


@pytest.mark.parametrize(
    "value",
    [
        "/memories/a.md",
        "/memories/conventions/naming.md",
        "/memories/no-extension",
        "/memories/a b/with spaces.md",
        "/memories/\u65e5\u672c/\U0001f600.md",
        "/memories/.hidden",
        "/memories/...",
        "/memories/" + "x" * 255,
    ],
)
def test_valid_memory_paths(value: str) -> None:
    assert paths.memory_path(value) == value


def test_memory_path_length_limit_is_in_bytes() -> None:
    assert paths.memory_path(_path_of_bytes(1024)) == _path_of_bytes(1024)
    with pytest.raises(InvalidRequest, match="1024 bytes"):
        paths.memory_path(_path_of_bytes(1025))
    # 600 characters but 1210 bytes: refused.
    wide = "/memories/" + "/".join(["\u00e9" * 100] * 6)
    assert len(wide) <= 1024 < len(wide.encode())
    with pytest.raises(InvalidRequest):
        paths.memory_path(wide)


def test_segment_limit_is_255_bytes() -> None:
    assert paths.memory_path("/memories/" + "x" * 255)
    with pytest.raises(InvalidRequest, match="255 bytes"):
        paths.memory_path("/memories/" + "x" * 256)
    with pytest.raises(InvalidRequest, match="255 bytes"):
        paths.memory_path("/memories/" + "\u00e9" * 128)  # 256 bytes


def test_memory_paths_are_nfc_normalised() -> None:
    decomposed = "/memories/cafe\u0301/re\u0301sume\u0301.md"
    composed = unicodedata.normalize("NFC", decomposed)
    assert composed != decomposed
    assert paths.memory_path(decomposed) == composed


def test_a_decomposed_name_is_stored_under_the_composed_one(store: Store, agent: str) -> None:
    decomposed = "/memories/cafe\u0301.md"
    composed = "/memories/caf\u00e9.md"
    store.write(agent, decomposed, b"menu", actor="t")
    assert store.read(agent, composed).content == b"menu"
    assert store.read(agent, decomposed).content == b"menu"
    page, _ = store.list_memories(agent)
    assert [item.path for item in page] == [composed]
    # The working-tree file carries the composed name too.
    root = store.data_dir / "agents" / paths.agent_dir_name(agent) / "memories"
    assert [p.name for p in root.iterdir()] == ["caf\u00e9.md"]
    # Writing the other spelling is the same memory, not a second one.
    result = store.write(agent, composed, b"menu", actor="t")
    assert not result.changed


def test_memory_paths_are_case_sensitive(store: Store, agent: str) -> None:
    store.write(agent, "/memories/Notes.md", b"upper", actor="t")
    store.write(agent, "/memories/notes.md", b"lower", actor="t")
    assert store.read(agent, "/memories/Notes.md").content == b"upper"
    assert store.read(agent, "/memories/notes.md").content == b"lower"


@pytest.mark.parametrize(
    "value",
    [
        "",
        "a.md",
        "memories/a.md",
        "/memory/a.md",
        "/Memories/a.md",
        "/memoriesa.md",
        "/memories",
        "/memories/",
        "/memories//a.md",
        "/memories/a/",
        "/memories/a//b.md",
        "/memories/./a.md",
        "/memories/a/./b.md",
        "/memories/..",
        "/memories/../etc/passwd",
        "/memories/a/../b.md",
        "/memories/nul\x00.md",
        "/memories/tab\there.md",
        "/memories/new\nline.md",
        "/memories/cr\r.md",
        "/memories/esc\x1b.md",
        "/memories/del\x7f.md",
        "/memories/c1\x85.md",  # NEL, a C1 control character
        "/memories/c1\x9f.md",
        "/memories/back\\slash.md",
        "/memories/lone\ud800surrogate.md",
    ],
)
def test_invalid_memory_paths(value: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        paths.memory_path(value)
    assert caught.value.field == "path"


def test_invalid_path_is_refused_before_anything_is_written(store: Store, agent: str) -> None:
    before = sorted(p.relative_to(store.data_dir) for p in store.data_dir.rglob("*"))
    for bad in ["/memories/../../escape.md", "/memories/a\\b.md", "/etc/passwd"]:
        with pytest.raises(InvalidRequest):
            store.write(agent, bad, b"x", actor="t")
    after = sorted(p.relative_to(store.data_dir) for p in store.data_dir.rglob("*"))
    assert after == before
    assert not (store.data_dir.parent / "escape.md").exists()


# ---- folder prefixes ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", "/memories"),
        ("/memories", "/memories"),
        ("/memories/", "/memories"),
        ("conventions", "/memories/conventions"),
        ("conventions/", "/memories/conventions"),
        ("/memories/conventions", "/memories/conventions"),
        ("/memories/conventions/", "/memories/conventions"),
        ("a/b/c", "/memories/a/b/c"),
        ("memories", "/memories/memories"),  # relative: a folder named 'memories'
        ("cafe\u0301", "/memories/caf\u00e9"),
    ],
)
def test_folder_prefixes(value: str, expected: str) -> None:
    assert paths.folder_prefix(value) == expected


@pytest.mark.parametrize(
    "value",
    ["/other", "/memoriesx", "a//b", "../x", "a/../b", "./a", "a\\b", "a\x00"],
)
def test_invalid_folder_prefixes(value: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        paths.folder_prefix(value)
    assert caught.value.field == "pathPrefix"


def test_simple_ids() -> None:
    assert paths.simple_id("on-push.v2_x", field="triggerId") == "on-push.v2_x"
    assert paths.simple_id("k" * 128, field="keyId") == "k" * 128
    for bad in ["", "k" * 129, "a/b", ".", "..", "sp ace", "\u00e9"]:
        with pytest.raises(InvalidRequest):
            paths.simple_id(bad, field="triggerId")


# ---- the ASCII fast path of memory_path --------------------------------------------

# Segments built of pieces that matter to the checks: "git" in any case, dots, spaces,
# '~1', reserved and forbidden characters, long runs.
_ASCII_SEGMENT = st.lists(
    st.sampled_from(
        ["a", "G", "i", "T", "git", ".git", "GIT~1", "~", ".", " ", "-", "\\", "\x00",
         "\x1f", "\x7f", paths.TEMP_PREFIX, "x" * 130]
    ),
    max_size=6,
).map("".join)


def _verdict(check: Callable[[], None]) -> str | None:
    try:
        check()
    except InvalidRequest as exc:
        return exc.message
    return None


@settings(max_examples=400, deadline=None)
@given(st.lists(_ASCII_SEGMENT, min_size=1, max_size=10))
@example(["docs", ".Git. "])
@example(["gIt~1"])
@example(["a" * 256])
@example(["a" * 255] * 4 + ["b" * 10])
def test_an_ascii_path_is_judged_as_the_full_check_judges_it(segments: list[str]) -> None:
    # ASCII paths skip NFC, the byte count and the surrogate and .git scans when no
    # "git" is there: the same paths pass, and the same refusal names the same fault.
    value = "/memories/" + "/".join(segments)
    assert value.isascii()
    fast = _verdict(lambda: paths._check_segments(value, "path", ascii=True))
    full = _verdict(lambda: paths._check_segments(value, "path"))
    assert fast == full
