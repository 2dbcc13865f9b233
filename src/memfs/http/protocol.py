"""uvicorn's HTTP protocol with a bound on how long a client may take to send headers.

uvicorn bounds the idle time between requests (keep-alive) but not a request's
headers: a client sending one byte a second would hold its connection for ever. The
timer runs from the connection (or the end of the previous response) until a request
starts; if none started, the connection is closed. The body's time is bounded by the
app (``Ctx.body``), and the number of connections by uvicorn's ``limit_concurrency``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

from memfs.http import access_log


def header_timeout_s() -> float:
    return float(os.environ.get("MEMFS_HEADER_TIMEOUT_SECONDS", "10"))


class BoundedHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
    """The protocol uvicorn would pick (httptools or h11), plus the header timer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The access line written directly (http/access_log.py), when logging is as
        # memfs serve sets it up; each request's cycle takes the protocol's logger.
        self.access_logger = access_log.direct(logging.getLogger("uvicorn.access"))
        self._header_timer: asyncio.TimerHandle | None = None
        self._watched: object = None
        self._header_timeout = header_timeout_s()

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._watched = self.cycle  # a new request makes a new cycle
        self._header_timer = self.loop.call_later(self._header_timeout, self._expire)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expire(self) -> None:
        self._header_timer = None
        if self.cycle is self._watched and not self.transport.is_closing():
            self.transport.close()  # no request started in time: a slow or stuck client
