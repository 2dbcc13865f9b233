"""The Index contract's part for inspect's log: each commit row's change count and
first changes (``LOG_HEAD``), what the console's abbreviated log reads.

``IndexContract`` (``index_contract.py``) inherits it, so every index runs it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from memfs.derived.index.base import Index
from memfs.domain.commits import CREATED, LOG_HEAD, Change, Commit
from memfs.testing.index_fixtures import AGENT


def _bulk(revision: int, count: int, ts: int) -> tuple[Commit, dict[str, bytes]]:
    changes, contents = [], {}
    for i in range(count):
        data = f"memory {revision}.{i}\n".encode()
        sha = hashlib.sha256(data).hexdigest()
        path = f"/memories/r{revision}/{i:03}.md"
        changes.append(Change(path, CREATED, 1, None, sha, len(data), content=data.decode()))
        contents[sha] = data
    return Commit(AGENT, revision, ts, "tester", f"bulk {revision}", tuple(changes)), contents


class LogHeadsContract:
    """A commit's steps: every change, or its first ones with its change count."""

    def open_index(self, path: Path) -> Index:
        raise NotImplementedError

    def test_a_commit_step_gives_its_first_changes_and_count_applied_or_bulk_loaded(
        self, tmp_path: Path
    ) -> None:
        """``step_rows(…, heads=True)``: each commit's first LOG_HEAD changes (without
        inline contents, as its full changes) and its change count, the same whether
        the commit was applied or reindex bulk-loaded it; ``heads=False`` every change."""
        big, big_contents = _bulk(1, LOG_HEAD + 3, 1_000)
        small, small_contents = _bulk(2, 2, 2_000)
        contents = {**big_contents, **small_contents}
        answers: list[Any] = []
        for name, bulk in (("applied", False), ("loaded", True)):
            opened = self.open_index(tmp_path / f"{name}.sqlite")
            try:
                with opened.write_session() as s:
                    s.put_agent(AGENT, "Alice", "store-1", 5)
                    if bulk:
                        entries = [
                            (f"log/{c.revision}", c.to_bytes().decode(), json.loads(c.to_bytes()))
                            for c in (big, small)
                        ]
                        s.bulk_load(AGENT, entries, contents.__getitem__)
                    else:
                        for c in (big, small):
                            s.apply_commit(c, c.ts, contents, c.to_bytes())
                with opened.read_session() as r:
                    seek = (-1, -1)
                    full = r.step_rows("agent", AGENT, seek, 10_000, 10, commits=True)
                    heads = r.step_rows("agent", AGENT, seek, 10_000, 10, commits=True, heads=True)
                    scope = r.step_rows("scope", AGENT, (-1, "", -1), 10_000, 10, commits=True)
                    scoped = r.step_rows(
                        "scope", AGENT, (-1, "", -1), 10_000, 10, commits=True, heads=True
                    )
            finally:
                opened.close()
            assert [row[11] for row in heads] == [LOG_HEAD + 3, 2]
            assert [row[11] for row in full] == [LOG_HEAD + 3, 2]
            every = [json.loads(str(row[8])) for row in full]
            assert [len(c) for c in every] == [LOG_HEAD + 3, 2]
            assert all("content" not in change for c in every for change in c)
            assert [json.loads(str(row[8])) for row in heads] == [c[:LOG_HEAD] for c in every]
            assert [row[:8] for row in heads] == [row[:8] for row in full]
            assert (scope, scoped) == (full, heads)
            answers.append((full, heads))
        assert answers[0] == answers[1]
