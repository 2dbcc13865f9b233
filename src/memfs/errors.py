"""The one exception tree of memfs. It knows nothing of HTTP.

    MemfsError
     ├── InvalidRequest       bad parameter, path, id, cursor, YAML, encoding
     ├── Unauthorized         no/unknown key, bad webhook signature
     ├── Forbidden            outside the key's or subject's scopes
     ├── NotFound             agent, memory, version, trigger, run, key
     ├── Conflict             create on an existing name, file-vs-folder clash
     ├── PreconditionFailed   If-Match / If-None-Match / --if-match not met
     ├── PayloadTooLarge      memory or webhook body over its limit
     ├── Unavailable          shutting down, storage full, index rebuilding (retryable)
     │    └── Damaged          one agent's canonical files are damaged (not retryable)
     └── CorruptionError      canonical state is damaged (never caused by input)

The HTTP edge maps ``code`` to a status in one place; the CLI prints ``message``.
"""

from __future__ import annotations

from collections.abc import Sequence


class MemfsError(Exception):
    """Base of every error memfs raises on purpose."""

    code = "internal_error"
    retryable = False

    def __init__(
        self, message: str, *, field: str | None = None, issues: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.issues = list(issues)


class InvalidRequest(MemfsError):
    code = "invalid_request"


class Unauthorized(MemfsError):
    code = "unauthorized"


class Forbidden(MemfsError):
    code = "forbidden"


class NotFound(MemfsError):
    code = "not_found"


class Conflict(MemfsError):
    code = "conflict"


class PreconditionFailed(MemfsError):
    code = "precondition_failed"


class PayloadTooLarge(MemfsError):
    code = "payload_too_large"


class Unavailable(MemfsError):
    code = "unavailable"
    retryable = True


class Damaged(Unavailable):
    """An agent whose canonical state failed a check: an operator must run fsck.

    Only that agent is affected; ``agent_id`` and ``file`` say where the damage is."""

    retryable = False

    def __init__(self, agent_id: str, file: str, reason: str) -> None:
        super().__init__(
            f"agent {agent_id!r} is damaged: {file}: {reason}; "
            "run 'memfs fsck' for the report and the command that repairs it",
            field="agentId",
        )
        self.agent_id = agent_id
        self.file = file
        self.reason = reason
        self.known = False  # True once recorded in the index


class StorageError(Unavailable):
    """A write failed because the disk is full, read-only or failing (ENOSPC, EIO…)."""


class CorruptionError(MemfsError):
    code = "internal_error"


class SymlinkRefused(InvalidRequest):
    """A symlink stands where memfs expects a file or folder of its data folder; memfs
    never follows one (it could lead anywhere), so the operation is refused."""
