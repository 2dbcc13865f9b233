"""The JSON wire shapes: each object the API answers, its keys named once, in order.

The server builds every one of these objects with ``SHAPE.build(...)`` (HTTP bodies and
the CLI's ``--json`` alike), and the Python client decodes its result classes from the
same shapes (``memfs.client.results``), checking at import that each class has exactly
a shape's keys. A key renamed here changes all three; a key renamed on one side only
fails at import or in ``tests/test_shapes.py``, not in a user's hands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Shape:
    name: str
    keys: tuple[str, ...]

    def build(self, *values: object) -> dict[str, Any]:
        """The object with ``values`` under ``keys``, positionally, in the shape's order."""
        if len(values) != len(self.keys):
            raise TypeError(f"{self.name}: {len(values)} values for {len(self.keys)} keys")
        return dict(zip(self.keys, values, strict=True))

    def extend(self, name: str, *keys: str) -> Shape:
        """This shape with more keys after its own (a write's answer, a created key)."""
        return Shape(name, self.keys + keys)


LISTING = Shape(
    "listing", ("path", "bytes", "contentSha256", "description", "version", "updatedAt")
)
# A PUT's answer: the listing fields and the commit's revision (the status says created).
MEMORY_WRITE = LISTING.extend("memoryWrite", "revision")
MEMORY = Shape(
    "memory",
    (
        "path",
        "content",
        "bytes",
        "contentSha256",
        "description",
        "metadata",
        "version",
        "createdAt",
        "updatedAt",
    ),
)
AGENT = Shape("agent", ("agentId", "name", "memoryStoreId", "createdAt", "revision"))
AGENT_COUNTED = AGENT.extend("agentCounted", "memoryCount")
VERSION = Shape(
    "version",
    (
        "version",
        "operation",
        "contentSha256",
        "bytes",
        "revision",
        "validFrom",
        "validTo",
        "actor",
        "message",
    ),
)
COMMIT = Shape("commit", ("revision", "timestamp", "actor", "message", "changes"))
SUMMARY = Shape(
    "summary",
    (
        "agentId",
        "agentName",
        "memoryStoreId",
        "memoryCount",
        "totalBytes",
        "revision",
        "state",
        "pendingRunCount",
        "failedRunCount",
        "lastUpdatedAt",
        "lastCheckedAt",
        "nextRetryAt",
    ),
)
KEY = Shape("key", ("keyId", "scopes", "description", "createdAt"))
KEY_CREATED = KEY.extend("keyCreated", "secret")
TRIGGER = Shape(
    "trigger",
    ("agentId", "triggerId", "prompt", "action", "maxAttempts", "createdAt", "updatedAt"),
)
TRIGGER_WITH_SECRET = TRIGGER.extend("triggerWithSecret", "secret")
RUN = Shape(
    "run",
    (
        "id",
        "agentId",
        "triggerId",
        "webhookId",
        "status",
        "attempt",
        "maxAttempts",
        "nextRetryAt",
        "createdAt",
        "startedAt",
        "finishedAt",
        "exitCode",
        "output",
        "error",
    ),
)
# memory:inspect's page tokens and pin; the sections (vectors, graph, log) are added
# only when asked for.
INSPECT_TAIL = Shape(
    "inspectTail",
    ("nextChunkToken", "nextNodeToken", "nextEdgeToken", "nextLogToken", "readTimestamp"),
)
INSPECT_SECTIONS = ("vectors", "graph", "log")

ALL = (
    LISTING,
    MEMORY_WRITE,
    MEMORY,
    AGENT,
    AGENT_COUNTED,
    VERSION,
    COMMIT,
    SUMMARY,
    KEY,
    KEY_CREATED,
    TRIGGER,
    TRIGGER_WITH_SECRET,
    RUN,
    INSPECT_TAIL,
)
