"""The client's exception tree (see ``memfs.client`` for the picture)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import ClassVar

import httpx


class MemfsClientError(Exception):
    """Base of every error this client raises."""


class TransportError(MemfsClientError):
    """No HTTP answer (connection refused or reset, timeout); the cause is httpx's error."""

    retryable = True


class UnexpectedResponseError(MemfsClientError):
    """A success status whose body is not what the API documents."""

    def __init__(self, message: str, *, status: int, request_id: str | None) -> None:
        super().__init__(f"{message} (HTTP {status}, request {request_id})")
        self.status = status
        self.request_id = request_id


class ApiError(MemfsClientError):
    """The server answered an error; the fields are those of its error envelope."""

    default_code: ClassVar[str] = "http_error"

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str | None = None,
        field: str | None = None,
        issues: Sequence[str] = (),
        request_id: str | None = None,
        retryable: bool = False,
    ) -> None:
        self.status = status
        self.code = code or self.default_code
        self.message = message
        self.field = field
        self.issues = tuple(issues)
        self.request_id = request_id
        self.retryable = retryable
        text = f"{status} {self.code}: {message}"
        if field:
            text += f" (field {field})"
        if request_id:
            text += f" [request {request_id}]"
        super().__init__(text)


class InvalidRequestError(ApiError):
    default_code = "invalid_request"


class UnauthorizedError(ApiError):
    default_code = "unauthorized"


class ForbiddenError(ApiError):
    default_code = "forbidden"


class NotFoundError(ApiError):
    default_code = "not_found"


class MethodNotAllowedError(ApiError):
    default_code = "method_not_allowed"


class ConflictError(ApiError):
    default_code = "conflict"


class PreconditionFailedError(ApiError):
    default_code = "precondition_failed"


class PayloadTooLargeError(ApiError):
    default_code = "payload_too_large"


class RateLimitExceededError(ApiError):
    default_code = "rate_limit_exceeded"


class InternalServerError(ApiError):
    default_code = "internal_error"


class UnavailableError(ApiError):
    default_code = "unavailable"


_BY_CODE: dict[str, type[ApiError]] = {
    cls.default_code: cls
    for cls in (
        InvalidRequestError,
        UnauthorizedError,
        ForbiddenError,
        NotFoundError,
        MethodNotAllowedError,
        ConflictError,
        PreconditionFailedError,
        PayloadTooLargeError,
        RateLimitExceededError,
        InternalServerError,
        UnavailableError,
    )
}
_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    409: ConflictError,
    412: PreconditionFailedError,
    413: PayloadTooLargeError,
    429: RateLimitExceededError,
    500: InternalServerError,
    502: UnavailableError,
    503: UnavailableError,
    504: UnavailableError,
}
# Without an envelope (a proxy's HTML page, say) these are worth another try.
_RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})


def _api_error(response: httpx.Response) -> ApiError:
    """The ApiError of an error response, envelope or not."""
    status = response.status_code
    request_id = response.headers.get("memfs-request-id")
    envelope: object = None
    with contextlib.suppress(ValueError):
        envelope = response.json()
    if isinstance(envelope, dict) and isinstance(envelope.get("code"), str):
        code: str = envelope["code"]
        details = envelope.get("details")
        details = details if isinstance(details, dict) else {}
        message = envelope.get("message")
        issues = details.get("issues")
        field_ = details.get("field")
        rid = details.get("requestId")
        retryable = details.get("retryable")
        cls = _BY_CODE.get(code) or _BY_STATUS.get(status, ApiError)
        return cls(
            message if isinstance(message, str) else response.reason_phrase,
            status=status,
            code=code,
            field=field_ if isinstance(field_, str) else None,
            issues=[str(i) for i in issues] if isinstance(issues, list) else (),
            request_id=rid if isinstance(rid, str) else request_id,
            retryable=retryable if isinstance(retryable, bool) else status in _RETRYABLE_STATUSES,
        )
    text = response.text.strip()
    cls = _BY_STATUS.get(status) or (InternalServerError if status >= 500 else ApiError)
    return cls(
        text[:500] if text else (response.reason_phrase or f"HTTP {status}"),
        status=status,
        request_id=request_id,
        retryable=status in _RETRYABLE_STATUSES,
    )
