"""Slow clients and shutdown, with real servers: a header sent at 1 byte/s is cut off, a
body that stops arriving is answered 400 (and nothing is stored), SIGTERM answers 503 (retryable) while the listener is open, and a running command gets
SIGTERM (then SIGKILL) with its interrupted attempt not counted against maxAttempts.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from pathlib import Path
from urllib.parse import quote

import httpx

from commands import child_python, shared_folder
from memfs.domain.webhook_verify import sign
from servers_real import RealServer, headers

AGENT = "team/a"


def test_a_header_sent_at_one_byte_a_second_is_cut_off(tmp_path: Path) -> None:
    server = RealServer(tmp_path / "data", extra_args=("--header-timeout-seconds", "2"))
    with server.start():
        request = (
            b"GET /v1/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"s" * 40 + b"\r\n\r\n"
        )
        sent = 0
        closed = False
        with socket.create_connection(("127.0.0.1", server.port), timeout=1.5) as sock:
            for byte in request:
                try:
                    sock.sendall(bytes([byte]))
                    sent += 1
                    if sock.recv(1) == b"":
                        closed = True
                        break
                except TimeoutError:
                    continue  # nothing to read yet: one byte a second
                except OSError:
                    closed = True
                    break
        assert closed, "the server held a connection whose headers never ended"
        assert sent < len(request)


def _memory_put_head(server: RealServer, name: str, length: int) -> tuple[str, bytes]:
    """A new agent on ``server``, and the raw head of a PUT of its memory ``name``."""
    with server.client() as client:
        assert client.put(f"/v1/agents/{quote(AGENT, safe='')}", json={}).status_code == 201
    memory = f"/v1/agents/{quote(AGENT, safe='')}/memories/{name}"
    fields = "".join(f"{k}: {v}\r\n" for k, v in headers(server.admin_key).items())
    head = (
        f"PUT {memory} HTTP/1.1\r\nHost: 127.0.0.1\r\n{fields}Connection: close\r\n"
        f"Content-Type: text/markdown\r\nContent-Length: {length}\r\n\r\n"
    )
    return memory, head.encode()


def test_a_body_that_stops_arriving_is_refused_and_stores_nothing(tmp_path: Path) -> None:
    server = RealServer(tmp_path / "data", extra_args=("--body-timeout-seconds", "1"))
    with server.start():
        memory, head = _memory_put_head(server, "notes.md", 100)
        answer = b""
        with socket.create_connection(("127.0.0.1", server.port), timeout=15) as sock:
            sock.sendall(head + b"# only ten")  # 10 of the 100 bytes promised, then nothing
            while chunk := sock.recv(4096):  # a server that waits for ever times out here
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 400"), answer
        assert b"did not arrive within 1 s" in answer
        assert b"MEMFS_BODY_TIMEOUT_SECONDS" in answer
        with server.client() as client:
            assert client.get(memory).status_code == 404  # the part that came is not kept


def test_a_body_sent_in_pieces_within_the_timeout_is_stored_whole(tmp_path: Path) -> None:
    server = RealServer(tmp_path / "data", extra_args=("--body-timeout-seconds", "30"))
    content = b"# pieces\n\n" + b"".join(b"piece %d\n" % n for n in range(3000))
    with server.start():
        memory, head = _memory_put_head(server, "pieces.md", len(content))
        answer = b""
        with socket.create_connection(("127.0.0.1", server.port), timeout=15) as sock:
            sock.sendall(head)
            for start in range(0, len(content), 5000):  # several ASGI messages, not one
                sock.sendall(content[start : start + 5000])
                time.sleep(0.05)
            while chunk := sock.recv(4096):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 201"), answer
        with server.client() as client:
            stored = client.get(memory, headers={"Accept": "text/markdown"})
        assert stored.status_code == 200
        assert stored.content == content

def test_sigterm_under_load_answers_503_until_the_listener_closes(tmp_path: Path) -> None:
    server = RealServer(
        tmp_path / "data", workers=2, extra_args=("--shutdown-drain-seconds", "3")
    ).start()
    try:
        seen: list[tuple[str, int, bool]] = []  # (phase, status or -1, retryable)
        stop = threading.Event()
        terminated = threading.Event()

        def load() -> None:
            while not stop.is_set():
                phase = "after" if terminated.is_set() else "before"
                try:
                    # A new connection each time: what a client arriving now would see.
                    response = httpx.get(f"{server.url}/v1/agents", headers=headers(), timeout=10)
                except httpx.TransportError:
                    seen.append((phase, -1, False))
                    if phase == "after":
                        return  # the listener is closed
                    continue
                retryable = response.status_code == 503 and (
                    response.json()["details"]["retryable"] is True
                )
                seen.append((phase, response.status_code, retryable))

        threads = [threading.Thread(target=load) for _ in range(4)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while sum(1 for p, s, _r in seen if s == 200) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.proc is not None
        terminated.set()
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(timeout=60)
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        after = [(s, r) for p, s, r in seen if p == "after"]
        assert code == 0
        assert all(s in (200, 503, -1) for s, _r in after), after
        assert all(r for s, r in after if s == 503)
        refused = [s for s, _r in after if s == 503]
        assert refused, f"no 503 after SIGTERM: {after[:20]}"
        # New requests got 503 while the listener was open, before any connection failed.
        first_error = next((i for i, (s, _r) in enumerate(after) if s == -1), len(after))
        assert 503 in [s for s, _r in after[:first_error]]
    finally:
        server.close()


SCRIPT = """
import pathlib, signal, sys, time
marker = pathlib.Path(sys.argv[1])
if marker.exists():
    sys.exit(0)  # the retry, after the restart
