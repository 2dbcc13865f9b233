"""Two nodes sharing one backend: the loser of a log-entry race re-reads and re-checks.

One machine never loses this race (its writers queue on the index's write lock), so a
backend wrapper plays the other node: just before our create-if-absent of log entry N
it publishes its own entry N, as a writer on another machine sharing the bucket would.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from memfs.canonical import layout
from memfs.canonical.backend import MemoryBackend
from memfs.core.store import Store
from memfs.domain.commits import MODIFIED, Change, Commit, now_us
from memfs.errors import PreconditionFailed

AGENT = "users/alice/assistant"
PATH = "/memories/plan.md"


class OtherNodeFirst(MemoryBackend):
    """Publishes ``foreign`` under its log key right before our first try at that key."""

    def __init__(self) -> None:
        super().__init__()
        self.foreign: Commit | None = None

    def put_if_absent(self, key: str, data: bytes) -> bool:
        foreign = self.foreign
        if foreign is not None and key == layout.log_key(foreign.agent_id, foreign.revision):
            self.foreign = None
            assert super().put_if_absent(key, foreign.to_bytes())
        return super().put_if_absent(key, data)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def their_commit(revision: int, before: bytes, after: bytes, version: int) -> Commit:
    return Commit(
        agent_id=AGENT,
        revision=revision,
        ts=now_us(),
        actor="key:other-node",
        message="written elsewhere",
        changes=(
            Change(
                PATH, MODIFIED, version, sha(before), sha(after), len(after), content=after.decode()
            ),
        ),
    )


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Store, OtherNodeFirst]:
    backend = OtherNodeFirst()
    store = Store(tmp_path / "data", backend=backend)
    store.create_agent(AGENT)
    store.write(AGENT, PATH, b"v1", actor="me")
    return store, backend


def test_loser_rechecks_its_precondition_against_the_winner(
    setup: tuple[Store, OtherNodeFirst],
) -> None:
    store, backend = setup
    backend.foreign = their_commit(2, b"v1", b"theirs", 2)
    with pytest.raises(PreconditionFailed):
        store.write(AGENT, PATH, b"mine", if_match=sha(b"v1"), actor="me")
    # The winner's commit is the head; ours left nothing behind.
    assert store.read(AGENT, PATH).content == b"theirs"
    assert [c.revision for c in store.log(AGENT)] == [2, 1]
    assert not store.backend.exists(layout.log_key(AGENT, 3))


def test_loser_without_precondition_retries_at_the_next_revision(
    setup: tuple[Store, OtherNodeFirst],
) -> None:
    store, backend = setup
    backend.foreign = their_commit(2, b"v1", b"theirs", 2)
    result = store.write(AGENT, PATH, b"mine", actor="me")
    assert result.revision == 3 and result.memory.version == 3
    versions = store.versions(AGENT, PATH)
    assert [(v.version, v.actor) for v in versions] == [(1, "me"), (2, "key:other-node"), (3, "me")]
    entry = Commit.from_bytes(store.backend.get(layout.log_key(AGENT, 3)), where="test")
    assert entry.changes[0].before == sha(b"theirs")  # built on the winner's head


def test_a_lost_race_publishes_no_tree_file_of_the_loser(
    setup: tuple[Store, OtherNodeFirst],
) -> None:
    """The loser had made its new tree file (in a new folder) while its entry was being
    published; none of it shows, and the tree holds the winner's head."""
    store, backend = setup
    backend.foreign = their_commit(2, b"v1", b"theirs", 2)
    with pytest.raises(PreconditionFailed):
        store.rename(AGENT, PATH, "/memories/fresh/moved.md", if_match=sha(b"v1"), actor="me")
    root = layout.worktree_root(store.data_dir, AGENT)
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == ["plan.md"]
    assert (root / "plan.md").read_bytes() == b"theirs"
