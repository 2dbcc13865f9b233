"""MEMFS_INDEX / --index: a PostgreSQL index is chosen, checked at start, and an outage
of the database is a retryable 503-class error that heals by itself.

Real processes for the start-up lines (``memfs`` exits non-zero with one line and
creates nothing), a real PostgreSQL stopped and started again for the outage.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine_postgres import PostgresServer, dispose, restart, start_postgres
from memfs import config
from memfs.derived.index.factory import open_index
from memfs.derived.index.postgres import IndexUnreachable, PostgresIndex
from memfs.errors import InvalidRequest, Unavailable
from servers_real import RealServer, free_port


def _memfs(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
    return subprocess.run(
        [sys.executable, "-m", "memfs.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, **(env or {})},
        check=False,
    )


def test_the_setting_takes_a_postgresql_url_or_nothing() -> None:
    url = "postgresql://memfs:pw@db.internal:5432/memfs"
    assert config.load({"MEMFS_INDEX": url}, {}).index == url
    assert config.load({"MEMFS_INDEX": ""}, {}).index is None
    assert config.load({}, {"index": "postgres://h/db"}).index == "postgres://h/db"
    for bad in ("sqlite:///x", "mysql://root:secret@h/db", "postgresql://h/\x00"):
        with pytest.raises(InvalidRequest) as caught:
            config.load({"MEMFS_INDEX": bad}, {})
        assert "secret" not in caught.value.message and "MEMFS_INDEX" in caught.value.message


def test_a_malformed_index_setting_exits_2_and_creates_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = _memfs("--index", "mysql://root:secret@h/db", "serve", "--data", str(data))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "expected a PostgreSQL URL" in done.stderr
    assert "secret" not in done.stderr and not data.exists()


def test_an_unreachable_index_at_start_is_one_line_and_a_non_zero_exit(tmp_path: Path) -> None:
    data = tmp_path / "data"
    url = f"postgresql://memfs:hunter2@127.0.0.1:{free_port()}/memfs"
    for args, env in (
        (("serve", "--data", str(data), "--port", str(free_port())), {"MEMFS_INDEX": url}),
        (("--index", url, "ls", "alice", "--data", str(data)), {}),
    ):
        done = _memfs(*args, env=env)
        assert done.returncode == 1, done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert done.stderr.startswith(
            "memfs: cannot open the PostgreSQL index postgresql://memfs:***@"
        )
        assert "hunter2" not in done.stderr and "refused" in done.stderr.lower()
        assert not data.exists()


def test_a_misconfigured_database_is_named_in_one_line(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    url = postgres_server.url("no_such_database")
    done = _memfs("--index", url, "ls", "alice", "--data", str(tmp_path))
    assert done.returncode == 1
    assert (
        done.stderr.count("\n") == 1 and 'database "no_such_database" does not exist' in done.stderr
    )


def test_the_factory_opens_sqlite_by_default_and_postgresql_for_a_url(
    postgres_url: str, tmp_path: Path
) -> None:
    local = open_index(None, tmp_path / "index.sqlite")
    shared = open_index(postgres_url, tmp_path / "unused.sqlite")
    try:
        assert type(local).__module__ == "memfs.derived.index.connection"
        assert isinstance(shared, PostgresIndex)
        assert (tmp_path / "index.sqlite").exists() and not (tmp_path / "unused.sqlite").exists()
    finally:
        local.close()
        shared.close()


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    """A PostgreSQL of this test's own, to stop and start."""
    server = start_postgres()
    try:
        yield server
    finally:
        dispose(server)


def test_postgresql_down_is_retryable_and_heals_without_reopening(
    own_server: PostgresServer,
) -> None:
    idx = PostgresIndex(own_server.new_database(), pool_size=3)
    try:
        with idx.write_session() as s:
            s.put_agent("alice", "Alice", "store-1", 5)
        own_server.stop()
        for _ in range(5):  # every pooled connection is dead now: each try answers at once
            with pytest.raises(IndexUnreachable) as caught, idx.read_session() as r:
                r.agent("alice")
            assert isinstance(caught.value, Unavailable) and caught.value.retryable
            assert "unavailable" in caught.value.message
        with pytest.raises(IndexUnreachable), idx.write_session() as w:
            w.put_agent("bob", "Bob", "store-1", 6)
        restart(own_server)
        with idx.read_session() as r:  # the same index object: no restart of memfs
            row = r.agent("alice")
            assert row is not None and r.agent("bob") is None
        with idx.write_session() as w:
            w.put_agent("bob", "Bob", "store-1", 6)
        with idx.read_session() as r:
            assert r.agent("bob") is not None
    finally:
        idx.close()


def test_a_server_on_postgresql_answers_503_while_it_is_down_and_recovers(
    own_server: PostgresServer, tmp_path: Path
) -> None:
    """A real ``memfs serve`` with MEMFS_INDEX: its index lives in PostgreSQL (no SQLite
    file), a command on the same index reads what it wrote, PostgreSQL stopped is a
    503 with retryable:true (never a 500 or a hang), and started again the same server
    process serves again."""
    url = own_server.new_database()
    data = tmp_path / "data"
    page = "/v1/agents/demo/memories/notes/hi.md"
    with RealServer(data, env={"MEMFS_INDEX": url}) as server, server.client() as client:
        assert client.put("/v1/agents/demo", json={"name": "demo"}).status_code == 201
        put = client.put(page, content=b"# hi\n", headers={"Content-Type": "text/markdown"})
        assert put.status_code in (200, 201), put.text
        assert not (data / "index.sqlite").exists() and not list(data.glob("**/*.sqlite"))
        listed = _memfs("--index", url, "ls", "demo", "--data", str(data))
        assert listed.returncode == 0 and "notes/hi.md" in listed.stdout, listed.stderr
        pid = server.pid
        own_server.stop()
        for _ in range(3):
            down = client.get(page)
            assert down.status_code == 503, down.text
            body = down.json()
            assert body["code"] == "unavailable" and body["details"]["retryable"] is True
        restart(own_server)
        again = client.get(page)
        assert again.status_code == 200 and again.json()["path"] == "/memories/notes/hi.md"
        assert server.pid == pid and server.proc is not None and server.proc.poll() is None
