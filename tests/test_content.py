"""Design §2 content rules: UTF-8, size limit, frontmatter, description, metadata."""

from __future__ import annotations

import hashlib

import pytest

from memfs.core.store import Store
from memfs.domain.content import metadata_text, parse
from memfs.errors import InvalidRequest, PayloadTooLarge

LIMIT = 100 * 1024


def test_plain_markdown_has_no_description_or_metadata() -> None:
    data = "# Title\n\nbody with é\r\n".encode()
    parsed = parse(data, limit=LIMIT)
    assert parsed.description is None
    assert parsed.metadata == {}
    assert parsed.size == len(data)
    assert parsed.sha256 == hashlib.sha256(data).hexdigest()


def test_sha256_is_of_the_exact_bytes() -> None:
    # Same text, different line endings: different bytes, different hash.
    assert parse(b"a\nb\n", limit=LIMIT).sha256 != parse(b"a\r\nb\r\n", limit=LIMIT).sha256


@pytest.mark.parametrize(
    ("data", "byte"),
    [
        (b"\xff", 0),
        (b"ab\xffcd", 2),
        ("déjà ".encode() + b"\xc3", 7),  # truncated sequence at the end
        ("é".encode("latin-1") + b"tait", 0),  # Latin-1, not UTF-8
        (b"ok\xed\xa0\x80", 2),  # an encoded surrogate is not UTF-8
    ],
)
def test_non_utf8_is_refused_naming_the_byte(data: bytes, byte: int) -> None:
    with pytest.raises(InvalidRequest, match=rf"UTF-8 \(byte {byte}\)") as caught:
        parse(data, limit=LIMIT)
    assert caught.value.field == "content"


def test_nul_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="NUL"):
        parse(b"a\x00b", limit=LIMIT)


def test_size_limit() -> None:
    assert parse(b"x" * 100, limit=100).size == 100
    with pytest.raises(PayloadTooLarge, match="101 bytes; the limit is 100"):
        parse(b"x" * 101, limit=100)
    # The limit is in bytes, not characters.
    with pytest.raises(PayloadTooLarge):
        parse("é".encode() * 51, limit=100)


