"""Group commit: log entries are made durable outside the index lock, indexed in batches,
and acknowledged only once durable and indexed, proved with real processes.

- concurrent commits of different agents create their log entries at the same time
  (a backend that lets an entry through only once 16 are being created at once);
- no index lock is held while an entry is made (the agent can be erased meanwhile:
  404, and the leftover entry is removed); an index failing after the entry is durable
  still acknowledges the commit, and the next write catches the index up;
- a real ``memfs serve`` is killed -9 while commits sit between "entry durable" and
  "acknowledged" (the test-only fault point ``MEMFS_TEST_FAULT=after-durable-before-ack``
  parks them there): every acknowledged write survives the restart, and the durable
  but unacknowledged ones are adopted, with fsck clean;
- a real ``memfs serve`` whose disk fails every fsync of the log
  (``MEMFS_TEST_FAULT=log-fsync-eio``) answers 503, retryable, to every commit, never a
  2xx, and nothing of those commits ever becomes visible.
"""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from memfs.canonical import layout
from memfs.canonical.backend import MemoryBackend
from memfs.core.commit import Committer
from memfs.core.store import Store
from memfs.errors import NotFound
from servers_real import RealServer, headers, memfs_cli

WAIT = 120.0  # seconds; generous for a loaded machine, never reached when all is well
MARKDOWN = {"Content-Type": "text/markdown"}
RAW = {"Accept": "text/markdown"}


def _url(agent: str, path: str = "") -> str:
    base = f"/v1/agents/{quote(agent, safe='')}"
    return f"{base}/memories/{path}" if path else base


class _Gate(MemoryBackend):
    """Lets a log entry through only once ``parties`` are being created at the same time."""

    def __init__(self, parties: int) -> None:
        super().__init__()
        self.barrier = threading.Barrier(parties, timeout=WAIT / 4)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        if "/.memfs/log/" in key:
            self.barrier.wait()  # BrokenBarrierError if the entries are made one at a time
        return super().put_if_absent(key, data)


def test_commits_of_different_agents_create_their_entries_at_once(tmp_path: Path) -> None:
    writers = 16
    store = Store(tmp_path / "data", backend=_Gate(writers), worktree=False)
    agents = [f"gc/a{i}" for i in range(writers)]
    for agent in agents:
        store.create_agent(agent)
    results: dict[str, int] = {}
    errors: list[BaseException] = []

    def write(agent: str) -> None:
        try:
            result = store.write(agent, "/memories/m.md", f"# {agent}\n".encode(), actor="t")
            # read-after-write: once answered, the commit is in the index
            assert store.read(agent, "/memories/m.md").content == f"# {agent}\n".encode()
            results[agent] = result.revision
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(agent,)) for agent in agents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    store.close()
    assert not errors, errors
    assert results == dict.fromkeys(agents, 1)


class _EraseDuringPut(MemoryBackend):
    """Erases the agent while its commit's log entry is being created."""

    def __init__(self) -> None:
        super().__init__()
        self.store: Store | None = None

    def put_if_absent(self, key: str, data: bytes) -> bool:
        created = super().put_if_absent(key, data)
        if "/.memfs/log/" in key and self.store is not None:
            store, self.store = self.store, None
            store.erase_agent("gc/erased")  # no index lock is held here: it can run
        return created


def test_an_agent_erased_while_its_entry_is_made_answers_404_and_keeps_nothing(
    tmp_path: Path,
) -> None:
    backend = _EraseDuringPut()
    store = Store(tmp_path / "data", backend=backend, worktree=False)
    store.create_agent("gc/erased")
    backend.store = store
    with pytest.raises(NotFound):
        store.write("gc/erased", "/memories/m.md", b"# m\n", actor="t")
    assert list(backend.list("agents/")) == []  # the entry was a leftover: removed
    store.create_agent("gc/erased")  # the id is free again, with an empty history
    assert store.write("gc/erased", "/memories/m.md", b"# m\n", actor="t").revision == 1
    store.close()


def test_an_index_failing_after_the_entry_is_durable_still_acknowledges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "data", backend=MemoryBackend(), worktree=False)
    store.create_agent("gc/full")
    real = Committer._index
    failures = iter([OSError(errno.ENOSPC, "No space left on device")])

    def failing(self: Committer, batch: list[Any]) -> None:
        for failure in failures:
            raise failure
        real(self, batch)

    monkeypatch.setattr(Committer, "_index", failing)
    first = store.write("gc/full", "/memories/a.md", b"# a\n", actor="t")
    assert first.revision == 1 and first.changed  # durable, so acknowledged
    assert store.backend.exists(layout.log_key("gc/full", 1))
    second = store.write("gc/full", "/memories/b.md", b"# b\n", actor="t")
    assert second.revision == 2  # planned after catching the index up from the log
    assert store.read("gc/full", "/memories/a.md").content == b"# a\n"
    assert store.read("gc/full", "/memories/b.md").content == b"# b\n"
    store.close()


