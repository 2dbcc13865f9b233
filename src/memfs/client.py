"""A typed, synchronous Python client for the memfs HTTP API (v1).

One method per route of ``memfs.http.app.ROUTES``; results are small frozen
dataclasses with the API's camelCase fields in snake_case (``contentSha256`` →
``content_sha256``); timestamps stay the API's RFC 3339 strings. Every request
carries ``Memfs-Protocol: 1`` and ``Authorization: Bearer <key>``, plus
``Memfs-Subject`` / ``Memfs-Scopes`` when the client is narrowed to a person::

    from memfs.client import Client, NotFoundError

    agent = "users/alice/assistant"
    with Client("http://127.0.0.1:8750", key) as memfs:
        memfs.put_agent(agent, name="Alice's assistant")
        memfs.put_memory(agent, "/memories/notes.md", "# Notes\\n", if_none_match=True)
        memfs.update_memory(agent, "/memories/notes.md", lambda text: text + "- likes tea\\n")
        print(memfs.get_memory(agent, "/memories/notes.md").content)
        for entry in memfs.iter_memories(agent, path_prefix="conventions"):
            print(entry.path, entry.version, entry.content_sha256)
        bob = memfs.with_subject("bob", ["memories:read", "agents:users/alice"])
        ok, text = bob.memory_command(agent, {"command": "view", "path": "/memories"})

Agent ids travel as one percent-encoded URL segment (``users%2Falice%2Fassistant``);
memory paths as the URL after ``…/memories/``, each segment encoded on its own.
A memory path is ``/memories/…`` or relative to ``/memories`` (``notes.md``).

``list_*`` return one page (``next_cursor`` is None exactly when nothing follows);
``iter_*`` follow ``next_cursor`` to the end: only a null cursor ends a walk, never
a short or empty page.

Errors (the envelope's fields, whatever the body looked like)::

    MemfsClientError
     ├── TransportError              no HTTP answer: refused, reset, timed out (retryable)
     ├── UnexpectedResponseError     a 2xx whose body is not what the API documents
     └── ApiError                    status, code, message, field, issues, request_id, retryable
          ├── InvalidRequestError        400 invalid_request
          ├── UnauthorizedError          401 unauthorized
          ├── ForbiddenError             403 forbidden
          ├── NotFoundError              404 not_found
          ├── MethodNotAllowedError      405 method_not_allowed
          ├── ConflictError              409 conflict
          ├── PreconditionFailedError    412 precondition_failed
          ├── PayloadTooLargeError       413 payload_too_large
          ├── RateLimitExceededError     429 rate_limit_exceeded
          ├── InternalServerError        500 internal_error
          └── UnavailableError           503 unavailable (also 502/504 from a proxy)

The client retries nothing by itself, except ``update_memory``, which re-reads and
re-applies its function when another writer changed the memory in between (412).
"""

from __future__ import annotations

import contextlib
import random
import time
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import (
    Any,
    ClassVar,
    NamedTuple,
    Protocol,
    TypeVar,
    get_args,
    get_origin,
    get_type_hints,
)
from urllib.parse import quote

import httpx

from memfs import __version__

__all__ = [
    "Agent",
    "AgentPage",
    "ApiError",
    "Client",
    "CommandResult",
    "ConflictError",
    "CreatedKey",
    "ForbiddenError",
    "InternalServerError",
    "InvalidRequestError",
    "Key",
    "MemfsClientError",
    "Memory",
    "MemoryEntry",
    "MemoryPage",
    "MemorySummary",
    "MemoryWrite",
    "MethodNotAllowedError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PreconditionFailedError",
    "RateLimitExceededError",
    "TransportError",
    "UnauthorizedError",
    "UnavailableError",
    "UnexpectedResponseError",
    "Version",
    "VersionPage",
]

PROTOCOL = "1"
ROOT = "/memories"
DEFAULT_TIMEOUT = 30.0

Scalar = str | int | float | bool | None


# ---- errors ------------------------------------------------------------------------


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


# ---- results -----------------------------------------------------------------------


@dataclass(frozen=True)
class Key:
    """An application key (``/v1/tenant/keys``); its secret is never shown again."""

    key_id: str
    scopes: tuple[str, ...]
    description: str
    created_at: str


