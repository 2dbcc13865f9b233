"""Property: any path and any content either is refused with a memfs error or round-trips.

Hypothesis throws arbitrary memory paths (``..``, ``.``, empty segments, slashes,
backslashes, NUL, control characters, very long names, RTL text, emoji, combining
characters, lone surrogates, the reserved temp prefix) and contents (YAML frontmatter
from ``yaml.safe_dump`` of random mappings, random text, random bytes, oversize) at
one shared store. Each write either raises InvalidRequest / PayloadTooLarge /
Conflict, or succeeds; on success the bytes read back are identical, and the working
tree file that holds them resolves to a place inside the agent's ``memories/`` folder
and holds exactly those bytes. Nothing is ever written outside the data folder.
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from memfs.canonical import layout
from memfs.core.store import Store
from memfs.derived.worktree import WorkTree
from memfs.domain.paths import memory_path
from memfs.errors import Conflict, InvalidRequest, PayloadTooLarge

AGENT = "round/trip"
LIMIT = 100 * 1024
T = TypeVar("T")

SPECIAL_SEGMENTS = [
    ".",
    "..",
    "",
    "...",
    " ",
    "a\\b",
    "\\",
    "..\\..",
    "\x00",
    "a\x00b",
    "\x1b[31mred",
    "line\nbreak",
    "tab\t",
    "\x7f",
    "\u202egnp.exe",
    "\u200f\u05e9\u05dc\u05d5\u05dd",
    "مرحبا",
    "😀",
    "👩\u200d👩\u200d👧",
    "e\u0301",
    "\u00e9",
    "A\u030a",
    "\ufeff",
    "\u200b",
    "x" * 255,
    "é" * 127,
    "é" * 128,
    "x" * 256,
    ".memfs-tmp-0123456789abcdef",
    ".memfs",
    "memories",
    "~",
    "-",
    "CON",
    "a:b",
    '*?<>|"',
    "%2e%2e",
    "%2F",
    "\ud800",
    "\udfff",
    "\U0010ffff",
]

segments = st.one_of(
    st.sampled_from(SPECIAL_SEGMENTS),
    st.text(max_size=16),
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=300),
)

# Segments that may well be valid: any printable text, including RTL, emoji,
# combining characters and the long and odd names above.
_printable = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cc", "Cs"), exclude_characters="/\\"),
    min_size=1,
    max_size=40,
)


def _valid_segment(segment: str) -> bool:
    try:
        memory_path("/memories/" + segment)
    except InvalidRequest:
        return False
    return "/" not in segment


fair_segments = st.one_of(
    _printable, _printable, st.sampled_from([s for s in SPECIAL_SEGMENTS if _valid_segment(s)])
)
fair_paths = st.lists(fair_segments, min_size=1, max_size=4).map(
    lambda s: "/memories/" + "/".join(s)
)


def _weighted(*choices: tuple[int, st.SearchStrategy[T]]) -> st.SearchStrategy[T]:
    """one_of with weights (one_of folds identical branches into one)."""
    pool = [strategy for weight, strategy in choices for _ in range(weight)]
    return st.sampled_from(pool).flatmap(lambda strategy: strategy)


memory_paths = _weighted(
    (12, fair_paths),
    (2, st.lists(segments, min_size=1, max_size=5).map(lambda s: "/memories/" + "/".join(s))),
    (1, st.lists(segments, min_size=2, max_size=4).map(lambda s: "/memories/" + "\\".join(s))),
    (1, st.text(max_size=40)),
    (
        1,
        st.sampled_from(
            [
                "/memories",
                "/memories/",
                "/memories//a.md",
                "/memories/a.md/",
                "/etc/passwd",
                "memories/a.md",
                "/memories/../../etc/passwd",
                "/memories/./a.md",
                "/MEMORIES/a.md",
                "/memories/a.md",
                "/memories/a.md/b.md",
                "/memories/" + "d/" * 400 + "x.md",
            ]
        ),
    ),
)

yaml_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=30))
yaml_values = st.recursive(
    yaml_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
frontmatter_dicts = st.dictionaries(
    st.one_of(st.text(max_size=12), st.sampled_from(["description", "tags", "n"])),
    yaml_values,
    max_size=5,
)
frontmatter_texts = st.one_of(
    st.tuples(frontmatter_dicts, st.booleans()).map(
        lambda t: yaml.safe_dump(t[0], allow_unicode=t[1])
    ),
    st.text(max_size=200),
)
padding = st.sampled_from([0, 0, 0, 0, 16 * 1024 + 1, LIMIT - 200, LIMIT + 1])


def _document(parts: tuple[str, str, int]) -> bytes:
    head, body, pad = parts
    text = f"---\n{head}\n---\n{body}" + "p" * pad
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate gives invalid UTF-8


documents = st.tuples(frontmatter_texts, st.text(max_size=200), padding).map(_document)
contents = _weighted(
    (6, documents),
    (2, st.text().map(lambda t: t.encode("utf-8", "surrogatepass"))),
    (1, st.binary(max_size=200)),
    (
        1,
        st.sampled_from(
            [b"", b"x" * LIMIT, b"x" * (LIMIT + 1), "é".encode() * (LIMIT // 2 + 1), b"\xff\xfe"]
        ),
    ),
)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Store]]:
    """One store for every example: (sandbox, data folder, store), cwd in the sandbox."""
    sandbox = tmp_path_factory.mktemp("roundtrip")
    neighbours = sorted(os.listdir(sandbox.parent))
    old_cwd = os.getcwd()
    os.chdir(sandbox)  # a stray relative write would land here, where we look
    data = sandbox / "data"
    store = Store(data)
    try:
        store.create_agent(AGENT)
        yield sandbox, data, store
    finally:
        store.close()
        os.chdir(old_cwd)
    assert sorted(os.listdir(sandbox.parent)) == neighbours


def _assert_contained(sandbox: Path, data: Path) -> None:
    assert os.listdir(sandbox) == ["data"]
    agent_folder = layout.agent_folder(data, AGENT)
    for dirpath, _dirs, files in os.walk(data):
        for name in files:
            file = Path(dirpath) / name
            assert file.parent == data or file.is_relative_to(agent_folder), file
            if file.parent == data:
                assert name.startswith("index.sqlite"), file


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(path=memory_paths, data=contents)
def test_write_is_refused_or_round_trips(
    shared: tuple[Path, Path, Store], path: str, data: bytes
) -> None:
    sandbox, data_dir, store = shared
    try:
        result = store.write(AGENT, path, data, actor="hypothesis")
    except (InvalidRequest, PayloadTooLarge, Conflict) as exc:
        event(f"refused: {type(exc).__name__} {exc.field}")
        _assert_contained(sandbox, data_dir)
        return
    event("written" + (" (as a blob)" if len(data) > 16 * 1024 else ""))
    stored_path = result.memory.path
    assert stored_path == unicodedata.normalize("NFC", path)
    assert stored_path.startswith("/memories/")
    assert result.memory.sha256 == hashlib.sha256(data).hexdigest()
    assert len(data) <= LIMIT

    memory = store.read(AGENT, path)
    assert memory.content == data
    assert store.read(AGENT, stored_path, memory.version).content == data

    tree_root = layout.worktree_root(data_dir, AGENT)
    file = WorkTree(tree_root).file(stored_path)
    real = file.resolve(strict=True)
    assert real.is_relative_to(tree_root.resolve()), real
    assert real != tree_root.resolve()
    assert real.read_bytes() == data
    _assert_contained(sandbox, data_dir)
