"""The access log: every request still gets uvicorn's line, byte for byte, for less CPU.

``memfs.http.access_log.AccessFormatter`` builds uvicorn's default uncoloured access
line straight from the record's arguments; colours and an operator's own format go
through uvicorn's formatter unchanged. ``memfs serve`` runs with it (and so do the
benchmarks' bare servers, ``memfs.cli.serve.log_config``).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import httpx
import pytest
from uvicorn.logging import AccessFormatter as UvicornAccessFormatter

from memfs.cli.serve import log_config
from memfs.http.access_log import DEFAULT_FORMAT, AccessFormatter
from servers import MemfsServer

REQUESTS = [
    ("127.0.0.1:50812", "POST", "/v1/agents/bench%2Fhooks/triggers/gh:deliver", "1.1", 202),
    ("[::1]:1", "GET", "/healthz?x=%22q%22&y=1", "1.0", 200),
    ("10.0.0.7:65535", "PUT", '/v1/agents/a/memories/"odd" name.md', "2", 409),
    ("127.0.0.1:9", "DELETE", "/v1/agents/a", "1.1", 599),  # no phrase: "599 "
    ("127.0.0.1:9", "GET", "/", "1.1", 100),
    ("127.0.0.1:9", "GET", "/teapot", "1.1", 418),
    ("127.0.0.1:9", "GET", "/%s %d %%", "1.1", 500),  # format characters in the path
]


def _record(args: tuple[object, ...], level: int = logging.INFO) -> logging.LogRecord:
    return logging.LogRecord(
        "uvicorn.access", level, __file__, 1, '%s - "%s %s HTTP/%s" %d', args, None
    )


@pytest.mark.parametrize("level", [logging.INFO, logging.WARNING, logging.ERROR])
def test_the_line_is_uvicorns_byte_for_byte(level: int) -> None:
    ours = AccessFormatter(DEFAULT_FORMAT, use_colors=False)
    theirs = UvicornAccessFormatter(DEFAULT_FORMAT, use_colors=False)
    for args in REQUESTS:
        assert ours.format(_record(args, level)) == theirs.format(_record(args, level))


def test_colours_and_other_formats_go_through_uvicorn() -> None:
    for fmt, colours in (
        (DEFAULT_FORMAT, True),
        ("%(levelname)s %(message)s %(status_code)s %(client_addr)s", False),
    ):
        ours = AccessFormatter(fmt, use_colors=colours)
        theirs = UvicornAccessFormatter(fmt, use_colors=colours)
        for args in REQUESTS:
            assert ours.format(_record(args)) == theirs.format(_record(args))


def test_memfs_serve_writes_one_access_line_per_request(tmp_path: Path) -> None:
    assert log_config()["formatters"]["access"]["()"] == "memfs.http.access_log.AccessFormatter"
    server = MemfsServer(tmp_path / "data")
    try:
        for _ in range(3):
            assert httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
        assert httpx.get(f"{server.url}/nowhere", timeout=10).status_code == 404
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "/nowhere" not in server.log():
            time.sleep(0.05)
        lines = server.log().splitlines()
    finally:
        server.stop()
    health = [line for line in lines if '"GET /healthz HTTP/1.1" 200 OK' in line]
    assert len(health) == 3
    assert all(line.startswith("INFO:     127.0.0.1:") for line in health)
    assert any(
        line.startswith("INFO:     127.0.0.1:") and line.endswith('"GET /nowhere HTTP/1.1" 404 Not Found')
        for line in lines
    )
