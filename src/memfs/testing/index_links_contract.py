"""The Index contract's part for inspect's graph edges: the links table's walk.

``IndexContract`` (``index_contract.py``) inherits it, so every index runs it.
"""

from __future__ import annotations

from pathlib import Path

from memfs.derived.index.base import Index
from memfs.domain.commits import Commit
from memfs.testing.index_fixtures import AGENT, _change, _commit


class LinksContract:
    """Each stored version's links, as inspect's edges walk them."""

    def open_index(self, path: Path) -> Index:
        raise NotImplementedError

    def test_link_rows_page_by_key_pinned_with_each_target_live_at_the_pin(
        self, path: Path
    ) -> None:
        """Inspect's edges: each stored version's links, in (agent, path, version, idx)
        order from a seek, only versions visible at the pin, the target's live version
        as of the pin; a scope's sub-agent in its own range; drop_agent forgets them."""
        opened = self.open_index(path)
        other = AGENT + "/sub"
        try:
            one, c1 = _commit(1, "/memories/a.md", b"[[b]] [[c]] [[a]]\n", ts=1_000)
            two, c2 = _commit(2, "/memories/b.md", b"# b, no links\n", ts=2_000)
            three, c3 = _change(
                "/memories/a.md", b"[x](b.md)\n", version=2, before=one.changes[0].after
            )
            four, c4 = _commit(1, "/memories/z.md", b"[[a]]\n", ts=1_500)
            four = Commit(other, 1, 1_500, "tester", "m", four.changes)
            with opened.write_session() as s:
                s.put_agent(AGENT, "Alice", "store-1", 5)
                s.put_agent(other, "Sub", "store-1", 5)
                s.apply_commit(one, 1_000, c1, one.to_bytes())
                s.apply_commit(four, 1_500, c4, four.to_bytes())
                s.apply_commit(two, 2_000, c2, two.to_bytes())
                later = Commit(AGENT, 3, 3_000, "tester", "m", (three,))
                s.apply_commit(later, 3_000, c3, later.to_bytes())
            with opened.read_session() as r:
                top = AGENT + "\x00"
                at_1500 = r.link_rows(("", "", 0, -1), top, 1_500, 10)
                assert [(x[1], x[2], x[3], x[4], x[5]) for x in at_1500] == [
                    ("/memories/a.md", 1, 0, "/memories/b.md", None),
                    ("/memories/a.md", 1, 1, "/memories/c.md", None),
                    ("/memories/a.md", 1, 2, "/memories/a.md", 1),
                ]
                now = r.link_rows(("", "", 0, -1), top, 3_000, 10)
                assert [(x[1], x[2], x[3], x[5]) for x in now] == [
                    ("/memories/a.md", 1, 0, 1),
                    ("/memories/a.md", 1, 1, None),
                    ("/memories/a.md", 1, 2, 2),  # a.md@2 is live at 3000
                    ("/memories/a.md", 2, 0, 1),
                ]
                after = r.link_rows((AGENT, "/memories/a.md", 1, 1), top, 3_000, 2)
                assert [(x[2], x[3]) for x in after] == [(1, 2), (2, 0)]
                subs = r.link_rows(("", "", 0, -1), AGENT + "0", 3_000, 10)
                assert [(x[0], x[1]) for x in subs][-1] == (other, "/memories/z.md")
                assert r.agent_links(other) == [(("/memories/z.md"), 1, 0, "/memories/a.md", 1_500)]
            with opened.write_session() as s:
                s.drop_agent(other)
            with opened.read_session() as r:
                assert r.agent_links(other) == []
                assert len(r.agent_links(AGENT)) == 4
        finally:
            opened.close()
