"""The commit planner on its own: operations plus current states → changes, no SQLite.

The states are a dict; each test states a rule a user meets through ``PUT``, ``DELETE``
and ``mv`` (the Store tests check the same rules end to end).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pytest

from memfs.core.planner import Delete, Move, Put, plan
from memfs.domain.commits import CREATED, DELETED, MODIFIED, RENAMED
from memfs.domain.records import MemoryRow, PathState
from memfs.errors import Conflict, InvalidRequest, NotFound, PreconditionFailed

LIMIT = 100 * 1024


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class DictStates:
    """Live memories as path → content, plus the newest version each path ever had."""

    def __init__(self, live: dict[str, bytes], versions: dict[str, int] | None = None) -> None:
        self.live = live
        self.versions = {p: 1 for p in live} | (versions or {})
        self.reads: list[str] = []
        self.calls: list[list[str]] = []  # each path_states call, with the paths it asked

    def path_states(self, paths: Sequence[str]) -> dict[str, PathState]:
        self.calls.append(list(paths))
        self.reads += paths
        return {p: self._state(p) for p in paths}

    def _state(self, path: str) -> PathState:
        row = None
        if path in self.live:
            data = self.live[path]
            row = MemoryRow(path, self.versions[path], sha(data), len(data), None, {}, 1, 1)
        folder = any(p.startswith(path + "/") for p in self.live)
        return PathState(row, self.versions.get(path, 0), folder)

    def content(self, sha256: str) -> bytes:
        return next(d for d in self.live.values() if sha(d) == sha256)


A, B = "/memories/a.md", "/memories/b.md"


def test_a_new_path_is_created_at_version_1_and_an_update_is_the_next_version() -> None:
    made = plan([Put(A, b"one")], DictStates({}), memory_bytes=LIMIT)
    assert [(c.operation, c.version, c.after) for c in made.changes] == [(CREATED, 1, sha(b"one"))]
    updated = plan([Put(A, b"two")], DictStates({A: b"one"}), memory_bytes=LIMIT)
    assert [(c.operation, c.version, c.before) for c in updated.changes] == [
        (MODIFIED, 2, sha(b"one"))
    ]


def test_identical_content_plans_nothing() -> None:
    assert plan([Put(A, b"same")], DictStates({A: b"same"}), memory_bytes=LIMIT).changes == []


def test_preconditions_are_judged_against_the_current_state() -> None:
    states = DictStates({A: b"one"})
    with pytest.raises(PreconditionFailed):
        plan([Put(A, b"x", if_match=sha(b"other"))], states, memory_bytes=LIMIT)
    with pytest.raises(PreconditionFailed):
        plan([Put(A, b"x", create_only=True)], states, memory_bytes=LIMIT)
    with pytest.raises(NotFound):
        plan([Delete(B)], states, memory_bytes=LIMIT)


def test_a_path_written_again_after_a_delete_continues_its_versions() -> None:
    made = plan([Put(A, b"back")], DictStates({}, versions={A: 3}), memory_bytes=LIMIT)
    assert [(c.operation, c.version) for c in made.changes] == [(CREATED, 4)]


def test_a_file_and_a_folder_cannot_share_a_name() -> None:
    with pytest.raises(Conflict):
        plan([Put("/memories/a.md/x.md", b"x")], DictStates({A: b"1"}), memory_bytes=LIMIT)
    with pytest.raises(Conflict):
        plan([Put("/memories/n", b"x")], DictStates({"/memories/n/x.md": b"1"}), memory_bytes=LIMIT)


def test_a_rename_is_two_changes_carrying_the_content() -> None:
    made = plan([Move(A, B)], DictStates({A: b"moved"}), memory_bytes=LIMIT)
    assert [(c.path, c.operation, c.after) for c in made.changes] == [
        (A, RENAMED, None),
        (B, RENAMED, sha(b"moved")),
    ]
    assert made.contents == {sha(b"moved"): b"moved"}


def test_ops_see_the_changes_of_the_ops_before_them_and_each_path_changes_once() -> None:
    states = DictStates({A: b"one"})
    made = plan([Delete(A), Put(B, b"two")], states, memory_bytes=LIMIT)
    assert [(c.path, c.operation) for c in made.changes] == [(A, DELETED), (B, CREATED)]
    with pytest.raises(InvalidRequest):
        plan([Put(B, b"x"), Put(B, b"y")], DictStates({}), memory_bytes=LIMIT)


def test_each_path_is_read_once_per_plan() -> None:
    states = DictStates({A: b"one"})
    plan([Delete(A), Put(B, b"x")], states, memory_bytes=LIMIT)
    assert sorted(states.reads) == [A, B]


def test_one_read_answers_every_path_of_a_many_path_commit() -> None:
    """A commit of many ops asks the index once, not once (or three times) per path."""
    live = {f"/memories/old/{i}.md": b"old %d" % i for i in range(50)}
    states = DictStates(live, versions={"/memories/new/0.md": 4})
    ops: list[Put | Delete | Move] = [Delete(f"/memories/old/{i}.md") for i in range(20)]
    ops += [Put(f"/memories/new/{i}.md", b"new %d" % i) for i in range(20)]
    ops += [Move(f"/memories/old/{i}.md", f"/memories/moved/{i}.md") for i in range(20, 40)]
    made = plan(ops, states, memory_bytes=LIMIT)
    assert len(made.changes) == 20 + 20 + 40
    assert len(states.calls) == 1
    asked = set(states.calls[0])
    assert {"/memories/old/3.md", "/memories/new/3.md", "/memories/moved/30.md"} <= asked
    assert {"/memories/new", "/memories/moved"} <= asked  # folders the new paths need
    assert made.changes[20].version == 5  # /memories/new/0.md was deleted at version 4
