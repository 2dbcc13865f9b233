"""The Index contract's part for a commit's planning read (``plan_head``): the
agent's row, its damage, the clock and every path's state from one snapshot.

``IndexContract`` (``index_contract.py``) inherits it, so every index runs it.
"""

from __future__ import annotations

from pathlib import Path

from memfs.derived.index.base import Index
from memfs.testing.index_fixtures import AGENT, _commit


class PlanHeadContract:
    """``plan_head`` answers what ``agent``, ``damage``, ``clock`` and ``path_states``
    answer, in a statement session too."""

    def open_index(self, path: Path) -> Index:
        raise NotImplementedError

    def test_plan_head_answers_the_agent_and_its_paths_at_once(self, path: Path) -> None:
        """A commit's planning read, in a statement session too: what ``agent``,
        ``damage``, ``clock`` and ``path_states`` answer (past one statement's paths)."""
        opened = self.open_index(path)
        try:
            first, contents = _commit(1, "/memories/notes/a.md", b"# a\n", ts=1_000)
            with opened.write_session() as s:
                s.put_agent(AGENT, "Alice", "store-1", 5)
                s.apply_commit(first, 1_500, contents, first.to_bytes())
            asked = ["/memories/notes/a.md", "/memories/notes", "/memories/x"]
            many = asked + [f"/memories/m/{i}.md" for i in range(1_000)]
            with opened.read_session() as s:
                agent, states = s.agent(AGENT), s.path_states(AGENT, many)
                clock = s.clock()
            with opened.statement_session() as one:
                head = one.plan_head(AGENT, asked)
                assert (head.agent, head.damage, head.clock) == (agent, None, clock)
                assert head.states == {p: states[p] for p in asked}
                assert one.plan_head(AGENT, many).states == states
                assert one.plan_head(AGENT, []).states == {}
                assert one.plan_head("nobody", asked).agent is None
            with opened.write_session() as s:
                s.mark_damaged(AGENT, "log/0001", "bad")
            with opened.statement_session() as one:
                head = one.plan_head(AGENT, asked)
            assert (head.agent, head.damage, clock) == (agent, ("log/0001", "bad"), 1_500)
        finally:
            opened.close()
