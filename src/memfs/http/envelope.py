"""The one place memfs errors become HTTP responses (the error envelope)."""

from __future__ import annotations

import logging

from starlette.responses import JSONResponse

from memfs.errors import MemfsError

log = logging.getLogger("memfs.http")

STATUS = {
    "invalid_request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "conflict": 409,
    "precondition_failed": 412,
    "payload_too_large": 413,
    "rate_limit_exceeded": 429,
    "internal_error": 500,
    "unavailable": 503,
}


class MethodNotAllowed(MemfsError):
    code = "method_not_allowed"

    def __init__(self, message: str, allowed: list[str]) -> None:
        super().__init__(message, field="method")
        self.allowed = allowed


class _InternalError(MemfsError):
    """The one 500 a client sees: no internal detail, just the request id."""


def error_response(exc: MemfsError, request_id: str) -> JSONResponse:
    if exc.code == "internal_error" and not isinstance(exc, _InternalError):
        # CorruptionError and co. name storage keys and hashes: log them, answer generically.
        log.error("internal error in request %s: %s", request_id, exc.message)
        return internal_error(request_id)
    body = {
        "code": exc.code,
        "message": exc.message,
        "details": {
            "field": exc.field,
            "issues": exc.issues,
            "requestId": request_id,
            "retryable": exc.retryable,
        },
    }
    headers = {"Memfs-Request-Id": request_id}
    if isinstance(exc, MethodNotAllowed):
        headers["Allow"] = ", ".join(exc.allowed)
    if exc.code == "unauthorized":
        headers["WWW-Authenticate"] = 'Bearer realm="memfs"'
    return JSONResponse(body, status_code=STATUS.get(exc.code, 500), headers=headers)


def internal_error(request_id: str) -> JSONResponse:
    exc = _InternalError(f"internal error; quote request id {request_id} when reporting it")
    return error_response(exc, request_id)
