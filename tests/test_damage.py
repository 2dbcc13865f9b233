"""Surviving damage, with real processes and real files: verified reads, damage kept to
one agent, the index rebuilt when lost (before start and under a running server).
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path
from urllib.parse import quote

import httpx

from memfs.canonical import layout
from memfs.canonical.durable import TEMP_PREFIX
from memfs.core import maintenance
from segment_files import flip_entry
from servers_real import memfs_cli, running

BIG = ("# big\n" + "x" * 40_000 + "\n").encode()  # stored as a blob, not inline


def url(agent: str, path: str = "") -> str:
    base = f"/v1/agents/{quote(agent, safe='')}"
    return f"{base}/memories/{path}" if path else base


def put(
    client: httpx.Client, agent: str, path: str, body: bytes, headers: dict[str, str] | None = None
) -> httpx.Response:
    return client.put(
        url(agent, path), content=body, headers={"Content-Type": "text/markdown", **(headers or {})}
    )


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def flip(file: Path, old: bytes, new: bytes) -> None:
    data = file.read_bytes()
    assert old in data
    file.chmod(0o644)
    file.write_bytes(data.replace(old, new, 1))


def assert_damaged(response: httpx.Response, agent: str) -> None:
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["code"] == "unavailable"
    assert body["details"]["retryable"] is False
    assert agent in body["message"] and "memfs fsck" in body["message"]


def test_flipped_bytes_are_never_served_and_fsck_restores_them(tmp_path: Path) -> None:
    data = tmp_path / "data"
    bad, good = "users/alice/assistant", "users/bob/assistant"
    with running(data) as server, server.client() as client:
        for agent in (bad, good):
            assert client.put(url(agent), json={"name": agent}).status_code == 201
        assert put(client, bad, "big.md", BIG).status_code == 201
        assert put(client, bad, "small.md", b"original words").status_code == 201
        assert put(client, good, "b.md", b"bob").status_code == 201
    blob = data / layout.blob_key(bad, sha(BIG))
    flip(blob, b"xxxx", b"xxxy")
    flip_entry(data, bad, 2, b"original", b"0riginal")  # in its segment: the crc fails

    reindexed = memfs_cli("reindex", data=data)
    assert reindexed.returncode == 1, reindexed.stdout + reindexed.stderr
    assert "DAMAGED" in reindexed.stdout and bad in reindexed.stdout

    with running(data) as server, server.client() as client:
        assert_damaged(client.get(url(bad, "big.md")), bad)
        assert_damaged(client.get(url(bad, "small.md")), bad)
        stale = put(client, bad, "big.md", b"new", headers={"If-Match": f'"{sha(BIG)}"'})
        assert_damaged(stale, bad)
        assert client.get(url(good, "b.md")).json()["content"] == "bob"
        assert put(client, good, "c.md", b"still works").status_code == 201
    cat = memfs_cli("cat", bad, "/memories/big.md", data=data)
    assert cat.returncode != 0 and "memfs fsck" in cat.stderr and cat.stdout == ""
    export = memfs_cli("export", bad, data=data)
    assert export.returncode != 0 and "memfs fsck" in export.stderr

    report = memfs_cli("fsck", data=data)
    assert report.returncode == 1
    damaged = [line for line in report.stdout.splitlines() if line.startswith("DAMAGED")]
    assert any(layout.blob_key(bad, sha(BIG)) in d for d in damaged), report.stdout
    assert any(layout.log_key(bad, 2) in d for d in damaged), report.stdout
    assert all("fix: memfs fsck --repair" in d for d in damaged)

    repaired = memfs_cli("fsck", "--repair", data=data)
    assert repaired.returncode == 0, repaired.stdout
    assert "restored" in repaired.stdout
    assert blob.read_bytes() == BIG
    with running(data) as server, server.client() as client:
        got = client.get(url(bad, "big.md"))
        assert got.status_code == 200 and got.json()["content"].encode() == BIG
        assert client.get(url(bad, "small.md")).json()["content"] == "original words"


def test_a_zero_byte_next_entry_damages_one_agent_and_the_others_work(tmp_path: Path) -> None:
    data = tmp_path / "data"
    agents = ["team/a", "team/b", "team/c"]
    with running(data, workers=2) as server, server.client() as client:
        for agent in agents:
            assert client.put(url(agent), json={"name": agent}).status_code == 201
            assert put(client, agent, "one.md", b"1").status_code == 201
        torn = data / layout.log_key("team/a", 2)  # a partial rsync, say
        torn.write_bytes(b"")
        refused = put(client, "team/a", "two.md", b"2")
        assert_damaged(refused, "team/a")
        assert layout.log_key("team/a", 2) in refused.json()["message"]
        assert_damaged(client.get(url("team/a", "one.md")), "team/a")
        for agent in agents[1:]:
            assert put(client, agent, "two.md", b"2").status_code == 201
            assert client.get(url(agent, "two.md")).json()["content"] == "2"
    # A restart serves the others (it used to exit 1 for every agent).
    with running(data) as server, server.client() as client:
        assert_damaged(client.get(url("team/a", "one.md")), "team/a")
        assert client.get(url("team/b", "two.md")).status_code == 200
    report = memfs_cli("fsck", data=data)
    assert report.returncode == 1
    assert "checked 3 agent(s)" in report.stdout  # a full report, not one line
    assert any(
        str(layout.log_key("team/a", 2)) in line and "memfs fsck --repair" in line
        for line in report.stdout.splitlines()
    ), report.stdout
    assert memfs_cli("fsck", "--repair", data=data).returncode == 0
    with running(data) as server, server.client() as client:
        assert client.get(url("team/a", "one.md")).status_code == 200
        assert put(client, "team/a", "two.md", b"2").status_code == 201


def _populate(client: httpx.Client) -> None:
    for agent in ("team/a", "team/b"):
        assert client.put(url(agent), json={"name": agent}).status_code == 201
        for i in range(5):
            assert put(client, agent, f"m{i}.md", f"m{i}".encode()).status_code == 201


def _listing(client: httpx.Client, agent: str) -> list[tuple[str, str]]:
    page = client.get(url(agent) + "/memories").json()["memories"]
    return [(m["path"], m["contentSha256"]) for m in page]


def test_an_index_deleted_before_start_is_rebuilt_before_serving(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running(data) as server, server.client() as client:
        _populate(client)
        before = {agent: _listing(client, agent) for agent in ("team/a", "team/b")}
    for name in ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm"):
        (data / name).unlink(missing_ok=True)
    with running(data, workers=2) as server, server.client() as client:
        assert {agent: _listing(client, agent) for agent in before} == before
        # Writing goes on at the next revision: no conflict copies, no re-creation.
        assert put(client, "team/a", "m0.md", b"next").status_code == 200
    assert "rebuilding the index" in server.log_text()


def test_an_index_deleted_under_a_running_server_is_rebuilt(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running(data, workers=2) as server:
        with server.client() as client:
            _populate(client)
        statuses: list[int] = []
        bad: list[str] = []
        acked: dict[str, bytes] = {}
        stop = threading.Event()

        def write(worker: int) -> None:
            with server.client() as client:
                n = 0
                while not stop.is_set():
                    body = f"w{worker} n{n}".encode()
                    path = f"w{worker}.md"
                    response = put(client, "team/a", path, body)
                    statuses.append(response.status_code)
                    if response.status_code in (200, 201):
                        acked[path] = body
                    elif response.status_code != 503 or not response.json()["details"]["retryable"]:
                        bad.append(response.text)
                    n += 1

        def read() -> None:
            with server.client() as client:
                while not stop.is_set():
                    response = client.get(url("team/b") + "/memories")
                    statuses.append(response.status_code)
                    if response.status_code == 200:
                        if len(response.json()["memories"]) != 5:
                            bad.append(f"listing of team/b: {response.text}")
                    elif response.status_code != 503:
                        bad.append(response.text)

        threads = [threading.Thread(target=write, args=(i,)) for i in range(3)]
        threads.append(threading.Thread(target=read))
        for thread in threads:
            thread.start()
        try:
            deadline = time.monotonic() + 60
            while len(acked) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            before = len(statuses)
            (data / "index.sqlite").unlink()
            # Until requests succeed again after the deletion (the index was rebuilt).
            while time.monotonic() < deadline:
                later = statuses[before:]
                if sum(s in (200, 201) for s in later) >= 20:
                    break
                time.sleep(0.05)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
        assert bad == []
        assert set(statuses) <= {200, 201, 503}
        assert sum(s in (200, 201) for s in statuses[before:]) >= 20, statuses[before:][-20:]
        assert (data / "index.sqlite").exists()
        with server.client() as client:
            for path, body in acked.items():
                got = client.get(url("team/a", path))
                assert got.status_code == 200 and got.json()["content"].encode() == body
            assert len(_listing(client, "team/b")) == 5


def test_crash_temp_files_are_a_warning_and_the_server_sweeps_them(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running(data) as server, server.client() as client:
        _populate(client)
    log_folder = (data / layout.log_key("team/a", 1)).parent
    old, young = log_folder / f"{TEMP_PREFIX}old", log_folder / f"{TEMP_PREFIX}young"
    for stray in (old, young):
        stray.write_bytes(b"half an entry")
    past = time.time() - maintenance.TEMP_GRACE_S - 60
    os.utime(old, (past, past))
    report = memfs_cli("fsck", data=data)
    assert report.returncode == 0, report.stdout  # not damage
    assert any(
        line.startswith("warning") and str(old) in line for line in report.stdout.splitlines()
    )
    with running(data):
        pass
    assert not old.exists()
    assert young.exists()  # a writer may still be at work on it
