"""What a live commit writes in the index, checked against an independent account.

A live commit's changes columns, made in Python (rows.commit_changes), are byte for
byte what SQLite makes from the log entry's text (the columns' SQL below, as bulk
loads take them apart): a store indexed live and the same store reindexed hold the same rows, and
the console's log and ``memfs log`` show the same changes either way. And the
agent's count and bytes, kept by each commit without a statement of its own, match its
live memories."""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memfs.core.maintenance import reindex
from memfs.core.planner import Delete, Op, Put
from memfs.core.store import Store
from memfs.derived.index.rows import MemoryRow, commit_changes
from memfs.domain.commits import LOG_HEAD, Change, Commit

# The oracle: a commits row's changes columns as SQLite's JSON functions make them from
# the log entry's text (the change count, the first LOG_HEAD changes and every change,
# each without its inline content; json_each walks an array in order).
COMMIT_CHANGES_SQL = (
    "json_array_length(?, '$.changes'),"
    " (SELECT json_group_array(json_remove(value, '$.content')) FROM json_each(?, '$.changes')"
    f" WHERE key < {LOG_HEAD}),"
    " (SELECT json_group_array(json_remove(value, '$.content')) FROM json_each(?, '$.changes'))"
)

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



@settings(max_examples=150, deadline=None)
@given(
    st.lists(changes(), min_size=1, max_size=LOG_HEAD + 5),
    text,
    text,
    st.one_of(st.none(), text),
    st.integers(1, 10**12),
)
def test_entry_text_is_what_json_dumps_writes(
    made: list[Change], actor: str, message: str, agent_name: str | None, revision: int
) -> None:
    """A log entry written from its changes' own texts (the JSON made once per change)
    is byte for byte json.dumps of its document, as entries were always written, and
    the metadata text the index rows keep is json.dumps of the metadata."""
    commit = Commit(
        "team/rows", revision, 1_796_154_300_673_147, actor, message, tuple(made), agent_name
    )
    dumped = json.dumps(commit.to_json(), ensure_ascii=False, separators=(",", ":"))
    assert commit.to_bytes() == dumped.encode() + b"\n"
    for change in made:
        assert change.metadata_text == json.dumps(
            change.metadata, ensure_ascii=False, separators=(",", ":")
        )
    assert Commit.from_bytes(commit.to_bytes(), where="entry") == commit


def test_agent_counts_follow_every_kind_of_commit(tmp_path: Path) -> None:
    """The agent's memory count and bytes (what /v1/agents answers) equal its live
    memories after seeded-random creates, updates, deletes, renames (into another
    folder too) and multi-change commits, and after a reindex of the log."""
    store = Store(tmp_path / "data")
    agent = "team/counts"
    store.create_agent(agent)
    rng = random.Random(17)
    names = [f"/memories/{folder}/n{i}.md" for folder in ("a", "b/c") for i in range(6)]

    def live() -> dict[str, int]:
        rows, _more = store.list_memories(agent, limit=1000)
        return {m.path: m.size for m in rows if isinstance(m, MemoryRow)}

    for step in range(150):
        current = sorted(live())
        kind = rng.choice(["put", "put", "delete", "rename", "batch"])
        path = rng.choice(names)
        body = ("x" * rng.randint(0, 300) + f" {step}\n").encode()
        if kind == "put":
            store.write(agent, path, body, actor="t")
        elif kind == "delete" and current:
            store.delete(agent, rng.choice(current), actor="t")
        elif kind == "rename" and current and path not in current:
            store.rename(agent, current[0], path, actor="t")
        elif kind == "batch":
            puts = rng.sample(names, 3)
            ops: list[Op] = [Put(p, body + p.encode()) for p in puts]
            ops += [Delete(p) for p in current[:2] if p not in puts]
            store.apply(agent, ops, actor="t")
        now = live()
        assert store.agent_stats(agent) == (len(now), sum(now.values())), (step, kind)
    expected = store.agent_stats(agent)
    reindex(store)
    assert store.agent_stats(agent) == expected
    store.close()
