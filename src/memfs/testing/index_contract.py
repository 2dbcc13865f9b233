"""The Index contract: what the derived index promises, one suite per implementation.

It drives the index only through the Index seam (``memfs.derived.index.base``: the
``Index`` protocol and its read and write sessions), so a new index runs the whole
suite by subclassing and saying how to open one on a file::

    class TestMyIndex(IndexContract):
        def open_index(self, path: Path) -> Index:
            return MyIndex(path)

``tests/test_index_contract.py`` runs it for the SQLite index.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from memfs.derived.index.base import Index, ReadSession
from memfs.derived.index.schema import SCHEMA_VERSION
from memfs.domain.commits import CREATED, DELETED, MODIFIED, Change, Commit
from memfs.domain.content import Scalar
from memfs.domain.search_query import parse_query

AGENT = "alice"


def _commit(revision: int, path: str, data: bytes, ts: int) -> tuple[Commit, dict[str, bytes]]:
    sha = hashlib.sha256(data).hexdigest()
    change = Change(path, CREATED, 1, None, sha, len(data), content=data.decode())
    return Commit(AGENT, revision, ts, "tester", "m", (change,)), {sha: data}


def _change(
    path: str,
    data: bytes,
    *,
    version: int = 1,
    before: str | None = None,
    description: str | None = None,
    metadata: dict[str, Scalar] | None = None,
) -> tuple[Change, dict[str, bytes]]:
    sha = hashlib.sha256(data).hexdigest()
    operation = CREATED if before is None else MODIFIED
    change = Change(
        path,
        operation,
        version,
        before,
        sha,
        len(data),
        data.decode(),
        description=description,
        metadata=metadata or {},
    )
    return change, {sha: data}


def _found(
    session: ReadSession,
    query: str,
    target: tuple[str, str] = ("agent", AGENT),
    *,
    folder: str = "/memories",
    filters: Sequence[tuple[str, str]] = (),
) -> list[str]:
    """The paths a query finds, best first ("agent:path" for a scope)."""
    hits = session.search(parse_query(query).match_expression(), target, folder, filters, 50, 0)
    return [f"{h.agent_id}:{h.path}" if target[0] == "scope" else h.path for h in hits]


class IndexContract:
    """What every index promises; subclasses say how to open one."""

    def open_index(self, path: Path) -> Index:
        raise NotImplementedError

    @pytest.fixture
    def path(self, tmp_path: Path) -> Path:
        return tmp_path / "index.sqlite"

    def test_a_new_index_is_created_at_the_current_schema(self, path: Path) -> None:
        opened = self.open_index(path)
        try:
            assert opened.created
            with opened.read_session() as s:
                assert s.schema() == SCHEMA_VERSION
                assert s.clock() == 0
        finally:
            opened.close()

    def test_what_a_write_session_commits_survives_reopening(self, path: Path) -> None:
        opened = self.open_index(path)
        with opened.write_session() as s:
            s.put_agent(AGENT, "Alice", "store-1", 5)
        opened.close()
        again = self.open_index(path)
        try:
            assert not again.created
            with again.read_session() as s:
                row = s.agent(AGENT)
            assert row is not None and (row.name, row.revision) == ("Alice", 0)
        finally:
            again.close()

    def test_a_failed_write_session_changes_nothing(self, path: Path) -> None:
        opened = self.open_index(path)
        try:
            with pytest.raises(RuntimeError), opened.write_session() as s:
                s.put_agent(AGENT, "Alice", "store-1", 5)
                raise RuntimeError("abort")
            with opened.read_session() as s:
                assert s.agent(AGENT) is None
        finally:
            opened.close()

    def test_the_visibility_clock_only_moves_forward(self, path: Path) -> None:
        opened = self.open_index(path)
        try:
            with opened.write_session() as s:
                s.raise_clock(100)
                s.raise_clock(50)
            with opened.read_session() as s:
                assert s.clock() == 100
        finally:
            opened.close()

    def test_applying_a_commit_twice_records_it_once(self, path: Path) -> None:
        opened = self.open_index(path)
        try:
            commit, contents = _commit(1, "/memories/a.md", b"# a\n", ts=1_000)
            with opened.write_session() as s:
                s.put_agent(AGENT, "Alice", "store-1", 5)
                assert s.apply_commit(commit, 1_000, contents, commit.to_bytes())
                assert not s.apply_commit(commit, 2_000, contents, commit.to_bytes())
            with opened.read_session() as s:
                rows = s.commits(AGENT, before=None, limit=10)
                memory = s.memory(AGENT, "/memories/a.md")
                assert s.clock() == 1_000
            assert [r.revision for r in rows] == [1]
            assert memory is not None and memory.version == 1
        finally:
            opened.close()

    def test_path_states_answer_every_path_asked_in_one_read(self, path: Path) -> None:
        opened = self.open_index(path)
        try:
            first, contents = _commit(1, "/memories/notes/a.md", b"# a\n", ts=1_000)
            with opened.write_session() as s:
                s.put_agent(AGENT, "Alice", "store-1", 5)
                s.apply_commit(first, 1_000, contents, first.to_bytes())
                gone = Change("/memories/old.md", CREATED, 1, None, first.changes[0].after, 4)
                made = Commit(AGENT, 2, 2_000, "tester", "m", (gone,))
                s.apply_commit(made, 2_000, contents, made.to_bytes())
                dropped = Change("/memories/old.md", DELETED, 2, gone.after, None)
                deleted = Commit(AGENT, 3, 3_000, "tester", "m", (dropped,))
                s.apply_commit(deleted, 3_000, {}, deleted.to_bytes())
            asked = ["/memories/notes/a.md", "/memories/notes", "/memories/old.md", "/memories/x"]
            with opened.read_session() as s:
                states = s.path_states(AGENT, asked)
            assert sorted(states) == sorted(asked)
            live = states["/memories/notes/a.md"]
            assert live.memory is not None and live.memory.version == 1 and not live.is_folder
            assert live.last_version == 1
            folder = states["/memories/notes"]
            assert folder.memory is None and folder.is_folder and folder.last_version == 0
            old = states["/memories/old.md"]
            assert old.memory is None and old.last_version == 2 and not old.is_folder
            assert states["/memories/x"] == type(old)(None, 0, False)
        finally:
            opened.close()

    def test_a_pinned_walk_sees_only_what_was_visible_at_its_pin(self, path: Path) -> None:
        opened = self.open_index(path)
        try:
            first, contents = _commit(1, "/memories/a.md", b"# a\n", ts=1_000)
            second, more = _commit(2, "/memories/b.md", b"# b\n", ts=2_000)
            with opened.write_session() as s:
                s.put_agent(AGENT, "Alice", "store-1", 5)
                s.apply_commit(first, 1_000, contents, first.to_bytes())
                s.apply_commit(second, 2_000, more, second.to_bytes())
            with opened.read_session() as s:
                at_first = s.version_rows(("", "", 0), AGENT + "\x00", 1_000, 10)
                at_second = s.version_rows(("", "", 0), AGENT + "\x00", 2_000, 10)
                steps = s.step_rows("agent", AGENT, (-1, -1), 1_500, 10, commits=True)
                live_b = s.live_version_at(AGENT, "/memories/b.md", 1_500)
            assert [r[1] for r in at_first] == ["/memories/a.md"]
            assert [r[1] for r in at_second] == ["/memories/a.md", "/memories/b.md"]
            assert [r[4] for r in steps] == [1]
            assert live_b is None
        finally:
            opened.close()

    # ---- full-text search (memory:query) ---------------------------------------------

    def test_a_commit_is_searchable_in_its_transaction_and_a_delete_unsearchable(
        self, path: Path
    ) -> None:
        opened = self.open_index(path)
        try:
            made, contents = _change("/memories/a.md", b"the zebra sleeps\n")
            first = Commit(AGENT, 1, 1_000, "tester", "m", (made,))
            with opened.write_session() as s:
                s.put_agent(AGENT, "Alice", "store-1", 5)
                s.apply_commit(first, 1_000, contents, first.to_bytes())
                assert _found(s, "zebra") == ["/memories/a.md"]  # same transaction
            edited, more = _change(
                "/memories/a.md", b"the lion sleeps\n", version=2, before=made.after
            )
            second = Commit(AGENT, 2, 2_000, "tester", "m", (edited,))
            with opened.write_session() as s:
                s.apply_commit(second, 2_000, more, second.to_bytes())
            with opened.read_session() as s:
                assert _found(s, "zebra") == []
                assert _found(s, "lion") == ["/memories/a.md"]
                assert s.search_rows(AGENT) == {"/memories/a.md": edited.after}
            gone = Change("/memories/a.md", DELETED, 3, edited.after, None)
            third = Commit(AGENT, 3, 3_000, "tester", "m", (gone,))
            with opened.write_session() as s:
                s.apply_commit(third, 3_000, {}, third.to_bytes())
            with opened.read_session() as s:
                assert _found(s, "lion") == []
                assert s.search_rows(AGENT) == {}
        finally:
            opened.close()

    def test_search_weighs_description_over_body_and_filters_by_folder_and_metadata(
        self, path: Path
    ) -> None:
        opened = self.open_index(path)
        try:
            body, c1 = _change("/memories/b.md", b"otters otters otters swim\n")
            desc, c2 = _change(
                "/memories/notes/d.md",
                b"---\ndescription: otters\nkind: rule\n---\nabout rivers\n",
                description="otters",
                metadata={"kind": "rule"},
            )
            commit = Commit(AGENT, 1, 1_000, "tester", "m", (body, desc))
            with opened.write_session() as s:
                s.put_agent(AGENT, "Alice", "store-1", 5)
                s.apply_commit(commit, 1_000, {**c1, **c2}, commit.to_bytes())
            with opened.read_session() as s:
                assert _found(s, "otters") == ["/memories/notes/d.md", "/memories/b.md"]
                assert _found(s, "otters", folder="/memories/notes") == ["/memories/notes/d.md"]
                assert _found(s, "otters", filters=[("kind", "rule")]) == ["/memories/notes/d.md"]
                assert _found(s, "otters", filters=[("kind", "fact")]) == []
                assert _found(s, "otters -rivers") == ["/memories/b.md"]
        finally:
            opened.close()

    def test_a_scope_search_spans_its_agents_only_and_drop_agent_forgets_them(
        self, path: Path
    ) -> None:
        opened = self.open_index(path)
        try:
            with opened.write_session() as s:
                for n, agent in enumerate(("team", "team/a", "team/b", "teammate"), start=1):
                    s.put_agent(agent, agent, f"store-{n}", 5)
                    made, contents = _change("/memories/m.md", f"walrus {agent}\n".encode())
                    commit = Commit(agent, 1, 1_000 + n, "tester", "m", (made,))
                    s.apply_commit(commit, 1_000 + n, contents, commit.to_bytes())
            with opened.read_session() as s:
                found = _found(s, "walrus", ("scope", "team"))
            assert sorted(found) == [
                "team/a:/memories/m.md",
                "team/b:/memories/m.md",
                "team:/memories/m.md",
            ]
            with opened.write_session() as s:
                s.drop_agent("team/a")
            with opened.read_session() as s:
                assert sorted(_found(s, "walrus", ("scope", "team"))) == [
                    "team/b:/memories/m.md",
                    "team:/memories/m.md",
                ]
                assert s.search_rows("team/a") == {}
        finally:
            opened.close()

    def test_bulk_load_indexes_the_live_memories_for_search(self, path: Path) -> None:
        opened = self.open_index(path)
        try:
            made, contents = _change("/memories/a.md", b"penguins waddle\n")
            gone, more = _change("/memories/b.md", b"penguins too\n")
            first = Commit(AGENT, 1, 1_000, "tester", "m", (made, gone))
            dropped = Change("/memories/b.md", DELETED, 2, gone.after, None)
            second = Commit(AGENT, 2, 2_000, "tester", "m", (dropped,))
            entries = [
                (f"log/{c.revision}", c.to_bytes().decode(), json.loads(c.to_bytes()))
                for c in (first, second)
            ]
            blobs = {**contents, **more}
            with opened.write_session() as s:
                s.put_agent(AGENT, "Alice", "store-1", 5)
                s.bulk_load(AGENT, entries, blobs.__getitem__)
            with opened.read_session() as s:
                assert _found(s, "penguin") == ["/memories/a.md"]  # stemmed: penguins
        finally:
            opened.close()
