"""The access log line of every request, as uvicorn writes it, for less CPU.

uvicorn's ``AccessFormatter`` copies each record, looks the status phrase up through
``http.HTTPStatus`` and goes through ``%``-formatting twice: about half of the ≈ 50 µs
of CPU a line cost here, a noticeable share of a request that memfs answers in well
under a millisecond (docs/benchmarks.md). This formatter writes the same line, byte
for byte, straight from the record's arguments when it can (no colours, uvicorn's
default format); anything else (colours on a terminal, an operator's own format) goes
through uvicorn's code unchanged. Every line is still written, at once, as before.
``memfs serve`` names it in the logging settings it hands uvicorn (``cli/serve.py``).
"""

from __future__ import annotations

import http
import logging
from typing import Any

from uvicorn.logging import AccessFormatter as UvicornAccessFormatter

# uvicorn's default access format (uvicorn.config.LOGGING_CONFIG).
DEFAULT_FORMAT = '%(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'

# "<code> <phrase>" for every code http.HTTPStatus knows, as uvicorn spells it.
_STATUS = {int(s): f"{int(s)} {s.phrase}" for s in http.HTTPStatus}


class AccessFormatter(UvicornAccessFormatter):
    """uvicorn's access formatter, with its default uncoloured line built directly."""

    def __init__(self, fmt: str | None = None, *args: Any, **kwargs: Any) -> None:
        super().__init__(fmt, *args, **kwargs)
        self._direct = fmt == DEFAULT_FORMAT and not self.use_colors

    def format(self, record: logging.LogRecord) -> str:
        if self._direct and record.exc_info is None and record.stack_info is None:
            # The message itself (``record.getMessage()``) is not part of this format.
            return self.formatMessage(record)
        return str(super().format(record))

    def formatMessage(self, record: logging.LogRecord) -> str:
        args = record.args
        if not self._direct or not isinstance(args, tuple) or len(args) != 5:
            return str(super().formatMessage(record))
        client_addr, method, full_path, http_version, code = args
        if not isinstance(code, int):
            return str(super().formatMessage(record))
        status = _STATUS.get(code) or f"{code} "
        level = record.levelname
        return (
            f"{level}:{' ' * (8 - len(level))} {client_addr} - "
            f'"{method} {full_path} HTTP/{http_version}" {status}'
        )

