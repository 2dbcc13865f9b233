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
import threading
import time
from pathlib import Path

import pytest

from memfs.derived.index.base import Index
from memfs.derived.index.schema import SCHEMA_VERSION
from memfs.domain.commits import CREATED, DELETED, Change, Commit

AGENT = "alice"


def _commit(revision: int, path: str, data: bytes, ts: int) -> tuple[Commit, dict[str, bytes]]:
    sha = hashlib.sha256(data).hexdigest()
    change = Change(path, CREATED, 1, None, sha, len(data), content=data.decode())
    return Commit(AGENT, revision, ts, "tester", "m", (change,)), {sha: data}


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