@dataclass(frozen=True)
class CreatedKey(Key):
    """A key as created: with its secret, shown this once."""

    secret: str = field(repr=False)


@dataclass(frozen=True)
class Agent:
    agent_id: str
    name: str
    memory_store_id: str
    created_at: str
    revision: int


@dataclass(frozen=True)
class AgentPage:
    agents: tuple[Agent, ...]
    next_cursor: str | None


@dataclass(frozen=True)
class MemoryEntry:
    """A memory as listed (and as a write answers it)."""

    path: str
    bytes: int
    content_sha256: str
    description: str | None
    version: int
    updated_at: str


@dataclass(frozen=True)
class MemoryPage:
    memories: tuple[MemoryEntry, ...]
    folders: tuple[str, ...]  # only with depth=1
    total: int | None  # only with include_total=True
    next_cursor: str | None


@dataclass(frozen=True)
class Memory:
    path: str
    content: str
    bytes: int
    content_sha256: str
    description: str | None
    metadata: Mapping[str, Scalar]
    version: int
    created_at: str
    updated_at: str

    @property
    def etag(self) -> str:
        """The value for ``If-Match``."""
        return f'"{self.content_sha256}"'


@dataclass(frozen=True)
class MemoryWrite:
    """What a PUT answers: the listing fields, the commit's revision, created or not."""

    path: str
    bytes: int
    content_sha256: str
    description: str | None
    version: int
    updated_at: str
    revision: int
    created: bool


@dataclass(frozen=True)
class Version:
    version: int
    operation: str  # created | modified | deleted | renamed
    content_sha256: str | None
    bytes: int
    revision: int
    valid_from: str
    valid_to: str | None
    actor: str
    message: str


@dataclass(frozen=True)
class VersionPage:
    versions: tuple[Version, ...]
    next_cursor: str | None


@dataclass(frozen=True)
class MemorySummary:
    agent_id: str
    agent_name: str
    memory_store_id: str
    memory_count: int
    total_bytes: int
    revision: int
    state: str  # waiting | idle | updating | delayed
    pending_run_count: int
    failed_run_count: int
    last_updated_at: str | None
    last_checked_at: str | None
    next_retry_at: str | None


class CommandResult(NamedTuple):
    """A memory-tool command's answer; ``ok`` is False where a tool result is an error."""

    ok: bool
    result: str


@dataclass(frozen=True)
class _KeyList:
    keys: tuple[Key, ...]


# ---- decoding ----------------------------------------------------------------------

T = TypeVar("T")
_ABSENT = object()


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """A result class's fields and their types, in order."""
    if cls not in _HINTS:
        _HINTS[cls] = get_type_hints(cls)
    return _HINTS[cls]


def _bad(response: httpx.Response, message: str) -> UnexpectedResponseError:
    return UnexpectedResponseError(
        message, status=response.status_code, request_id=response.headers.get("memfs-request-id")
    )


def _decode(cls: type[T], value: object, response: httpx.Response, **given: object) -> T:
    """``cls`` from a JSON object: each field from its camelCase key, type-checked."""
    if not isinstance(value, dict):
        raise _bad(response, f"{cls.__name__}: expected a JSON object")
    kwargs = dict(given)
    for name, kind in _hints(cls).items():
        if name not in kwargs:
            item = value.get(_camel(name), _ABSENT)
            kwargs[name] = _convert(kind, item, response, f"{cls.__name__}.{_camel(name)}")
    return cls(**kwargs)


def _convert(kind: Any, value: object, response: httpx.Response, where: str) -> Any:
    args = get_args(kind)
    if isinstance(kind, types.UnionType) and type(None) in args:  # X | None
        if value is None or value is _ABSENT:
            return None
        (kind,) = (a for a in args if a is not type(None))
        args = get_args(kind)
    if value is _ABSENT:
        raise _bad(response, f"{where} is missing")
    origin = get_origin(kind)
    if kind in (str, int, bool):
        if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
            return value
    elif origin is tuple and isinstance(value, list):
        return tuple(_convert(args[0], item, response, f"{where}[]") for item in value)
    elif origin is Mapping and isinstance(value, dict):  # metadata: scalars only
        if all(v is None or isinstance(v, (str, int, float, bool)) for v in value.values()):
            return dict(value)
    elif isinstance(kind, type):  # a result class
        return _decode(kind, value, response)
    raise _bad(response, f"{where} is not a {getattr(kind, '__name__', kind)}")