def term(*_):
    marker.write_text("got SIGTERM")
    sys.exit(3)
signal.signal(signal.SIGTERM, term)
pathlib.Path(sys.argv[1] + ".started").write_text("1")
time.sleep(120)
"""


def _deliver(server: RealServer, secret: str) -> dict[str, object]:
    body, stamp = b'{"n": 1}', int(time.time())
    response = httpx.post(
        f"{server.url}/v1/agents/{quote(AGENT, safe='')}/triggers/cmd:deliver",
        content=body,
        headers={
            "webhook-id": "msg_1",
            "webhook-timestamp": str(stamp),
            "webhook-signature": sign(secret, "msg_1", stamp, body),
            "Content-Type": "application/json",
        },
    )
    assert response.status_code == 202, response.text
    run: dict[str, object] = response.json()
    return run


def test_a_command_interrupted_by_shutdown_gets_sigterm_and_a_free_retry(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with shared_folder() as shared:  # the child runs as MEMFS_RUN_USER when tests are root
        _interrupted_command_is_retried_for_free(data, shared)


def _interrupted_command_is_retried_for_free(data: Path, shared: Path) -> None:
    script, marker = shared / "slow.py", shared / "marker"
    script.write_text(SCRIPT)
    script.chmod(0o644)
    action = {"type": "command", "argv": [child_python(), str(script), str(marker)]}
    options = ("--command-grace-seconds", "10", "--allow-commands")
    server = RealServer(data, extra_args=options).start()
    try:
        with server.client() as client:
            assert client.put(f"/v1/agents/{quote(AGENT, safe='')}", json={}).status_code == 201
            trigger = client.put(
                f"/v1/agents/{quote(AGENT, safe='')}/triggers/cmd",
                json={"prompt": "p", "action": action, "maxAttempts": 1},
            )
            assert trigger.status_code == 201, trigger.text
        run = _deliver(server, trigger.json()["secret"])
        started = Path(f"{marker}.started")
        deadline = time.monotonic() + 60
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), server.log_text()
        assert server.stop() == 0
        assert marker.read_text() == "got SIGTERM"  # asked to stop, not killed outright
    finally:
        server.close()
    with RealServer(data, extra_args=("--allow-commands",)).start() as again, again.client() as client:
        url = f"/v1/agents/{quote(AGENT, safe='')}/runs/{run['id']}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got = client.get(url).json()
            if got["status"] in ("succeeded", "failed"):
                break
            time.sleep(0.1)
        assert got["status"] == "succeeded", got
        assert got["attempt"] == 2 and got["maxAttempts"] == 1  # the interruption was free
