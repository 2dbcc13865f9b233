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
        line = self.line(record.levelname, record.args) if self._direct else None
        return str(super().formatMessage(record)) if line is None else line

    @staticmethod
    def line(level: str, args: object) -> str | None:
        """uvicorn's default uncoloured line for these arguments, None if they are not
        the five uvicorn logs a request with."""
        if not isinstance(args, tuple) or len(args) != 5:
            return None
        client_addr, method, full_path, http_version, code = args
        if not isinstance(code, int):
            return None
        status = _STATUS.get(code) or f"{code} "
        return (
            f"{level}:{' ' * (8 - len(level))} {client_addr} - "
            f'"{method} {full_path} HTTP/{http_version}" {status}'
        )


class DirectAccessLog:
    """What uvicorn's protocol calls ``access_logger.info(...)`` on, writing the line
    straight to the access handler's stream: no LogRecord, no search of the stack for
    the caller (``findCaller``), no handler chain. About a tenth of the event loop's
    CPU per request went there (docs/benchmarks.md). Only made (``direct``) for the
    logging ``memfs serve`` sets up: one stream handler with this module's formatter in
    its direct form, no filters; the level is checked per line, and a failed write
    goes through ``logging`` (which reports it as it always does)."""

    def __init__(self, logger: logging.Logger, handler: logging.StreamHandler[Any]) -> None:
        self.logger, self.handler = logger, handler

    def info(self, msg: str, *args: object) -> None:
        if not self.logger.isEnabledFor(logging.INFO):
            return
        line = AccessFormatter.line("INFO", args)
        if line is None:
            self.logger.info(msg, *args)
            return
        handler = self.handler
        handler.acquire()
        try:
            handler.stream.write(line + handler.terminator)
            handler.stream.flush()
        except Exception:
            handler.release()
            self.logger.info(msg, *args)
            return
        handler.release()


def direct(logger: logging.Logger) -> logging.Logger | DirectAccessLog:
    """``logger`` (uvicorn's access logger), or a DirectAccessLog writing its lines
    when it is configured exactly as ``memfs serve`` configures it."""
    handlers = logger.handlers
    if (
        len(handlers) != 1
        or logger.propagate
        or logger.filters
        or logger.disabled
        or type(handlers[0]) is not logging.StreamHandler
    ):
        return logger
    handler = handlers[0]
    formatter = handler.formatter
    if (
        handler.filters
        or handler.level > logging.INFO
        or not isinstance(formatter, AccessFormatter)
        or not formatter._direct
        or type(formatter).format is not AccessFormatter.format
    ):
        return logger
    return DirectAccessLog(logger, handler)

