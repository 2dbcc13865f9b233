"""The Index contract: what the derived index promises, one suite per implementation.

A new index runs the whole suite by subclassing and saying how to open one on a file::

    class TestMyIndex(IndexContract):
        def open_index(self, path: Path) -> Index:
            return MyIndex(path)

``tests/test_index_contract.py`` runs it for the SQLite index.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from memfs.derived import index
from memfs.derived.index import Index
from memfs.domain.commits import CREATED, Change, Commit

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
            with opened.read() as conn:
                assert index.schema(conn) == index.SCHEMA_VERSION
                assert index.clock(conn) == 0
        finally:
            opened.close()

    def test_what_a_write_session_commits_survives_reopening(self, path: Path) -> None:
        opened = self.open_index(path)
        with opened.write() as conn:
            index.put_agent(conn, AGENT, "Alice", "store-1", 5)
        opened.close()
        again = self.open_index(path)
        try:
            assert not again.created
            with again.read() as conn:
                row = index.agent(conn, AGENT)
            assert row is not None and (row.name, row.revision) == ("Alice", 0)
        finally:
            again.close()

    def test_a_failed_write_session_changes_nothing(self, path: Path) -> None:
        opened = self.open_index(path)
        try:
            with pytest.raises(RuntimeError), opened.write() as conn:
                index.put_agent(conn, AGENT, "Alice", "store-1", 5)
                raise RuntimeError("abort")
            with opened.read() as conn:
                assert index.agent(conn, AGENT) is None
        finally:
            opened.close()

    def test_the_visibility_clock_only_moves_forward(self, path: Path) -> None:
        opened = self.open_index(path)
        try:
            with opened.write() as conn:
                index.raise_clock(conn, 100)
                index.raise_clock(conn, 50)
            with opened.read() as conn:
                assert index.clock(conn) == 100
        finally:
            opened.close()

    def test_applying_a_commit_twice_records_it_once(self, path: Path) -> None:
        opened = self.open_index(path)
        try:
            commit, contents = _commit(1, "/memories/a.md", b"# a\n", ts=1_000)
            with opened.write() as conn:
                index.put_agent(conn, AGENT, "Alice", "store-1", 5)
                assert index.apply_commit(conn, commit, 1_000, contents, commit.to_bytes())
                assert not index.apply_commit(conn, commit, 2_000, contents, commit.to_bytes())
            with opened.read() as conn:
                rows = index.commits(conn, AGENT, before=None, limit=10)
                memory = index.memory(conn, AGENT, "/memories/a.md")
                assert index.clock(conn) == 1_000
            assert [r.revision for r in rows] == [1]
            assert memory is not None and memory.version == 1
        finally:
            opened.close()
