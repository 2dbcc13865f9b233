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
        trigger = memfs.put_trigger(agent, "github", prompt="triage")   # .secret shown once
        run, started = memfs.deliver(agent, "github", b"{}", secret=trigger.secret or "")
        for step in memfs.iter_log(agent_id=agent, as_of=None):        # pinned to one instant
            print(step["type"], step["timestamp"])

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

from memfs.client.api import Client
from memfs.client.errors import (
    ApiError,
    ConflictError,
    ForbiddenError,
    InternalServerError,
    InvalidRequestError,
    MemfsClientError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
    PreconditionFailedError,
    RateLimitExceededError,
    TransportError,
    UnauthorizedError,
    UnavailableError,
    UnexpectedResponseError,
)
from memfs.client.results import (
    Agent,
    AgentPage,
    CommandResult,
    CreatedKey,
    InspectPage,
    Key,
    Memory,
    MemoryEntry,
    MemoryPage,
    MemorySummary,
    MemoryWrite,
    Run,
    RunPage,
    SearchPage,
    SearchResult,
    Trigger,
    Version,
    VersionPage,
)

__all__ = [
    "Agent",
    "AgentPage",
    "ApiError",
    "Client",
    "CommandResult",
    "ConflictError",
    "CreatedKey",
    "ForbiddenError",
    "InspectPage",
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
    "Run",
    "RunPage",
    "SearchPage",
    "SearchResult",
    "TransportError",
    "Trigger",
    "UnauthorizedError",
    "UnavailableError",
    "UnexpectedResponseError",
    "Version",
    "VersionPage",
]
