"""Plain frontmatter is read without YAML, and gives exactly what the YAML parser gives.

``content.plain_mapping`` reads the common case (lines of ``key: plain value``) with
one regular expression; anything else goes to the YAML parser. These property tests
feed both readers lines built from the spellings YAML treats specially (booleans in
every case, null, octal and sexagesimal numbers, dates, indicators, comments, quotes,
tabs, long keys, non-ASCII line breaks) and require the same mapping, key order and
value types, or the fast path to step aside.
"""

from __future__ import annotations

from unittest import mock

import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memfs.domain import content
from memfs.domain.content import parse, plain_mapping
from memfs.errors import InvalidRequest

LIMIT = 100 * 1024

_TRICKY_KEYS = [
    "description", "kind", "topic", "yes", "No", "NULL", "on", "OFF", "True", "false",
    "y", "n", "<<", "=", "~", "a-b", "_x", "x_", "1", "07", "k" * 1030, "two words",
    "é", "a:b", "-a", "?a", "[a]",
]  # fmt: skip
_TRICKY_VALUES = [
    "", "yes", "Yes", "YES", "no", "No", "ON", "on", "Off", "true", "True", "TRUE",
    "false", "FALSE", "null", "Null", "NULL", "~", "y", "n", "0", "00", "07", "08",
    "0x1f", "0o17", "0b101", "1_000", "1:20", "190:20:30", "1.5", "1e3", "1.0e+3", ".inf",
    "-.inf", ".NaN", "-1", "+1", "2024-01-01", "2024-13-01", "2001-12-14t21:59:43.10-05:00",
    "a: b", "a:b", "a #c", "a#c", "'q'", '"q"', "'unclosed", "[a, b]", "{a: 1}", "- a",
    "&anchor x", "*alias", "!!str 1", "!!int x", "|", "> folded", "%x", "@x", "`x",
    "it's", "note (draft), v2/3 + more", "a - b", "a -", "x.", "x,", "ok", "é",
    "a\u2028b", "a\x85b", "a\tb", "tab\t", "12345678901234567890123", "=", "<<",
    "a; b", "a!", "a?", "a ? b", "a & b", "a *b", "a !b", "a | b", "a > b", "a %b", "a @b",
    "a `b", "a\"b\"", "a [b]", "a {b: c}", "a:", "a:b:", "a: ", "a::b", "a:#b", "a: #b",
    "http://x.y/z?q=1&r=2", "a\u2029b", "a\ufeffb", "a\xa0", "a\xa0b", "a — b", "aé",
    "a\U0001f600", "a\x7fb", "a\x9fb", "a\ue000", "a\ufffe", "a\rb", "a\x00b",
]  # fmt: skip
_VALUE_CHARS = (
    "abcXYZ019 _.,/()+'-:#\t\"[]{}!&*|>%@`~?é\x85;=<^$\xa0\u2014\u2028\u2029\ufeff"
    "\U0001f600\x7f\x9f\r\ufffe"
)

keys = st.one_of(
    st.sampled_from(_TRICKY_KEYS),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,8}", fullmatch=True),
    st.text(alphabet="ab_-:1 é", min_size=1, max_size=6),
)
values = st.one_of(
    st.sampled_from(_TRICKY_VALUES),
    st.from_regex(r"[A-Za-z][A-Za-z0-9 _.,/()+'-]{0,20}", fullmatch=True),
    st.text(alphabet=_VALUE_CHARS, max_size=12),
    st.integers(min_value=0, max_value=10**30).map(str),
)
separators = st.sampled_from([": ", ":", ":  ", " : ", ":\t", ": \t"])
tails = st.sampled_from(["", "", " ", "  ", "\t", " # comment", "\r"])
wild_lines = st.builds(lambda k, s, v, t: f"{k}{s}{v}{t}", keys, separators, values, tails)
# Lines close to the plain case, so that whole heads often reach the fast path.
near_plain_lines = st.builds(
    lambda k, s, v, t: f"{k}{s}{v}{t}",
    st.one_of(
        st.sampled_from(_TRICKY_KEYS), st.from_regex(r"[a-z_][a-z0-9_-]{0,5}", fullmatch=True)
    ),
    st.sampled_from([": ", ":  "]),
    st.one_of(
        st.sampled_from(_TRICKY_VALUES),
        st.from_regex(r"[A-Za-z][a-z0-9 .,'-]{0,8}", fullmatch=True),
        st.text(alphabet="ab :;!?&*\"[]|>%@#—é\xa0\u2028", max_size=8).map(lambda v: "a" + v),
    ),
    st.sampled_from(["", " "]),
)
pair_lines = st.one_of(near_plain_lines, near_plain_lines, near_plain_lines, wild_lines)
other_lines = st.sampled_from(
    ["", "", "  indented: x", "# comment", "---", "...", "- item", "key:", "  ", "\t"]
)
heads = st.lists(st.one_of(pair_lines, pair_lines, pair_lines, other_lines), max_size=4).map(
    lambda lines: "\n" + "\n".join(lines) + "\n"
)


