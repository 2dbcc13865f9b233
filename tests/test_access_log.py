"""The access log: every request still gets uvicorn's line, byte for byte, for less CPU.

``memfs.http.access_log.AccessFormatter`` builds uvicorn's default uncoloured access
line straight from the record's arguments; colours and an operator's own format go
through uvicorn's formatter unchanged. ``memfs serve`` runs with it (and so do the
benchmarks' bare servers, ``memfs.cli.serve.log_config``).
"""

from __future__ import annotations

import io
import logging
import time
from pathlib import Path

import httpx
import pytest
from uvicorn.logging import AccessFormatter as UvicornAccessFormatter

from memfs.cli.serve import log_config
from memfs.http.access_log import DEFAULT_FORMAT, AccessFormatter, DirectAccessLog, direct
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


_loggers: list[logging.Logger] = []


def _logger(fmt: str = DEFAULT_FORMAT, colours: bool = False) -> tuple[logging.Logger, io.StringIO]:
    """A logger set up as ``memfs serve``'s dictConfig sets up ``uvicorn.access``."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(AccessFormatter(fmt, use_colors=colours))
    _loggers.append(logging.getLogger(f"memfs-test-access.{len(_loggers)}"))
    logger = _loggers[-1]
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    logger.propagate = False
    return logger, stream


def test_the_direct_line_is_what_logging_writes_byte_for_byte() -> None:
    fast, fast_out = _logger()
    slow, slow_out = _logger()
    writer = direct(fast)
    assert isinstance(writer, DirectAccessLog)
    for args in REQUESTS:
        writer.info('%s - "%s %s HTTP/%s" %d', *args)
        slow.info('%s - "%s %s HTTP/%s" %d', *args)
    assert fast_out.getvalue() == slow_out.getvalue()
    assert fast_out.getvalue().count("\n") == len(REQUESTS)
    fast.setLevel(logging.WARNING)  # the level is honoured per line
    writer.info('%s - "%s %s HTTP/%s" %d', *REQUESTS[0])
    assert fast_out.getvalue().count("\n") == len(REQUESTS)


def test_any_other_logging_set_up_goes_through_logging() -> None:
    coloured, _ = _logger(colours=True)
    other_format, _ = _logger("%(levelname)s %(message)s")
    filtered, _ = _logger()
    filtered.addFilter(lambda record: True)
    two_handlers, _ = _logger()
    two_handlers.addHandler(logging.StreamHandler(io.StringIO()))
    propagating, _ = _logger()
    propagating.propagate = True
    for logger in (coloured, other_format, filtered, two_handlers, propagating):
        assert direct(logger) is logger