# ---- URLs --------------------------------------------------------------------------


def _segment(value: str) -> str:
    """One URL path segment; '.' and '..' encoded so no URL normalisation eats them."""
    encoded = quote(value, safe="")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def _agent_url(agent_id: str) -> str:
    return f"/v1/agents/{_segment(agent_id)}"


def _memory_url(agent_id: str, path: str) -> str:
    """``…/memories/<each segment encoded>`` for ``/memories/a/b.md`` or ``a/b.md``."""
    if path.startswith(ROOT + "/"):
        relative = path[len(ROOT) + 1 :]
    elif path.startswith("/") or path == ROOT:
        raise ValueError(f"a memory path starts with {ROOT}/ or is relative to it, got {path!r}")
    else:
        relative = path
    if not relative:
        raise ValueError(f"{path!r} names no memory")
    return f"{_agent_url(agent_id)}/memories/" + "/".join(_segment(s) for s in relative.split("/"))


def _etag(sha: str) -> str:
    return sha if sha.startswith('"') else f'"{sha}"'


def _header_value(name: str, value: str) -> str:
    # HTTP headers are ASCII here; httpx would fail later with a less helpful error.
    if not value.isascii() or not value.isprintable():
        raise ValueError(f"{name} must be printable ASCII, got {value!r}")
    return value


class _Page(Protocol):
    @property
    def next_cursor(self) -> str | None: ...


PageT = TypeVar("PageT", bound=_Page)


# ---- the client --------------------------------------------------------------------


