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
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from memfs.derived.index.base import Index, ReadSession
from memfs.derived.index.schema import SCHEMA_VERSION
from memfs.domain.commits import CREATED, DELETED, RENAMED, Change, Commit
from memfs.domain.search_query import parse_query
from memfs.testing.index_fixtures import AGENT, _change, _commit
from memfs.testing.index_links_contract import LinksContract
from memfs.testing.index_log_contract import LogHeadsContract
from memfs.testing.index_plan_contract import PlanHeadContract


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


class IndexContract(LinksContract, LogHeadsContract, PlanHeadContract):
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

    def test_agent_rows_answer_each_agent_named_as_agent_does(self, path: Path) -> None:
        """A group commit's first call: every agent's row (None for one that does not
        exist), whatever order they are named in, and each row then follows the
        session's own commits."""
        opened = self.open_index(path)
        try:
            with opened.write_session() as s:
                s.put_agent(AGENT, "Alice", "store-1", 5)
                s.put_agent("bob", "Bob", "store-2", 6)
            commit, contents = _commit(1, "/memories/a.md", b"# a\n", ts=1_000)
            with opened.write_session() as s:
                rows = s.agent_rows(["nobody", "bob", AGENT])
                assert list(rows) == ["nobody", "bob", AGENT]
                assert rows["nobody"] is None
                assert rows["bob"] == s.agent("bob")
                alice = rows[AGENT]
                assert alice is not None and (alice.name, alice.revision) == ("Alice", 0)
                assert s.apply_commit(commit, 1_000, contents, commit.to_bytes())
                again = s.agent_rows([AGENT])[AGENT]
                assert again is not None and (again.revision, again.last_ts) == (1, 1_000)
            with opened.read_session() as r:
                assert r.agent(AGENT) == again
        finally:
            opened.close()

    def test_memory_read_answers_agent_damage_row_and_content_in_one_lookup(
        self, path: Path
    ) -> None:
        """Store.read's one lookup: None for an unknown agent; else the agent's damage,
        the live row (as ``memory`` answers it) and the index's copy of its content."""
        opened = self.open_index(path)
        try:
            data = b"---\ndescription: d\nkind: note\n---\nbody\n"
            change, contents = _change(
                "/memories/a.md", data, description="d", metadata={"kind": "note", "n": 2}
            )
            commit = Commit(AGENT, 1, 1_000, "tester", "m", (change,))
            with opened.write_session() as s:
                s.put_agent(AGENT, "Alice", "store-1", 5)
                s.put_agent("bob", "Bob", "store-1", 5)
                s.apply_commit(commit, 1_000, contents, commit.to_bytes())
            with opened.read_session() as r:
                assert r.memory_read("nobody", "/memories/a.md") is None
                assert r.memory_read("bob", "/memories/a.md") == (None, None, None)
                assert r.memory_read(AGENT, "/memories/b.md") == (None, None, None)
                live = r.memory(AGENT, "/memories/a.md")
                assert live is not None and live.metadata == {"kind": "note", "n": 2}
                assert r.memory_read(AGENT, "/memories/a.md") == (None, live, data)
            with opened.write_session() as s:
                s.mark_damaged(AGENT, "log/0001", "bad")
            # A session for one statement answers it the same (no transaction needed).
            with opened.statement_session() as one:
                damage, row, _ = one.memory_read(AGENT, "/memories/a.md") or (None, None, None)
                assert damage == ("log/0001", "bad") and row == live
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

    # Bytewise order: "-" (0x2d) < "/" (0x2f) < "0" (0x30), uppercase before lowercase,
    # and non-ASCII after ASCII. A linguistic collation orders these differently.
    BYTEWISE = (
        "/memories/B.md",
        "/memories/a-c.md",
        "/memories/a/b.md",
        "/memories/a/é.md",
        "/memories/a0.md",
        "/memories/z.md",
        "/memories/é.md",
        "/memories/日本.md",
    )

    def _load(self, opened: Index, paths: tuple[str, ...]) -> None:
        with opened.write_session() as s:
            s.put_agent(AGENT, "Alice", "store-1", 5)
            for revision, name in enumerate(reversed(paths), start=1):
                commit, contents = _commit(revision, name, f"# {revision}\n".encode(), ts=revision)
                s.apply_commit(commit, revision, contents, commit.to_bytes())

    def test_listings_page_in_bytewise_path_order(self, path: Path) -> None:
        opened = self.open_index(path)
        try:
            self._load(opened, self.BYTEWISE)
            expected = sorted(self.BYTEWISE, key=lambda p: p.encode())
            assert list(self.BYTEWISE) == expected
            with opened.read_session() as s:
                page, more = s.list_memories(
                    AGENT, "/memories", after=None, limit=100, depth_one=False
                )
                assert [m.path for m in page] == expected and not more
                seen: list[str] = []
                after: str | None = None
                while True:  # one entry per page: every keyset cursor lands where it should
                    one, more = s.list_memories(
                        AGENT, "/memories", after=after, limit=1, depth_one=False
                    )
                    seen += [m.path for m in one]
                    if not more:
                        break
                    after = one[-1].path
                assert seen == expected
                json_page = s.list_memories_json(
                    AGENT, "/memories", after=None, limit=3, depth_one=False
                )
                assert json_page.last == expected[2] and json_page.more
                top, more = s.list_memories(
                    AGENT, "/memories", after=None, limit=100, depth_one=True
                )
                assert [m.path for m in top] == [
                    "/memories/B.md",
                    "/memories/a-c.md",
                    "/memories/a",
                    "/memories/a0.md",
                    "/memories/z.md",
                    "/memories/é.md",
                    "/memories/日本.md",
                ]
                assert type(top[2]).__name__ == "FolderEntry" and not more
                rest, _ = s.list_memories(
                    AGENT, "/memories", after="/memories/a/", limit=100, depth_one=True
                )
                assert [m.path for m in rest] == [p.path for p in top[3:]]
                assert s.count_memories(AGENT, "/memories", depth_one=True) == 7
                assert s.count_memories(AGENT, "/memories", depth_one=False) == len(expected)
                assert s.count_memories(AGENT, "/memories/a", depth_one=False) == 2
                assert s.is_folder(AGENT, "/memories/a") and not s.is_folder(AGENT, "/memories/a-c")
                agents = s.agents("", None, 10)
            assert [a.agent_id for a in agents] == [AGENT]
        finally:
            opened.close()

    def test_two_instances_on_one_index_keep_the_as_of_rule(self, path: Path) -> None:
        """Two servers (instances) on one index: a commit stamped by one after the other
        read the clock never shows in a walk pinned at that reading, and a writer of
        one instance waits for the other's write transaction and stamps after it."""
        node_a = self.open_index(path)
        node_b = self.open_index(path)
        try:
            with node_a.write_session() as s:
                s.put_agent(AGENT, "Alice", "store-1", 5)
            stamped = threading.Event()
            release = threading.Event()
            stamps: dict[str, int] = {}

            def commit_on(node: Index, name: str, revision: int, *, hold: bool) -> None:
                with node.write_session() as s:
                    s.agent(AGENT)  # as a store's commit does: the agent's head first
                    at = max(time.time_ns() // 1000, s.clock() + 1)
                    commit, contents = _commit(revision, f"/memories/{name}.md", b"x\n", ts=at)
                    s.apply_commit(commit, at, contents, commit.to_bytes())
                    stamps[name] = at
                    if hold:
                        stamped.set()
                        assert release.wait(60)

            writer_b = threading.Thread(
                target=commit_on, args=(node_b, "b", 1), kwargs={"hold": True}
            )
            writer_b.start()
            assert stamped.wait(60)
            # B's commit is stamped but not yet committed: A's reading precedes it.
            with node_a.read_session() as r:
                pin = r.clock()
            assert pin < stamps["b"]
            writer_a = threading.Thread(
                target=commit_on, args=(node_a, "a", 2), kwargs={"hold": False}
            )
            writer_a.start()
            release.set()
            writer_b.join(60)
            writer_a.join(60)
            assert not writer_a.is_alive() and not writer_b.is_alive()
            assert stamps["a"] > stamps["b"]  # A waited for B's transaction, then stamped
            for node in (node_a, node_b):
                with node.read_session() as r:
                    pinned = r.version_rows(("", "", 0), AGENT + "\x00", pin, 10)
                    now = r.version_rows(("", "", 0), AGENT + "\x00", r.clock(), 10)
                    assert r.clock() >= stamps["a"]  # each node reads the other's writes
                assert pinned == []
                assert [r[1] for r in now] == ["/memories/a.md", "/memories/b.md"]
        finally:
            node_a.close()
            node_b.close()

    def test_every_query_answers_the_same_on_every_engine(self, path: Path) -> None:
        """Metadata filters and totals, versions and history, runs and their steps, the
        scope walkers, damage, savepoints and erasing one agent: what each answers."""
        opened = self.open_index(path)
        other = AGENT + "/helper"
        try:
            with opened.write_session() as s:
                for agent_id in (AGENT, other):
                    s.put_agent(agent_id, agent_id.title(), "store-1", 5)
                data = b"---\nkind: note\n---\n"
                sha = hashlib.sha256(data).hexdigest()
                tagged = Change(
                    "/memories/t.md",
                    CREATED,
                    1,
                    None,
                    sha,
                    len(data),
                    content=data.decode(),
                    description="d",
                    metadata={"kind": "note", "n": 2},
                )
                first = Commit(AGENT, 1, 1_000, "tester", "one", (tagged,))
                s.apply_commit(first, 1_000, {sha: data}, first.to_bytes())
                second, more = _commit(2, "/memories/u.md", b"u\n", ts=2_000)
                s.apply_commit(second, 2_000, more, second.to_bytes())
                newer = b"---\nkind: idea\n---\n"
                nsha = hashlib.sha256(newer).hexdigest()
                update = Change(
                    "/memories/t.md",
                    "updated",
                    2,
                    sha,
                    nsha,
                    len(newer),
                    content=newer.decode(),
                    metadata={"kind": "idea"},
                )
                third = Commit(AGENT, 3, 3_000, "tester", "three", (update,))
                s.apply_commit(third, 3_000, {nsha: newer}, third.to_bytes())
                helper, helper_contents = _commit(1, "/memories/h.md", b"h\n", ts=2_500)
                helper = Commit(other, 1, 2_500, "tester", "h", helper.changes)
                s.apply_commit(helper, 2_500, helper_contents, helper.to_bytes())
                run = [
                    AGENT,
                    "r1",
                    "t1",
                    "w1",
                    "delayed",
                    1,
                    3,
                    500,
                    100,
                    None,
                    None,
                    None,
                    None,
                    None,
                    1,
                    "k1",
                ]
                s.put_run(run)
                s.put_run(
                    [
                        AGENT,
                        "r2",
                        "t1",
                        "w2",
                        "succeeded",
                        1,
                        3,
                        None,
                        200,
                        210,
                        220,
                        0,
                        "out",
                        None,
                        2,
                        "k2",
                    ]
                )
                s.add_run_step(AGENT, "r1", 1, 100, 1_500, "created", 0, "{}")
                s.add_run_step(AGENT, "r1", 1, 100, 9_999, "created", 0, "{}")  # kept once
                s.mark_damaged(other, "log/x", "bad")
                s.savepoint("sp")
                s.put_agent("zed", "Zed", "store-1", 5)
                s.rollback_to("sp")
                s.release("sp")
            with opened.read_session() as r:
                assert r.agent("zed") is None
                assert r.agent_ids() == {AGENT, other}
                assert sorted(r.agent_heads()) == [(AGENT, 3), (other, 1)]
                assert r.agent_stats(AGENT) == (2, len(newer) + 2)
                kinds = r.list_memories(
                    AGENT, "", after=None, limit=10, depth_one=False, filters=[("kind", "idea")]
                )[0]
                assert [m.path for m in kinds] == ["/memories/t.md"]
                assert r.count_memories(AGENT, "", depth_one=False, filters=[("kind", "note")]) == 0
                assert r.count_memories(AGENT, "", depth_one=False) == 2
                assert r.count_memories(AGENT, "", depth_one=True) == 1  # the folder /memories
                t = r.memory(AGENT, "/memories/t.md")
                assert t is not None and (t.version, t.created_at, t.updated_at) == (
                    2,
                    1_000,
                    3_000,
                )
                assert t.metadata == {"kind": "idea"}
                assert [v.version for v in r.versions(AGENT, "/memories/t.md", 0, 10)] == [1, 2]
                v1 = r.version(AGENT, "/memories/t.md", 1)
                assert v1 is not None and (v1.valid_to, v1.description, v1.message) == (
                    3_000,
                    "d",
                    "one",
                )
                assert v1.metadata == {"kind": "note", "n": 2}
                assert r.last_version(AGENT, "/memories/t.md") == 2
                history = r.commits(AGENT, before=None, limit=10, path="/memories/t.md")
                assert [c.revision for c in history] == [3, 1]
                assert [c.revision for c in r.commits(AGENT, before=3, limit=10)] == [2, 1]
                assert "content" not in json.dumps(history[0].changes)
                entry = r.commit_entry(AGENT, 3)
                assert entry is not None and entry[:3] == (3_000, "tester", "three")
                assert sorted(r.commit_revisions(AGENT)) == [1, 2, 3]
                assert r.first_revision_with(AGENT, nsha) == 3
                assert r.has_version_larger_than(AGENT, sha, 1)
                assert not r.has_version_larger_than(AGENT, sha, len(data))
                assert r.blob(AGENT, nsha) == newer and r.blob(other, nsha) is None
                assert sorted(sha for sha, _ in r.cached_blobs(AGENT)) == sorted(
                    [sha, nsha, second.changes[0].after or ""]
                )
                assert r.live_paths(AGENT, ["/memories/t.md", "/memories/x.md"]) == {
                    "/memories/t.md"
                }
                assert sorted(r.live_contents(AGENT)) == sorted(
                    [("/memories/t.md", nsha), ("/memories/u.md", second.changes[0].after or "")]
                )
                assert r.ever_written(AGENT) and not r.ever_written("zed")
                assert r.damage(other) == ("log/x", "bad") and r.damage(AGENT) is None
                assert r.damaged_agents() == [(other, "log/x", "bad")]
                assert r.runs_by_status() == {"delayed": 1, "succeeded": 1}
                row = r.run_row(AGENT, "r1")
                assert row is not None and list(row) == run
                assert [x[1] for x in r.due_run_rows(499, 10)] == []
                assert [x[1] for x in r.due_run_rows(500, 10)] == ["r1"]
                page = r.run_rows(AGENT, trigger_id="t1", status=None, after=(100, "r1"), limit=5)
                assert [x[1] for x in page] == ["r2"]
                counts = r.run_counts(AGENT)
                assert counts == {
                    "by_status": {"delayed": 1, "succeeded": 1},
                    "last_finished": 220,
                    "next_retry": 500,
                }
                assert r.finished_deliveries(300) == [(AGENT, "r2", "k2")]
                steps = r.step_rows("agent", AGENT, (-1, "", -1), 2_000, 10, commits=False)
                assert [(x[0], x[3], x[4], x[9]) for x in steps] == [(1_500, "r1", 1, "created")]
                scope = r.step_rows("scope", AGENT, (-1, "", -1), 10_000, 10, commits=True)
                assert [(x[1], x[4]) for x in scope] == [
                    (AGENT, 1),
                    (AGENT, 2),
                    (other, 1),
                    (AGENT, 3),
                ]
                assert r.live_version_at(AGENT, "/memories/t.md", 2_999) == 1
                assert r.live_version_at(AGENT, "/memories/t.md", 3_000) == 2
                every = r.version_rows(("", "", 0), AGENT + "0", 10_000, 10)
                assert [(x[0], x[1], x[2]) for x in every] == [
                    (AGENT, "/memories/t.md", 1),
                    (AGENT, "/memories/t.md", 2),
                    (AGENT, "/memories/u.md", 1),
                    (other, "/memories/h.md", 1),
                ]
                assert [a.agent_id for a in r.agents(AGENT, AGENT, 10)] == [other]
            with opened.write_session() as s:
                s.forget_delivery(AGENT, "r2")
                s.drop_agent(other)
                s.clear_damage(AGENT)
            with opened.read_session() as r:
                assert r.finished_deliveries(300) == []
                assert r.agent_ids() == {AGENT} and r.damaged_agents() == []
                assert r.version_rows(("", "", 0), AGENT + "0", 10_000, 10)[-1][0] == AGENT
            with opened.write_session() as s:
                s.clear_tables(["runs", "run_steps"])
            with opened.read_session() as r:
                assert r.runs_by_status() == {} and r.agent(AGENT) is not None
            opened.checkpoint()
        finally:
            opened.close()

    def test_text_with_nul_and_control_characters_is_kept_exactly(self, path: Path) -> None:
        """The log may hold NUL in a description, metadata, a commit message or a run's
        output (the memory tool's lenient writes, YAML's "\\0"): the index keeps each
        exactly, and filters match it."""
        opened = self.open_index(path)
        odd = "a\x00b \x01lead"
        lead = "\x01starts with the marker"
        try:
            data = b"x\n"
            sha = hashlib.sha256(data).hexdigest()
            change = Change(
                "/memories/n.md",
                CREATED,
                1,
                None,
                sha,
                len(data),
                content=data.decode(),
                description=odd,
                metadata={"k\x00": lead, "plain": odd},
            )
            commit = Commit(AGENT, 1, 1_000, "act\x00or", odd, (change,), agent_name=lead)
            with opened.write_session() as s:
                s.put_agent(AGENT, odd, "store-1", 5)
                s.apply_commit(commit, 1_000, {sha: data}, commit.to_bytes())
                s.put_run(
                    [
                        AGENT,
                        "r1",
                        "t1",
                        "w1",
                        "failed",
                        1,
                        1,
                        None,
                        100,
                        101,
                        102,
                        1,
                        odd,
                        lead,
                        1,
                        None,
                    ]
                )
                s.add_run_step(AGENT, "r1", 1, 100, 1_000, "finished", 1, odd)
                s.mark_damaged(AGENT, odd, lead)
            with opened.read_session() as r:
                m = r.memory(AGENT, "/memories/n.md")
                assert m is not None and m.description == odd
                assert m.metadata == {"k\x00": lead, "plain": odd}
                found = r.list_memories(
                    AGENT, "", after=None, limit=5, depth_one=False, filters=[("plain", odd)]
                )[0]
                assert [x.path for x in found] == ["/memories/n.md"]
                assert r.count_memories(AGENT, "", depth_one=False, filters=[("k\x00", lead)]) == 1
                row = r.commits(AGENT, before=None, limit=1)[0]
                assert (row.actor, row.message) == ("act\x00or", odd)
                agent = r.agent(AGENT)
                assert agent is not None and agent.name == lead
                run = r.run_row(AGENT, "r1")
                assert run is not None and (run[12], run[13]) == (odd, lead)
                steps = r.step_rows("agent", AGENT, (-1, "", -1), 1_000, 5, commits=False)
                assert steps[0][8] == odd
                assert r.damage(AGENT) == (odd, lead)
                assert r.memory_read(AGENT, "/memories/n.md") == ((odd, lead), m, data)
                assert [x[5] for x in r.live_rows(AGENT)] == [1_000]
                assert r.live_rows(AGENT)[0][3] == odd
        finally:
            opened.close()

    def test_a_bulk_loaded_log_answers_as_the_same_commits_applied_one_by_one(
        self, tmp_path: Path
    ) -> None:
        """Reindex's bulk load gives the rows that applying each commit gives."""
        data = b"---\ndescription: first\nkind: a\n---\n"
        sha = hashlib.sha256(data).hexdigest()
        newer = b"second, see [[y]] and [z](sub/z.md)\n"
        nsha = hashlib.sha256(newer).hexdigest()
        made = Change(
            "/memories/x.md",
            CREATED,
            1,
            None,
            sha,
            len(data),
            content=data.decode(),
            description="first",
            metadata={"kind": "a"},
        )
        updated = Change(
            "/memories/x.md", "updated", 2, sha, nsha, len(newer), content=newer.decode()
        )
        other, other_contents = _commit(2, "/memories/y.md", b"y\n", ts=2_000)
        gone = Change("/memories/y.md", DELETED, 2, other.changes[0].after, None)
        log = [
            Commit(AGENT, 1, 1_000, "tester", "one", (made,)),
            other,
            Commit(AGENT, 3, 3_000, "tester", "three", (updated,)),
            Commit(AGENT, 4, 4_000, "tester", "four", (gone,), agent_name="Renamed"),
        ]
        contents = {sha: data, nsha: newer, **other_contents}
        answers = []
        for name, bulk in (("applied", False), ("loaded", True)):
            opened = self.open_index(tmp_path / f"{name}.sqlite")
            try:
                with opened.write_session() as s:
                    s.put_agent(AGENT, "Alice", "store-1", 5)
                    if bulk:
                        entries = [
                            (f"log/{c.revision}", c.to_bytes().decode(), json.loads(c.to_bytes()))
                            for c in log
                        ]
                        assert s.bulk_load(AGENT, entries, contents.__getitem__) == 4
                    else:
                        for c in log:
                            s.apply_commit(c, c.ts, contents, c.to_bytes())
                with opened.read_session() as r:
                    answers.append(
                        (
                            r.agent(AGENT),
                            r.clock(),
                            r.list_memories(AGENT, "", after=None, limit=10, depth_one=False),
                            r.versions(AGENT, "/memories/x.md", 0, 10),
                            r.versions(AGENT, "/memories/y.md", 0, 10),
                            r.commits(AGENT, before=None, limit=10),
                            sorted(r.cached_blobs(AGENT)),
                            sorted(r.live_rows(AGENT)),
                            r.count_memories(AGENT, "", depth_one=False, filters=[("kind", "a")]),
                            r.version_rows(("", "", 0), AGENT + "\x00", 10_000, 10),
                            r.step_rows("agent", AGENT, (-1, -1), 10_000, 10, commits=True),
                            r.link_rows(("", "", 0, -1), AGENT + "\x00", 10_000, 10),
                            r.agent_links(AGENT),
                        )
                    )
            finally:
                opened.close()
        assert answers[0] == answers[1]
        assert [x[4] for x in answers[0][-2]] == ["/memories/y.md", "/memories/sub/z.md"]
        agent = answers[1][0]
        assert agent is not None and (agent.name, agent.revision, agent.last_ts) == (
            "Renamed",
            4,
            4_000,
        )

    def test_the_agent_row_keeps_its_memory_count_and_bytes_through_every_change(
        self, tmp_path: Path
    ) -> None:
        """The summary reads them from the agent's row: creates, updates, deletes and
        renames move them in the commit's transaction, and a bulk load gives the same."""
        a, a_blob = _change("/memories/a.md", b"aaaa\n")  # 5 bytes
        b, b_blob = _change("/memories/b.md", b"bb\n")  # 3 bytes
        a2, a2_blob = _change("/memories/a.md", b"a\n", version=2, before=a.after)
        moved_out = Change("/memories/b.md", RENAMED, 2, b.after, None, renamed_to="/m/c.md")
        moved_in = Change("/m/c.md", RENAMED, 1, None, b.after, 3, "bb\n", renamed_from=b.path)
        gone = Change("/memories/a.md", DELETED, 3, a2.after, None)
        log = [
            Commit(AGENT, 1, 1_000, "t", "m", (a, b)),
            Commit(AGENT, 2, 2_000, "t", "m", (a2,)),
            Commit(AGENT, 3, 3_000, "t", "m", (moved_out, moved_in)),
            Commit(AGENT, 4, 4_000, "t", "m", (gone,)),
        ]
        after_each = [(2, 8), (2, 5), (2, 5), (1, 3)]
        blobs = {**a_blob, **b_blob, **a2_blob}
        for name, bulk in (("applied", False), ("loaded", True)):
            opened = self.open_index(tmp_path / f"{name}.sqlite")
            try:
                with opened.write_session() as s:
                    s.put_agent(AGENT, "Alice", "store-1", 5)
                    s.put_agent("bob", "Bob", "store-2", 5)
                with opened.read_session() as r:
                    assert r.agent_stats(AGENT) == (0, 0)
                if bulk:
                    entries = [
                        (f"log/{c.revision}", c.to_bytes().decode(), json.loads(c.to_bytes()))
                        for c in log
                    ]
                    with opened.write_session() as s:
                        s.bulk_load(AGENT, entries, blobs.__getitem__)
                    expected = [after_each[-1]]
                else:
                    expected = []
                    for c in log:
                        with opened.write_session() as s:
                            s.apply_commit(c, c.ts, blobs, c.to_bytes())
                            s.apply_commit(c, c.ts, blobs, c.to_bytes())  # counted once
                        with opened.read_session() as r:
                            expected.append(r.agent_stats(AGENT))
                    assert expected == after_each
                with opened.read_session() as r:
                    assert r.agent_stats(AGENT) == expected[-1]
                    assert r.agent_stats("bob") == (0, 0)  # another agent's rows apart
                    assert r.agent_stats("nobody") == (0, 0)
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