def _fsck(data: Path) -> None:
    checked = memfs_cli("fsck", data=data, timeout=WAIT)
    assert checked.returncode == 0, checked.stdout + checked.stderr


class _Writer(threading.Thread):
    """Writes n0.md, n1.md, … of one agent until a request fails (the server died)."""

    def __init__(self, server: RealServer, agent: str) -> None:
        super().__init__(daemon=True)
        self.url, self.key, self.agent = server.url, server.admin_key, agent
        self.acked: list[tuple[str, bytes]] = []
        self.pending: tuple[str, bytes] | None = None  # sent, never answered

    def run(self) -> None:
        with httpx.Client(base_url=self.url, headers=headers(self.key), timeout=WAIT) as c:
            for i in range(10_000):
                path, body = f"n{i}.md", f"# {self.agent} {i}\n".encode()
                self.pending = (path, body)
                try:
                    response = c.put(_url(self.agent, path), content=body, headers=MARKDOWN)
                except httpx.TransportError:
                    return
                assert response.status_code == 201, response.text
                self.acked.append((path, body))
                self.pending = None


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_kill_between_durable_and_ack_loses_no_acknowledged_write(tmp_path: Path) -> None:
    data, marker = tmp_path / "data", tmp_path / "parked"
    agents = [f"gc/w{i}" for i in range(6)]
    passing = 30  # commits that go through before every later one is parked
    env = {"MEMFS_TEST_FAULT": f"after-durable-before-ack:{passing}"}
    env["MEMFS_TEST_FAULT_FILE"] = str(marker)
    server = RealServer(data, env=env).start()
    try:
        with server.client() as client:
            for agent in agents:
                assert client.put(_url(agent), json={}).status_code == 201
        writers = [_Writer(server, agent) for agent in agents]
        for writer in writers:
            writer.start()
        # every writer's last commit is parked: durable, neither indexed nor answered
        _wait_for(
            lambda: marker.exists() and len(marker.read_text().splitlines()) == len(agents),
            "the writers did not all reach the fault point",
        )
        server.kill_hard()
    finally:
        server.close()
    for writer in writers:
        writer.join(WAIT)
    assert sum(len(w.acked) for w in writers) <= passing
    assert all(w.pending is not None for w in writers)

    restarted = RealServer(data).start()  # heals: the parked entries are in the log
    try:
        with restarted.client() as client:
            for writer in writers:
                for path, body in writer.acked:
                    got = client.get(_url(writer.agent, path), headers=RAW)
                    assert got.status_code == 200 and got.content == body, (writer.agent, path)
                assert writer.pending is not None
                path, body = writer.pending
                adopted = client.get(_url(writer.agent, path), headers=RAW)
                assert adopted.status_code == 200 and adopted.content == body, writer.agent
                head = client.get(_url(writer.agent)).json()["revision"]
                assert head == len(writer.acked) + 1, writer.agent
    finally:
        restarted.close()
    _fsck(data)


def test_a_log_whose_fsync_fails_acknowledges_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    agents = [f"gc/f{i}" for i in range(4)]
    server = RealServer(data, env={"MEMFS_TEST_FAULT": "log-fsync-eio"}).start()
    answers: list[httpx.Response] = []
    try:
        with server.client() as client:
            for agent in agents:
                assert client.put(_url(agent), json={}).status_code == 201

        def write(agent: str) -> None:
            with httpx.Client(
                base_url=server.url, headers=headers(server.admin_key), timeout=WAIT
            ) as c:
                for i in range(3):
                    body = f"# {i}\n".encode()
                    answers.append(c.put(_url(agent, f"n{i}.md"), content=body, headers=MARKDOWN))

        threads = [threading.Thread(target=write, args=(agent,)) for agent in agents]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT)
        assert len(answers) == 3 * len(agents)
        for answer in answers:
            assert answer.status_code == 503, answer.text
            assert answer.json()["details"]["retryable"] is True, answer.text
        with server.client() as client:
            for agent in agents:
                assert client.get(_url(agent, "n0.md")).status_code == 404
                assert client.get(_url(agent)).json()["revision"] == 0
    finally:
        server.close()
    for agent in agents:
        log = data / "agents" / quote(agent, safe="") / ".memfs" / "log"
        assert not log.exists() or not [p for p in log.iterdir() if p.suffix == ".json"]
    restarted = RealServer(data).start()  # the disk is fine again: still nothing there
    try:
        with restarted.client() as client:
            for agent in agents:
                assert client.get(_url(agent, "n0.md")).status_code == 404
                assert client.get(_url(agent)).json()["revision"] == 0
                ok = client.put(_url(agent, "n0.md"), content=b"# ok\n", headers=MARKDOWN)
                assert ok.status_code == 201 and ok.json()["version"] == 1
    finally:
        restarted.close()
    _fsck(data)