class Client:
    """memfs over HTTP for one key, optionally narrowed to a subject; thread-safe."""

    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        subject: str | None = None,
        scopes: Sequence[str] | str | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url,
            transport=transport,
            timeout=timeout,
            headers={"User-Agent": f"memfs-client/{__version__}"},
        )
        self._owns_http = True
        self._base_url = base_url
        self._key = key
        self._headers = _auth_headers(key, subject, scopes)

    def with_subject(self, subject: str, scopes: Sequence[str] | str) -> Client:
        """A client for the same key narrowed to ``subject`` and ``scopes``, sharing
        this client's connections (closing it leaves this one open)."""
        other = Client.__new__(Client)
        other._http = self._http
        other._owns_http = False
        other._base_url = self._base_url
        other._key = self._key
        other._headers = _auth_headers(self._key, subject, scopes)
        return other

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        subject = self._headers.get("Memfs-Subject")
        return f"Client({self._base_url!r}" + (f", subject={subject!r})" if subject else ")")

    # ---- transport -----------------------------------------------------------------

    def _send(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        json: object = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        merged = {**self._headers, **(headers or {})}
        try:
            response = self._http.request(
                method,
                url,
                params=dict(params) if params else None,
                json=json,
                content=content,
                headers=merged,
            )
        except httpx.RequestError as exc:
            raise TransportError(f"{method} {url}: {exc!r}") from exc
        if not response.is_success:
            raise _api_error(response)
        return response

    @staticmethod
    def _result(cls: type[T], response: httpx.Response, **given: object) -> T:
        try:
            value: object = response.json()
        except ValueError:
            raise _bad(response, f"{cls.__name__}: the body is not JSON") from None
        return _decode(cls, value, response, **given)

    def _get(self, cls: type[T], url: str, params: Mapping[str, str | int] | None = None) -> T:
        return self._result(cls, self._send("GET", url, params=params))

    @staticmethod
    def _pages(fetch: Callable[[str | None], PageT]) -> Iterator[PageT]:
        """Pages until ``next_cursor`` is None; the size of a page says nothing."""
        page = fetch(None)
        yield page
        while page.next_cursor is not None:
            page = fetch(page.next_cursor)
            yield page

    # ---- keys (admin) --------------------------------------------------------------

    def create_key(
        self, key_id: str, scopes: Sequence[str], *, description: str = ""
    ) -> CreatedKey:
        """``PUT /v1/tenant/keys/{keyId}``: a new key and its secret (shown once)."""
        body = {"scopes": list(scopes), "description": description}
        return self._result(
            CreatedKey, self._send("PUT", f"/v1/tenant/keys/{_segment(key_id)}", json=body)
        )

    def list_keys(self) -> list[Key]:
        """``GET /v1/tenant/keys``: every key, by id (one page: keys are few)."""
        return list(self._get(_KeyList, "/v1/tenant/keys").keys)

    def get_key(self, key_id: str) -> Key:
        return self._get(Key, f"/v1/tenant/keys/{_segment(key_id)}")

    def revoke_key(self, key_id: str) -> None:
        """``DELETE /v1/tenant/keys/{keyId}``: the secret stops working at once."""
        self._send("DELETE", f"/v1/tenant/keys/{_segment(key_id)}")

    # ---- agents --------------------------------------------------------------------

    def put_agent(self, agent_id: str, *, name: str | None = None) -> Agent:
        """Create the agent, or rename it. PUT replaces: without ``name`` the name
        becomes the agent id."""
        body = {} if name is None else {"name": name}
        return self._result(Agent, self._send("PUT", _agent_url(agent_id), json=body))

    def get_agent(self, agent_id: str) -> Agent:
        return self._get(Agent, _agent_url(agent_id))

    def list_agents(
        self, *, prefix: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> AgentPage:
        """One page of agents whose id starts with ``prefix`` (those the key covers)."""
        params = _params(prefix=prefix, limit=limit, cursor=cursor)
        return self._get(AgentPage, "/v1/agents", params)

    def iter_agents(
        self, *, prefix: str | None = None, limit: int | None = None
    ) -> Iterator[Agent]:
        for page in self._pages(lambda c: self.list_agents(prefix=prefix, limit=limit, cursor=c)):
            yield from page.agents

    def delete_agent(self, agent_id: str) -> None:
        """Erase the agent and all its history (admin only)."""
        self._send("DELETE", _agent_url(agent_id))

    def memory_summary(self, agent_id: str) -> MemorySummary:
        """``GET /v1/agents/{agentId}/memory``."""
        return self._get(MemorySummary, f"{_agent_url(agent_id)}/memory")

    def memory_command(self, agent_id: str, command: Mapping[str, object]) -> CommandResult:
        """One Claude memory-tool command (``memory_20250818``); answers the tool
        result's text, ``ok`` False where the SDK's tool would report an error."""
        url = f"{_agent_url(agent_id)}/memory:command"
        return self._result(CommandResult, self._send("POST", url, json=dict(command)))

    # ---- memories ------------------------------------------------------------------

    def list_memories(
        self,
        agent_id: str,
        *,
        path_prefix: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        depth: int | None = None,
        metadata: Mapping[str, str] | None = None,
        include_total: bool = False,
    ) -> MemoryPage:
        """One page of memories in one folder (``path_prefix``, relative to
        /memories); recursive unless ``depth=1``, which adds subfolders."""
        params = _params(pathPrefix=path_prefix, limit=limit, cursor=cursor, depth=depth)
        if include_total:
            params["includeTotal"] = "true"
        for key, value in (metadata or {}).items():
            params[f"metadata.{key}"] = value
        return self._get(MemoryPage, f"{_agent_url(agent_id)}/memories", params)

    def iter_memories(
        self,
        agent_id: str,
        *,
        path_prefix: str | None = None,
        limit: int | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Iterator[MemoryEntry]:
        """Every memory under ``path_prefix`` (recursive), following cursors to the end."""
        for page in self._pages(
            lambda c: self.list_memories(
                agent_id, path_prefix=path_prefix, limit=limit, cursor=c, metadata=metadata
            )
        ):
            yield from page.memories

    def get_memory(self, agent_id: str, path: str, *, version: int | None = None) -> Memory:
        """The memory at ``path``, or its past ``version`` (superseded or deleted)."""
        return self._get(Memory, _memory_url(agent_id, path), _params(version=version))

    def get_memory_text(self, agent_id: str, path: str, *, version: int | None = None) -> bytes:
        """The raw file (``Accept: text/markdown``), byte for byte."""
        response = self._send(
            "GET",
            _memory_url(agent_id, path),
            params=_params(version=version),
            headers={"Accept": "text/markdown"},
        )
        return response.content

    def put_memory(
        self,
        agent_id: str,
        path: str,
        content: str | bytes,
        *,
        if_match: str | None = None,
        if_none_match: bool = False,
        message: str | None = None,
    ) -> MemoryWrite:
        """Write the whole file. ``if_match`` (a contentSha256 or ETag) updates only
        that version; ``if_none_match`` creates only; both fail with 412."""
        data = content.encode() if isinstance(content, str) else content
        headers = {"Content-Type": "text/markdown; charset=utf-8"}
        if if_match is not None:
            headers["If-Match"] = _etag(if_match)
        if if_none_match:
            headers["If-None-Match"] = "*"
        if message is not None:
            headers["Memfs-Message"] = _header_value("Memfs-Message", message)
        response = self._send("PUT", _memory_url(agent_id, path), content=data, headers=headers)
        return self._result(MemoryWrite, response, created=response.status_code == 201)

    def delete_memory(
        self, agent_id: str, path: str, *, if_match: str | None = None, message: str | None = None
    ) -> None:
        """Delete (a tombstone version; history stays readable)."""
        headers: dict[str, str] = {}
        if if_match is not None:
            headers["If-Match"] = _etag(if_match)
        if message is not None:
            headers["Memfs-Message"] = _header_value("Memfs-Message", message)
        self._send("DELETE", _memory_url(agent_id, path), headers=headers)

    def update_memory(
        self,
        agent_id: str,
        path: str,
        fn: Callable[[str], str],
        *,
        attempts: int = 5,
        default: str | None = None,
        message: str | None = None,
    ) -> MemoryWrite:
        """Read, apply ``fn`` to the content, write it back with ``If-Match``; when
        another writer got in between (412), start over, up to ``attempts`` times.

        A missing memory raises NotFoundError, unless ``default`` is given: then
        ``fn(default)`` is written with ``If-None-Match: *``. ``fn`` may run more
        than once, so it should only compute.
        """
        if attempts < 1:
            raise ValueError("attempts must be >= 1")
        for attempt in range(attempts):
            try:
                current = self.get_memory(agent_id, path)
            except NotFoundError:
                if default is None:
                    raise
                sha, content = None, default
            else:
                sha, content = current.content_sha256, current.content
            try:
                return self.put_memory(
                    agent_id,
                    path,
                    fn(content),
                    if_match=sha,
                    if_none_match=sha is None,
                    message=message,
                )
            except PreconditionFailedError:
                if attempt == attempts - 1:
                    raise
            # Racing writers spread out a little, so each round has one winner.
            time.sleep(random.uniform(0, 0.01 * 2**attempt))
        raise AssertionError("unreachable")

    def list_versions(
        self, agent_id: str, path: str, *, limit: int | None = None, cursor: str | None = None
    ) -> VersionPage:
        """One page of the versions of ``path``, oldest first (deletes included)."""
        full = path if path.startswith("/") else f"{ROOT}/{path}"
        params = _params(path=full, limit=limit, cursor=cursor)
        return self._get(VersionPage, f"{_agent_url(agent_id)}/versions", params)

    def iter_versions(
        self, agent_id: str, path: str, *, limit: int | None = None
    ) -> Iterator[Version]:
        for page in self._pages(
            lambda c: self.list_versions(agent_id, path, limit=limit, cursor=c)
        ):
            yield from page.versions


def _auth_headers(
    key: str, subject: str | None, scopes: Sequence[str] | str | None
) -> dict[str, str]:
    headers = {
        "Memfs-Protocol": PROTOCOL,
        "Authorization": "Bearer " + _header_value("key", key),
    }
    if (subject is None) != (scopes is None):
        raise ValueError("subject and scopes go together: give both or neither")
    if subject is not None and scopes is not None:
        tokens = scopes.split() if isinstance(scopes, str) else list(scopes)
        headers["Memfs-Subject"] = _header_value("subject", subject)
        headers["Memfs-Scopes"] = _header_value("scopes", " ".join(tokens))
    return headers


def _params(**values: str | int | None) -> dict[str, str | int]:
    return {name: value for name, value in values.items() if value is not None}
