"""The memory:query language: what it means, and that nothing typed reaches FTS5 as syntax."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memfs.domain.search_query import MAX_QUERY_BYTES, Term, parse_match, parse_query, words_of
from memfs.errors import InvalidRequest


def test_words_phrases_prefixes_and_exclusions_are_told_apart() -> None:
    q = parse_query('deploy "code review" pyth* -draft -"old plan"')
    assert q.include == (
        Term("deploy"),
        Term("code review", phrase=True),
        Term("pyth", prefix=True),
    )
    assert q.exclude == (Term("draft"), Term("old plan", phrase=True))
    assert q.match_expression() == (
        '("deploy" AND "code review" AND "pyth"*) NOT ("draft" OR "old plan")'
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        '"unclosed',
        'a "b" "c',
        "-only",
        '-"only this"',
        "x" * (MAX_QUERY_BYTES + 1),
        "--",
        "*",
    ],
)
def test_bad_queries_are_refused_naming_the_query_field(text: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_query(text)
    assert caught.value.field == "query"


def test_the_size_limit_counts_utf8_bytes() -> None:
    parse_query("é" * (MAX_QUERY_BYTES // 2))
    with pytest.raises(InvalidRequest):
        parse_query("é" * (MAX_QUERY_BYTES // 2 + 1))


def test_a_query_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(InvalidRequest):
        parse_query(["words"])


@pytest.mark.parametrize(
    "text",
    [
        "NEAR(a b)",
        "a OR b",
        "title:x",
        "^start",
        "a AND NOT b",
        "(unbalanced",
        "x*y*",
        '"a"b"c"',
        "{path description}: x",
        "a + b",
    ],
)
def test_fts5_syntax_in_a_query_is_searched_for_never_obeyed(text: str) -> None:
    """Every expression parses in FTS5 (no syntax error, whatever was typed), and
    each operator word is a term: 'a OR b' requires both words."""
    expression = parse_query(text).match_expression()
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61')")
    conn.execute("INSERT INTO t VALUES('a b title x start near or and not path description')")
    conn.execute("INSERT INTO t VALUES('a')")
    rows = conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()
    assert rows in ([], [(1,)])  # never the lone 'a': OR, NOT, NEAR are plain words


def test_punctuation_only_terms_are_dropped_and_whitespace_inside_phrases_folded() -> None:
    q = parse_query('hello -- " spaced \t out " !!')
    assert q.include == (Term("hello"), Term("spaced out", phrase=True))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_an_engine_without_fts5_reads_back_the_terms_of_any_match_expression(text: str) -> None:
    """parse_match (how the PostgreSQL index reads the seam's FTS5 text) gives back the
    very terms parse_query made, whatever quotes, NOT, AND or stars the text holds."""
    try:
        query = parse_query(text)
    except InvalidRequest:
        return
    back = parse_match(query.match_expression())
    assert [(t.text, t.prefix) for t in back.include] == [(t.text, t.prefix) for t in query.include]
    assert [(t.text, t.prefix) for t in back.exclude] == [(t.text, t.prefix) for t in query.exclude]


def test_words_of_cuts_text_as_the_unicode61_tokenizer_does() -> None:
    assert words_of("See docs/api.md, e-mail me@x.org!") == [
        "See", "docs", "api", "md", "e", "mail", "me", "x", "org",
    ]  # fmt: skip
    assert words_of("Cafe\u0301 a_b") == ["Café", "a", "b"]  # NFC: one word
