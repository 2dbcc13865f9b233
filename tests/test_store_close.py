"""Closing a Store gives back every descriptor it opened: a process that opens and
closes stores (the CLI's commands in one process, a test suite, an embedding app) must
not run out of descriptors, and select()-style code past 1,024 must never be reached."""

from __future__ import annotations

import gc
import os
from pathlib import Path

from memfs.core.store import Store


def open_descriptors() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def use(store: Store, agents: int) -> None:
    for n in range(agents):
        agent = store.create_agent(f"users/u{n}/assistant").agent_id
        store.write(agent, "/memories/note.md", b"---\ndescription: d\n---\nbody\n", actor="t")
        store.write(agent, "/memories/note.md", b"second\n", actor="t")
        assert store.read(agent, "/memories/note.md").content == b"second\n"


def test_closing_a_store_closes_its_segments_and_index(tmp_path: Path) -> None:
    before = open_descriptors()
    for round_ in range(3):
        store = Store(tmp_path / f"data{round_}")
        use(store, agents=4)
        store.close()
    gc.collect()
    assert open_descriptors() - before == set()


def test_a_closed_store_can_be_opened_again_and_reads_what_it_wrote(tmp_path: Path) -> None:
    store = Store(tmp_path / "data")
    use(store, agents=2)
    store.close()
    again = Store(tmp_path / "data")
    try:
        again.write("users/u0/assistant", "/memories/note.md", b"third\n", actor="t")
        assert again.read("users/u0/assistant", "/memories/note.md").content == b"third\n"
        assert again.read("users/u1/assistant", "/memories/note.md").content == b"second\n"
    finally:
        again.close()

