"""A live commit's changes columns, made in Python (rows.commit_changes), are byte for
byte what SQLite makes from the log entry's text (rows.COMMIT_CHANGES_SQL, which bulk
loads use): a store indexed live and the same store reindexed hold the same rows, and
the console's log and ``memfs log`` show the same changes either way."""

from __future__ import annotations

import hashlib
import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from memfs.derived.index.rows import COMMIT_CHANGES_SQL, commit_changes
from memfs.domain.commits import LOG_HEAD, Change, Commit

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)


@st.composite
def changes(draw: st.DrawFn) -> Change:
    content = draw(st.one_of(st.none(), text))
    after = draw(st.one_of(st.none(), st.just(hashlib.sha256(b"x").hexdigest())))
    return Change(
        path="/memories/" + draw(text),
        operation=draw(st.sampled_from(["created", "modified", "deleted", "renamed"])),
        version=draw(st.integers(1, 10**6)),
        before=draw(st.one_of(st.none(), st.just(hashlib.sha256(b"y").hexdigest()))),
        after=after,
        size=draw(st.integers(0, 10**7)),
        content=content if after is not None else None,
        renamed_from=draw(st.one_of(st.none(), text)),
        renamed_to=draw(st.one_of(st.none(), text)),
        description=draw(st.one_of(st.none(), text)),
        metadata=draw(st.dictionaries(text, scalar, max_size=4)),
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(changes(), min_size=1, max_size=LOG_HEAD + 5), text, text)
def test_python_change_columns_equal_sqlites(
    made: list[Change], actor: str, message: str
) -> None:
    commit = Commit("team/rows", 7, 1_796_154_300_673_147, actor, message, tuple(made))
    entry = commit.to_bytes().decode()
    conn = sqlite3.connect(":memory:")
    expected = conn.execute(f"SELECT {COMMIT_CHANGES_SQL}", (entry,) * 3).fetchone()
    assert commit_changes(commit) == tuple(expected)
