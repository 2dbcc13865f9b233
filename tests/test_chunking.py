"""Chunks tile a memory exactly, split at headings, and respect the size bound."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memfs.domain.chunking import Chunk, split_chunks


def headings(chunks: list[Chunk]) -> list[str | None]:
    return [c.heading for c in chunks]


def texts(chunks: list[Chunk]) -> list[str]:
    return [c.text for c in chunks]


def test_empty_content_has_no_chunks() -> None:
    assert split_chunks("") == []


def test_text_without_headings_is_one_chunk() -> None:
    [chunk] = split_chunks("just a note\nover two lines\n")
    assert chunk == Chunk(0, 0, 27, None, "just a note\nover two lines\n", False)


def test_splits_at_every_atx_heading_level() -> None:
    doc = "intro\n# One\na\n## Two ##\nb\n###### Six\nc"
    chunks = split_chunks(doc)
    assert texts(chunks) == ["intro\n", "# One\na\n", "## Two ##\nb\n", "###### Six\nc"]
    assert headings(chunks) == [None, "One", "Two", "Six"]
    assert [c.index for c in chunks] == [0, 1, 2, 3]
    assert not any(c.truncated for c in chunks)


def test_things_that_are_not_headings() -> None:
    doc = "#hashtag\n####### seven\n    # indented code\ntext # mid-line\n"
    assert texts(split_chunks(doc)) == [doc]


def test_heading_forms() -> None:
    doc = "   # three spaces\n#\n# # \n## trailing#\n"
    assert headings(split_chunks(doc)) == ["three spaces", "", "", "trailing#"]


@pytest.mark.parametrize(
    ("opening", "closing"), [("```", "```"), ("~~~", "~~~  "), ("````python", "`````")]
)
def test_headings_inside_fenced_code_do_not_split(opening: str, closing: str) -> None:
    doc = f"# Real\n{opening}\n# not a heading\n{closing}\n# After\n"
    assert headings(split_chunks(doc)) == ["Real", "After"]


def test_fence_closes_only_with_same_char_and_enough_length() -> None:
    doc = "# A\n````\n```\n~~~~\n# still code\n````\n# B\n"
    assert headings(split_chunks(doc)) == ["A", "B"]


def test_unclosed_fence_runs_to_the_end() -> None:
    doc = "# A\n```\n# code\n# more code\n"
    assert headings(split_chunks(doc)) == ["A"]


def test_frontmatter_is_its_own_first_chunk() -> None:
    doc = "---\ndescription: x\n# yaml comment\n---\n# Title\nbody\n"
    chunks = split_chunks(doc)
    assert texts(chunks) == [
        "---\ndescription: x\n# yaml comment\n---\n",
        "# Title\nbody\n",
    ]
    assert headings(chunks) == [None, "Title"]


def test_frontmatter_without_closing_line_is_plain_text() -> None:
    doc = "---\nnot: closed\n# Heading\n"
    assert texts(split_chunks(doc)) == ["---\nnot: closed\n", "# Heading\n"]


def test_frontmatter_only_and_crlf() -> None:
    assert texts(split_chunks("---\r\na: 1\r\n---")) == ["---\r\na: 1\r\n---"]
    assert texts(split_chunks("---\r\n---\r\n# H\r\n")) == ["---\r\n---\r\n", "# H\r\n"]


def test_byte_offsets_count_utf8_bytes() -> None:
    doc = "é€😀\n# Ünïcode\n"
    first, second = split_chunks(doc)
    assert (first.start, first.end) == (0, 10)  # 2 + 3 + 4 bytes + newline
    assert (second.start, second.end) == (10, len(doc.encode()))
    assert second.heading == "Ünïcode"


def test_long_section_is_cut_at_line_ends_and_marked_truncated() -> None:
    doc = "# Big\n" + "".join(f"line {i:02}\n" for i in range(10)) + "# Small\nx\n"
    chunks = split_chunks(doc, max_bytes=24)
    big = [c for c in chunks if c.heading == "Big"]
    assert all(c.truncated and c.end - c.start <= 24 for c in big)
    assert all(c.text.endswith("\n") for c in big)
    assert "".join(c.text for c in big) == doc[: doc.index("# Small")]
    assert chunks[-1] == Chunk(
        len(chunks) - 1, len(doc) - 10, len(doc), "Small", "# Small\nx\n", False
    )


def test_long_line_is_cut_on_character_boundaries() -> None:
    doc = "😀" * 10  # 40 bytes, no line end
    chunks = split_chunks(doc, max_bytes=10)
    assert texts(chunks) == ["😀😀"] * 5
    assert [c.end - c.start for c in chunks] == [8] * 5


def test_max_bytes_must_fit_one_character() -> None:
    with pytest.raises(ValueError, match="at least 4"):
        split_chunks("x", max_bytes=3)


markdownish = st.lists(
    st.sampled_from(
        [
            "#",
            "# ",
            "\n",
            "`",
            "```",
            "~~~",
            "---",
            " ",
            "\r",
            "a",
            "é",
            "€",
            "😀",
            "\t",
        ]
    ),
    max_size=80,
).map("".join) | st.lists(
    st.sampled_from(["# H\n", "---\n", "```\n", "~~~\n", "text\n", "é€😀", "\n", "## ", "a b c "]),
    max_size=30,
).map("".join)


@given(content=markdownish | st.text(), max_bytes=st.integers(min_value=4, max_value=64))
def test_chunks_tile_the_document_within_the_size_bound(content: str, max_bytes: int) -> None:
    data = content.encode()
    chunks = split_chunks(content, max_bytes=max_bytes)
    assert "".join(c.text for c in chunks) == content
    assert [c.index for c in chunks] == list(range(len(chunks)))
    position = 0
    for chunk in chunks:
        assert chunk.start == position < chunk.end
        assert chunk.end - chunk.start <= max_bytes
        assert data[chunk.start : chunk.end].decode() == chunk.text  # on char boundaries
        position = chunk.end
    assert position == len(data)
    # Without a size pressure, no chunk is ever truncated.
    assert not any(c.truncated for c in split_chunks(content, max_bytes=len(data) + 4))


def test_long_frontmatter_is_cut_too_and_stays_apart_from_the_body() -> None:
    doc = "---\n" + "key: value\n" * 5 + "---\n# Body\n"
    chunks = split_chunks(doc, max_bytes=32)
    front = [c for c in chunks if c.heading is None]
    assert len(front) > 1
    assert all(c.truncated for c in front)
    assert "".join(c.text for c in front) == doc[: doc.index("# Body")]
    assert chunks[-1].text == "# Body\n"
    assert not chunks[-1].truncated