def test_store_refuses_oversized_content_and_writes_nothing(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    store = Store(tmp_path_factory.mktemp("small") / "data", memory_bytes=64)
    try:
        store.create_agent("a")
        with pytest.raises(PayloadTooLarge):
            store.write("a", "/memories/big.md", b"x" * 65, actor="t")
        assert store.get_agent("a").revision == 0
        assert store.write("a", "/memories/ok.md", b"x" * 64, actor="t").changed
    finally:
        store.close()


# (content, line of the file the error is on)
YAML_ERRORS = [
    ("---\na: 1\nb: c: d\n---\nbody\n", 3),
    ("---\nb: c: d\n---\n", 2),
    ("---\na: 1\nb:\n\t- tab\n---\n", 4),
    # blank lines right after the opening '---' count as file lines
    ("---\n\nkey: value: x\n---\n", 3),
    ("---   \n \n\na: 1\nkey: value: x\n---\n", 5),
    ("---\r\n\r\na: 1\r\nb: c: d\r\n---\r\n", 4),
    ("----\na: 1\nb: c: d\n----\n", 3),
    ("---\n" + "".join(f"k{i}: {i}\n" for i in range(1, 9)) + "bad: [1, 2\nz: 3\n---\n", 11),
]


@pytest.mark.parametrize(("text", "line"), YAML_ERRORS)
def test_yaml_errors_name_the_file_line(text: str, line: int) -> None:
    with pytest.raises(InvalidRequest, match=rf"invalid YAML frontmatter on line {line}:") as e:
        parse(text.encode(), limit=LIMIT)
    assert e.value.field == "content"


def test_yaml_error_line_points_at_the_offending_text() -> None:
    # Independently of the cases above: the named line holds the broken mapping.
    lines = ["---", "title: ok", "", "# a comment", "oops: a: b", "tail: 1", "---", "body"]
    text = "\n".join(lines)
    with pytest.raises(InvalidRequest) as caught:
        parse(text.encode(), limit=LIMIT)
    named = int(caught.value.message.split("on line ")[1].split(":")[0])
    assert lines[named - 1] == "oops: a: b"


@pytest.mark.parametrize(
    "text",
    [
        "---\n- a\n- b\n---\n",
        "---\njust a sentence\n---\n",
        "---\n42\n---\nbody\n",
        "---\n'quoted'\n---\n",
    ],
)
def test_non_mapping_frontmatter_is_refused(text: str) -> None:
    with pytest.raises(InvalidRequest, match="mapping"):
        parse(text.encode(), limit=LIMIT)


@pytest.mark.parametrize(
    "text",
    ["---\n---\nbody\n", "---\n# only a comment\n---\n", "---\n\n---\n"],
)
def test_empty_frontmatter_is_fine(text: str) -> None:
    parsed = parse(text.encode(), limit=LIMIT)
    assert parsed.description is None and parsed.metadata == {}


@pytest.mark.parametrize(
    "text",
    ["---\nhello\n", "---", "------\n\n# A title after a rule\n", "text\n---\na: 1\n---\n"],
)
def test_no_closing_delimiter_or_late_dashes_mean_no_frontmatter(text: str) -> None:
    # A Markdown file may open with a thematic break; it is stored, not refused.
    parsed = parse(text.encode(), limit=LIMIT)
    assert parsed.description is None and parsed.metadata == {}


def test_description_comes_from_frontmatter() -> None:
    parsed = parse(b"---\ndescription: Naming rules\n---\n# Naming\n", limit=LIMIT)
    assert parsed.description == "Naming rules"
    assert "description" not in parsed.metadata


@pytest.mark.parametrize("value", ["42", "[a, b]", "{k: v}", "true", "2024-01-02"])
def test_description_must_be_a_string(value: str) -> None:
    with pytest.raises(InvalidRequest, match="description"):
        parse(f"---\ndescription: {value}\n---\n".encode(), limit=LIMIT)


def test_scalar_metadata_is_kept_and_collections_ignored() -> None:
    text = """---
description: d
title: Hello
count: 3
ratio: 0.5
draft: false
nothing: null
quoted: "007"
tags: [a, b]
owner: {name: alice}
day: 2024-05-01
at: 2024-05-01T10:20:30Z
---
body
"""
    parsed = parse(text.encode(), limit=LIMIT)
    assert parsed.metadata == {
        "title": "Hello",
        "count": 3,
        "ratio": 0.5,
        "draft": False,
        "nothing": None,
        "quoted": "007",
        "day": "2024-05-01",
        "at": "2024-05-01T10:20:30+00:00",
    }


def test_non_finite_floats_become_strings() -> None:
    parsed = parse(b"---\na: .nan\nb: .inf\nc: -.inf\n---\n", limit=LIMIT)
    assert parsed.metadata == {"a": "nan", "b": "inf", "c": "-inf"}


def test_metadata_text_is_the_yaml_spelling() -> None:
    assert metadata_text(True) == "true"
    assert metadata_text(False) == "false"
    assert metadata_text(None) == "null"
    assert metadata_text(3) == "3"
    assert metadata_text("x") == "x"


def test_store_keeps_the_bytes_exactly_and_derives_fields(store: Store, agent: str) -> None:
    data = b"---\r\ndescription: crlf file\r\npriority: 2\r\n---\r\nbody\r\n"
    result = store.write(agent, "/memories/a.md", data, actor="t")
    memory = store.read(agent, "/memories/a.md")
    assert memory.content == data
    assert memory.sha256 == hashlib.sha256(data).hexdigest() == result.memory.sha256
    assert memory.size == len(data)
    assert memory.description == "crlf file"
    assert memory.metadata == {"priority": 2}


def test_store_refuses_bad_yaml_and_writes_nothing(store: Store, agent: str) -> None:
    with pytest.raises(InvalidRequest, match="line 2"):
        store.write(agent, "/memories/a.md", b"---\na: b: c\n---\n", actor="t")
    assert store.get_agent(agent).revision == 0
    assert store.list_memories(agent) == ([], False)
