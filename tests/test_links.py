"""Links between memories: every Markdown form, resolved to absolute memory paths."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memfs.domain.links import extract_links

SOURCE = "/memories/a/b.md"


def links(content: str, source: str = SOURCE) -> list[str]:
    return extract_links(content, source)


def test_no_links() -> None:
    assert links("") == []
    assert links("plain text with [brackets] and (parens)") == []


def test_absolute_inline_link() -> None:
    assert links("see [x](/memories/x.md)") == ["/memories/x.md"]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("y.md", "/memories/a/y.md"),
        ("./y.md", "/memories/a/y.md"),
        ("../x.md", "/memories/x.md"),
        ("sub/./z.md", "/memories/a/sub/z.md"),
        ("sub//z.md", "/memories/a/sub/z.md"),
        ("../c/../d.md", "/memories/d.md"),
    ],
)
def test_relative_links_resolve_against_the_source_folder(target: str, expected: str) -> None:
    assert links(f"[t]({target})") == [expected]


def test_relative_link_from_a_memory_at_the_root() -> None:
    assert links("[t](n.md)", source="/memories/top.md") == ["/memories/n.md"]


@pytest.mark.parametrize(
    ("wiki", "expected"),
    [
        ("[[name]]", "/memories/name.md"),
        ("[[name|Alias text]]", "/memories/name.md"),
        ("[[folder/name]]", "/memories/folder/name.md"),
        ("[[name#Some heading]]", "/memories/name.md"),
        ("[[name.md]]", "/memories/name.md"),
        ("[[diagram.png]]", "/memories/diagram.png"),
        ("[[v1.2 notes]]", "/memories/v1.2 notes.md"),
        ("[[my note]]", "/memories/my note.md"),
        ("![[embedded]]", "/memories/embedded.md"),
        ("| [[cell\\|alias]] |", "/memories/cell.md"),
        ("[[100%25]]", "/memories/100%25.md"),  # a name, not a URL: no decoding
    ],
)
def test_wiki_links_are_relative_to_memories_root(wiki: str, expected: str) -> None:
    assert links(wiki) == [expected]
    # ...wherever the source lives.
    assert links(wiki, source="/memories/deep/er/src.md") == [expected]


@pytest.mark.parametrize(
    "content",
    [
        "[web](https://example.com/memories/x.md)",
        "[mail](mailto:a@example.com)",
        "[other](ftp://host/x.md)",
        "[custom](memfs:x.md)",
        "[proto-relative](//host/memories/x.md)",
        "[anchor](#section)",
        "[query](?page=2)",
        "[empty]()",
        "[[#heading only]]",
        "[[]]",
    ],
)
def test_external_and_anchor_only_targets_are_ignored(content: str) -> None:
    assert links(content) == []


def test_fragment_and_query_are_stripped() -> None:
    content = "[a](x.md#part) [b](/memories/y.md?v=2#z) [c](x.md?again)"
    assert links(content) == ["/memories/a/x.md", "/memories/y.md"]


def test_targets_are_percent_decoded() -> None:
    content = "[a](my%20note.md) [b](/memories/caf%C3%A9.md) [c](100%2525.md)"
    assert links(content) == [
        "/memories/a/my note.md",
        "/memories/café.md",
        "/memories/a/100%25.md",
    ]


def test_undecodable_percent_escape_is_ignored() -> None:
    assert links("[a](bad%FF.md)") == []


def test_angle_destination_title_and_image_forms() -> None:
    content = "[a](<with space.md> \"Title\") [b](c.md 't') "
    content += "![img](pic.png) [d [nested]](d.md)"
    assert links(content) == [
        "/memories/a/with space.md",
        "/memories/a/c.md",
        "/memories/a/pic.png",
        "/memories/a/d.md",
    ]


def test_reference_definitions_count_as_links() -> None:
    content = (
        "See [the plan][p].\n\n"
        '[p]: ../plan.md "Plan"\n'
        "  [q]: <q file.md>\n"
        "[TODO]: fix this\n"  # not a definition: 'this' is no title
    )
    assert links(content) == ["/memories/plan.md", "/memories/a/q file.md"]


def test_links_in_fenced_code_are_ignored() -> None:
    content = "```md\n[a](a.md) [[b]]\n```\n~~~\n[c](c.md)\n~~~\n[d](d.md)\n"
    assert links(content) == ["/memories/a/d.md"]


def test_unclosed_fence_hides_the_rest() -> None:
    assert links("[a](a.md)\n```\n[b](b.md)\n") == ["/memories/a/a.md"]


def test_links_in_inline_code_are_ignored() -> None:
    content = "`[a](a.md)` ``[[b]] ` still code`` [c](c.md) `[d](d.md)\nacross a line`"
    assert links(content) == ["/memories/a/c.md"]


def test_unmatched_backtick_is_literal() -> None:
    assert links("a ` b [c](c.md)") == ["/memories/a/c.md"]


def test_escaped_brackets_are_not_links() -> None:
    assert links(r"\[a](a.md) \[\[b]] [c](c\_d.md)") == ["/memories/a/c_d.md"]


@pytest.mark.parametrize(
    "content",
    [
        "[up](../../x.md)",
        "[up](../../../../etc/passwd)",
        "[abs](/etc/passwd)",
        "[root](/memories)",
        "[root](/memories/)",
        "[folder](sub/)",
        "[sibling](/memoriesx/y.md)",
        "[[../outside]]",
        "[[folder/]]",
        "[ctl](a%00b.md)",
        "[bs](a%5Cb.md)",
    ],
)
def test_targets_that_name_no_memory_are_ignored(content: str) -> None:
    assert links(content) == []


def test_unique_in_order_of_first_appearance_and_nfc() -> None:
    content = "[[z]] [a](x.md) [[a/x]] [b](/memories/z.md) [n](cafe\u0301.md)"
    assert links(content) == [
        "/memories/z.md",
        "/memories/a/x.md",
        "/memories/a/café.md",
    ]


def test_link_text_may_span_lines() -> None:
    assert links("[a long\nlabel](y.md)") == ["/memories/a/y.md"]


markdownish = st.lists(
    st.sampled_from(
        [
            "[",
            "]",
            "(",
            ")",
            "[[",
            "]]",
            "|",
            "#",
            "?",
            "%",
            "%2F",
            "%C3",
            "/",
            "../",
            "./",
            "..",
            ".",
            "`",
            "```",
            "\n",
            " ",
            "<",
            ">",
            "\\",
            ":",
            "x.md",
            "a",
            "é",
            "/memories/",
            "mailto:",
        ]
    ),
    max_size=60,
).map("".join)
sources = (
    st.sampled_from(["/memories/a.md", "/memories/a/b/c.md", "/memories/", "x", ""]) | st.text()
)


@given(content=markdownish | st.text(), source=sources)
def test_results_are_always_clean_memory_paths(content: str, source: str) -> None:
    result = extract_links(content, source)
    assert len(result) == len(set(result))
    for path in result:
        assert path.startswith("/memories/")
        assert all(segment not in ("", ".", "..") for segment in path.split("/")[1:])
