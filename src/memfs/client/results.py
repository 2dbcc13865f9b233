"""What the client returns: frozen dataclasses decoded from the API's JSON."""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar, get_args, get_origin, get_type_hints

import httpx

from memfs.client.errors import UnexpectedResponseError

Scalar = str | int | float | bool | None


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
class MemoryWrite(MemoryEntry):
    """What a PUT answers: the listing fields, the commit's revision, created or not."""

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
class Trigger:
    agent_id: str
    trigger_id: str
    prompt: str
    action: Any  # {"type": "memory", "path": …} or {"type": "command", "argv": […], …}
    max_attempts: int
    created_at: str
    updated_at: str
    secret: str | None = field(default=None, repr=False)  # only when created or rotated


@dataclass(frozen=True)
class Run:
    id: str
    agent_id: str
    trigger_id: str
    webhook_id: str
    status: str  # queued | running | succeeded | failed | delayed
    attempt: int
    max_attempts: int
    next_retry_at: str | None
    created_at: str
    started_at: str | None
    finished_at: str | None
    exit_code: int | None
    output: str | None
    error: str | None


@dataclass(frozen=True)
class RunPage:
    runs: tuple[Run, ...]
    next_cursor: str | None


@dataclass(frozen=True)
class InspectPage:
    """One ``memory:inspect`` answer; a token is "" once its listing is exhausted."""

    vectors: Any | None
    graph: Any | None
    log: Any | None
    next_chunk_token: str
    next_node_token: str
    next_edge_token: str
    next_log_token: str
    read_timestamp: str


@dataclass(frozen=True)
class SearchResult:
    """One ``memory:query`` result; ``snippet`` marks matched terms between « and »."""

    agent_id: str
    path: str
    version: int
    content_sha256: str
    description: str | None
    updated_at: str
    score: float
    snippet: str


@dataclass(frozen=True)
class SearchPage:
    """One ``memory:query`` page, best first; ``next_page_token`` is "" after the last."""

    results: tuple[SearchResult, ...]
    next_page_token: str


@dataclass(frozen=True)
class _TriggerList:
    triggers: tuple[Trigger, ...]


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
    if kind is Any:  # free-form JSON (a trigger's action, an inspect item)
        return value
    origin = get_origin(kind)
    if kind is float:  # JSON has one number type: an integral score arrives as int
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif kind in (str, int, bool):
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