def typed(mapping: dict[str, object]) -> list[tuple[str, type, object]]:
    """Items with their types and in their order (True == 1 in Python; not here)."""
    return [(k, type(v), v) for k, v in mapping.items()]


def yaml_mapping(head: str) -> dict[str, object] | None:
    """What the YAML parser makes of ``head``, as ``content`` keys it; None if it fails."""
    try:
        loaded = yaml.load(head, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError, KeyError):
        return None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        return None
    return {str(k): v for k, v in loaded.items()}


@settings(max_examples=400, deadline=None)
@given(heads)
@example("\ndescription: a note\nkind: bench\npriority: 3\ndraft: false\nreviewed:\n")
@example("\n" + "k" * 1030 + ": x\n")
@example("\ndescription: x\ndescription: y\nkind: z\n")
def test_the_fast_path_reads_what_yaml_reads_or_steps_aside(head: str) -> None:
    check_head(head)


def check_head(head: str) -> None:
    fast = plain_mapping(head)
    if fast is None:
        return  # the YAML parser reads it, as before
    expected = yaml_mapping(head)
    assert expected is not None, f"YAML refuses {head!r}, the fast path read {fast!r}"
    assert typed(fast) == typed(expected)


def test_every_tricky_spelling_is_read_as_yaml_reads_it() -> None:
    # Each listed key and value on its own line, with each separator and tail: the
    # spellings the random heads above mix, tried one by one, exhaustively.
    for key in _TRICKY_KEYS:
        check_head(f"\n{key}: x\n")
    for value in _TRICKY_VALUES:
        for sep in (": ", ":  ", ":"):
            for tail in ("", " ", "\t", " # c"):
                check_head(f"\ndescription: d\nkey{sep}{value}{tail}\n")


def _outcome(data: bytes) -> object:
    try:
        return parse(data, limit=LIMIT)
    except InvalidRequest as exc:
        return ("refused", exc.message)


@settings(max_examples=200, deadline=None)
@given(heads, st.sampled_from(["", "body\n", "# Title\n\ntext\n"]))
def test_parse_answers_the_same_with_and_without_the_fast_path(head: str, body: str) -> None:
    data = f"---{head}---\n{body}".encode()
    with_fast = _outcome(data)
    with mock.patch.object(content, "plain_mapping", return_value=None):
        without = _outcome(data)
    assert with_fast == without
    if not isinstance(with_fast, tuple):
        assert typed(with_fast.metadata) == typed(without.metadata)  # type: ignore[attr-defined]


def test_descriptions_with_punctuation_and_accents_take_the_fast_path() -> None:
    # What agents' descriptions hold beyond letters: semicolons, dashes, quotes,
    # question and exclamation marks, URLs, accents: still no YAML parser for them.
    head = (
        '\ndescription: User prefers dark mode; uses vim — "always"!\n'
        "source: https://example.com/a?b=1&c=2\nauthor: Zoë\n"
    )
    assert plain_mapping(head) == {
        "description": 'User prefers dark mode; uses vim — "always"!',
        "source": "https://example.com/a?b=1&c=2",
        "author": "Zoë",
    }
    check_head(head)
    for needs_yaml in ("\nd: a: b\n", "\nd: a #c\n", "\nd: a:\n", "\nd: a\u2028b\n"):
        assert plain_mapping(needs_yaml) is None, needs_yaml


def test_common_frontmatter_takes_the_fast_path() -> None:
    # What agents and the docs write: a description and a few plain scalar fields.
    head = "\ndescription: The user prefers short answers, tabs over spaces.\ntopic: style\npriority: 2\npinned: true\n"
    assert plain_mapping(head) == {
        "description": "The user prefers short answers, tabs over spaces.",
        "topic": "style",
        "priority": 2,
        "pinned": True,
    }
    parsed = parse(f"---{head}---\nbody\n".encode(), limit=LIMIT)
    assert parsed.description == "The user prefers short answers, tabs over spaces."
    assert parsed.metadata == {"topic": "style", "priority": 2, "pinned": True}


def test_anything_else_still_goes_to_yaml() -> None:
    for head in (
        "\ntags: [a, b]\n",
        "\ndraft: yes\n",
        "\ndescription: 'quoted'\n",
        "\nwhen: 2024-01-01\n",
        "\n# a comment\ndescription: x\n",
    ):
        assert plain_mapping(head) is None, head
    parsed = parse(b"---\ndraft: yes\nwhen: 2024-01-01\ntags: [a]\n---\n", limit=LIMIT)
    assert parsed.metadata == {"draft": True, "when": "2024-01-01"}
