"""``memfs serve`` and the CLI with objects on S3 (a real SeaweedFS): the settings, the
start-up refusals, an outage during operation, and erasure, all with real processes."""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine_seaweedfs import SeaweedFS
from http_fixtures import agent_url, memory_url
from memfs.canonical.backend import MemoryBackend
from memfs.config import Objects
from memfs.core.objects import check_bucket
from memfs.errors import InvalidRequest
from servers_real import ADMIN_KEY, RealServer, free_port
from test_backend_s3 import Faults
from test_erasure import ERASED, KEPT, session

MD = {"Content-Type": "text/markdown"}


def s3_env(engine: SeaweedFS, objects: str, **extra: str) -> dict[str, str]:
    return {**engine.env(), "MEMFS_OBJECTS": objects, **extra}


def bucket_keys(engine: SeaweedFS, bucket: str) -> list[str]:
    client: Any = engine.client()
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys += [item["Key"] for item in page.get("Contents", [])]
    return sorted(keys)


def memfs(
    *args: str, env: dict[str, str], data: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MEMFS_", "AWS_"))}
    return subprocess.run(
        [sys.executable, "-m", "memfs.cli", "--data", str(data), *args],
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
        env={**clean, **env},
        check=False,
    )


def serve_once(env: dict[str, str], data: Path) -> subprocess.CompletedProcess[str]:
    """``memfs serve`` that must refuse to start: it exits by itself."""
    return memfs("serve", "--port", str(free_port()), env=env, data=data)


def test_server_keeps_objects_in_the_bucket_folder_and_no_working_tree(
    seaweedfs: SeaweedFS, tmp_path: Path
) -> None:
    bucket = seaweedfs.bucket()
    data = tmp_path / "data"
    env = s3_env(seaweedfs, f"s3://{bucket}/team/memfs")
    with RealServer(data, env=env) as srv, srv.client() as client:
        assert client.put(agent_url("demo"), json={}).status_code == 201
        put = client.put(memory_url("/memories/a.md", "demo"), content=b"# on s3\n", headers=MD)
        assert put.status_code == 201, put.text
    keys = bucket_keys(seaweedfs, bucket)
    assert "team/memfs/agents/demo/.memfs/agent.json" in keys
    assert "team/memfs/agents/demo/.memfs/log/00000000000000000001.json" in keys
    assert all(k.startswith("team/memfs/") for k in keys), keys  # a folder, no stray key
    assert not (data / "agents").exists()  # the working tree is off
    # Every CLI command takes the same settings: it reads what the server wrote.
    shown = memfs("cat", "demo", "a.md", env=env, data=data)
    assert (shown.returncode, shown.stdout) == (0, "# on s3\n"), shown.stderr
    status = memfs("status", "demo", env=env, data=data)
    assert status.returncode == 2 and "no working tree" in status.stderr
    # backup and restore work on a local data folder: refused, never a silent empty copy
    backup = memfs("backup", str(tmp_path / "copy"), env=env, data=data)
    assert backup.returncode == 2 and "objects are on S3" in backup.stderr
    assert not (tmp_path / "copy").exists()
    restore = memfs("restore", str(tmp_path / "copy"), env=env, data=tmp_path / "new")
    assert restore.returncode == 2 and "restore writes a local data folder" in restore.stderr
    # The same bucket folder through --objects / --s3-endpoint instead of the variables,
    # from an empty data folder: its index is rebuilt from the bucket alone.
    flags = {k: v for k, v in env.items() if k.startswith("AWS_")}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    listed = memfs(
        "--objects",
        f"s3://{bucket}/team/memfs",
        "--s3-endpoint",
        seaweedfs.endpoint,
        "log",
        "demo",
        env=flags,
        data=elsewhere,
    )
    assert listed.returncode == 0 and "revision 1" in listed.stdout, listed.stderr
    assert not (elsewhere / "agents").exists()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ("stopped endpoint", "object storage unavailable"),
        ("wrong bucket", "no such bucket"),
        ("wrong credentials", "refused memfs's credentials"),
        ("bad url", "expected s3://BUCKET"),
    ],
)
def test_serve_refuses_to_start_on_storage_it_cannot_use(
    seaweedfs: SeaweedFS, tmp_path: Path, change: str, says: str
) -> None:
    env = s3_env(seaweedfs, f"s3://{seaweedfs.bucket()}")
    if change == "stopped endpoint":
        env["MEMFS_S3_ENDPOINT"] = f"http://127.0.0.1:{free_port()}"
    elif change == "wrong bucket":
        env["MEMFS_OBJECTS"] = "s3://memfs-no-such-bucket"
    elif change == "wrong credentials":
        env["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
    else:
        env["MEMFS_OBJECTS"] = "s3:/missing-slash"
    done = serve_once(env, tmp_path / "data")
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memfs: ") and says in lines[0], done.stderr
    # A CLI command refuses the same way, and nothing was written locally.
    listed = memfs("ls", "demo", env=env, data=tmp_path / "data")
    assert listed.returncode != 0 and says in listed.stderr
    assert not (tmp_path / "data" / "admin.key").exists()


def test_serve_refuses_a_store_that_ignores_if_none_match(
    seaweedfs: SeaweedFS, tmp_path: Path
) -> None:
    relay = Faults(seaweedfs.port)
    relay.overwrite = True  # every conditional PUT "succeeds", as on a store without them
    try:
        env = s3_env(seaweedfs, f"s3://{seaweedfs.bucket()}")
        env["MEMFS_S3_ENDPOINT"] = f"http://127.0.0.1:{relay.port}"
        done = serve_once(env, tmp_path / "data")
    finally:
        relay.close()
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not honour conditional writes" in lines[0], done.stderr
    assert not (tmp_path / "data").exists()


def test_a_bucket_that_overwrites_on_if_none_match_is_refused() -> None:
    class Overwriting(MemoryBackend):
        def put_if_absent(self, key: str, data: bytes) -> bool:
            super().delete(key)
            return super().put_if_absent(key, data)

    with pytest.raises(InvalidRequest, match="does not honour conditional writes"):
        check_bucket(Overwriting(), Objects("some-bucket"))
    check_bucket(MemoryBackend(), Objects("some-bucket"))  # an honest store passes


class Proxy:
    """A TCP relay in front of SeaweedFS that can be cut and restored: an outage."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = free_port()
        self.listener: socket.socket | None = None
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()

    def up(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        listener, self.listener = self.listener, None
        if listener is not None:
            # shutdown wakes the thread blocked in accept(); close alone would not,
            # and the socket would go on accepting.
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        with self.lock:
            for conn in self.conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            self.conns.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            with self.lock:
                self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@pytest.fixture
def proxy(seaweedfs: SeaweedFS) -> Iterator[Proxy]:
    relay = Proxy(seaweedfs.port)
    relay.up()
    try:
        yield relay
    finally:
        relay.down()


def test_storage_outage_is_a_retryable_503_and_heals_without_restart(
    seaweedfs: SeaweedFS, proxy: Proxy, tmp_path: Path
) -> None:
    env = s3_env(seaweedfs, f"s3://{seaweedfs.bucket()}/m")
    env["MEMFS_S3_ENDPOINT"] = f"http://127.0.0.1:{proxy.port}"
    with RealServer(tmp_path / "data", env=env) as srv, srv.client(timeout=120) as client:
        assert client.put(agent_url("demo"), json={}).status_code == 201
        url = memory_url("/memories/a.md", "demo")
        assert client.put(url, content=b"v1\n", headers=MD).status_code == 201
        proxy.down()
        failed = client.put(url, content=b"v2\n", headers=MD)
        assert failed.status_code == 503, failed.text
        body = failed.json()
        assert body["code"] == "unavailable" and body["details"]["retryable"] is True
        assert "object storage unavailable" in body["message"]
        created = client.put(agent_url("other"), json={})
        assert created.status_code == 503, created.text
        proxy.up()  # the same server, no restart
        deadline = time.monotonic() + 60
        while (ok := client.put(url, content=b"v2\n", headers=MD)).status_code == 503:
            assert time.monotonic() < deadline, ok.text
            time.sleep(0.2)
        assert ok.status_code == 200, ok.text
        shown = client.get(url).json()
        assert (shown["content"], shown["version"]) == ("v2\n", 2)  # the 503s committed nothing
        assert srv.proc is not None and srv.proc.poll() is None


def test_erasure_removes_the_agents_objects_from_the_bucket(
    seaweedfs: SeaweedFS, tmp_path: Path
) -> None:
    bucket = seaweedfs.bucket()
    gone, kept = f"erase-me-{secrets.token_hex(8)}", f"keep-me-{secrets.token_hex(8)}"
    env = s3_env(seaweedfs, f"s3://{bucket}/p")
    with RealServer(tmp_path / "data", env=env, admin_key=ADMIN_KEY) as srv, srv.client() as c:

        def call(method: str, url: str, **kwargs: Any) -> Any:
            return c.request(method, url, **kwargs)

        session(call, KEPT, kept)
        session(call, ERASED, gone)
        erased_prefix = "p/agents/users%2Falice%2Fassistant/"
        assert any(k.startswith(erased_prefix) for k in bucket_keys(seaweedfs, bucket))
        assert c.delete(agent_url(ERASED)).status_code == 204
        keys = bucket_keys(seaweedfs, bucket)
        assert not [k for k in keys if k.startswith(erased_prefix)]
        s3: Any = seaweedfs.client()
        holding = [
            k for k in keys if gone.encode() in s3.get_object(Bucket=bucket, Key=k)["Body"].read()
        ]
        assert holding == []
        assert any(k.startswith("p/agents/users%2Fbob%2Fassistant/") for k in keys)
        assert c.get(memory_url("/memories/a.md", KEPT)).status_code == 200
