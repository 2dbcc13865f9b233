"""Commit-log entries: the immutable, canonical record of every change to an agent.

Entry N of an agent is the object ``agents/<dir>/.memfs/log/<N, 20 digits>.json``;
a commit *is* the create-if-absent of that object. Contents up to ``INLINE_LIMIT``
bytes travel inside the entry so that a typical commit is one durable file; larger
contents are stored first as content-addressed blob objects.
"""

from __future__ import annotations

import datetime as dt
import json
import json.encoder
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from memfs.domain.content import Scalar
from memfs.errors import CorruptionError

FORMAT = 1
INLINE_LIMIT = 16 * 1024
# The first changes of a commit its index row keeps apart, with its change count: what
# the console's log shows of a bulk commit (the API and the CLI give every change).
LOG_HEAD = 20

CREATED, MODIFIED, DELETED, RENAMED = "created", "modified", "deleted", "renamed"
OPERATIONS = (CREATED, MODIFIED, DELETED, RENAMED)


_T = TypeVar("_T")


class _once(Generic[_T]):
    """``functools.cached_property`` without its lock (Python 3.11 takes an RLock on
    every first read, and runs its ``__get__`` in Python): the value is computed on
    the first read and put in the instance's ``__dict__``, where every later read
    finds it without calling here. Two threads reading a new Change at once would
    both compute the same text: harmless."""

    def __init__(self, func: Callable[[Any], _T]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __get__(self, obj: object, owner: type | None = None) -> _T:
        value = obj.__dict__[self.name] = self.func(obj)
        return value


@dataclass(frozen=True)
class Change:
    """One path's new version within a commit; ``after`` is None for a tombstone."""

    path: str
    operation: str
    version: int
    before: str | None
    after: str | None
    size: int = 0
    content: str | None = None  # inline UTF-8 content when size <= INLINE_LIMIT
    renamed_from: str | None = None
    renamed_to: str | None = None
    # Parsed from the content at commit time and kept here so that rebuilding the
    # index never has to parse YAML again.
    description: str | None = None
    metadata: dict[str, Scalar] = field(default_factory=dict)

    # The change's JSON text, made once and reused ("no JSON built twice"): the log
    # entry joins it around the inline content, the index's commits row without it,
    # and the versions and memories rows take the metadata's text. Byte for byte what
    # ``json.dumps(to_json(), ensure_ascii=False, separators=(",", ":"))`` writes
    # (property-tested). Cached on the frozen instance (``_once`` writes its __dict__,
    # not through __setattr__).
    @_once
    def metadata_text(self) -> str:
        """The metadata as JSON (``{}`` when there is none)."""
        return _encode(self.metadata) if self.metadata else "{}"

    @_once
    def _json_parts(self) -> tuple[str, str]:
        """The JSON text before where ``content`` goes, and after it."""
        s = _string
        head = (
            f'{{"path":{s(self.path)},"operation":{s(self.operation)},'
            f'"version":{int.__repr__(self.version)},'
            f'"before":{_nullable(self.before)},"after":{_nullable(self.after)},'
            f'"bytes":{int.__repr__(self.size)}'
        )
        tail = ""
        if self.renamed_from is not None:
            tail += f',"renamedFrom":{s(self.renamed_from)}'
        if self.renamed_to is not None:
            tail += f',"renamedTo":{s(self.renamed_to)}'
        if self.description is not None:
            tail += f',"description":{s(self.description)}'
        if self.metadata:
            tail += f',"metadata":{self.metadata_text}'
        return head, tail + "}"

    @property
    def json_text(self) -> str:
        """The change's JSON without its inline content (the index's commits row)."""
        head, tail = self._json_parts
        return head + tail

    def entry_text(self) -> str:
        """The change's JSON as its log entry holds it (inline content included)."""
        head, tail = self._json_parts
        if self.content is None:
            return head + tail
        return f'{head},"content":{_string(self.content)}{tail}'

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "operation": self.operation,
            "version": self.version,
            "before": self.before,
            "after": self.after,
            "bytes": self.size,
        }
        if self.content is not None:
            out["content"] = self.content
        if self.renamed_from is not None:
            out["renamedFrom"] = self.renamed_from
        if self.renamed_to is not None:
            out["renamedTo"] = self.renamed_to
        if self.description is not None:
            out["description"] = self.description
        if self.metadata:
            out["metadata"] = self.metadata
        return out


@dataclass(frozen=True)
class Commit:
    agent_id: str
    revision: int
    ts: int  # microseconds since the epoch, UTC
    actor: str
    message: str
    changes: tuple[Change, ...] = ()
    agent_name: str | None = None  # set when the commit renames the agent

    def to_json(self) -> dict[str, Any]:
        """The entry's JSON document (``to_bytes`` writes its text)."""
        doc: dict[str, Any] = {
            "format": FORMAT,
            "agentId": self.agent_id,
            "revision": self.revision,
            "ts": format_ts(self.ts),
            "actor": self.actor,
            "message": self.message,
            "changes": [c.to_json() for c in self.changes],
        }
        if self.agent_name is not None:
            doc["agentName"] = self.agent_name
        return doc

    def to_bytes(self) -> bytes:
        """The log entry: ``to_json()`` as compact UTF-8 JSON and a newline, written
        from the changes' own texts (``Change.entry_text``), byte for byte what
        ``json.dumps`` makes of the document (property-tested)."""
        s = _string
        name = f',"agentName":{s(self.agent_name)}' if self.agent_name is not None else ""
        text = (
            f'{{"format":{FORMAT},"agentId":{s(self.agent_id)},'
            f'"revision":{int.__repr__(self.revision)},"ts":"{format_ts(self.ts)}",'
            f'"actor":{s(self.actor)},"message":{s(self.message)},"changes":['
            + ",".join([c.entry_text() for c in self.changes])
            + f"]{name}}}\n"
        )
        return text.encode()

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Commit:
        """A commit from its JSON document; raises ValueError, KeyError or TypeError."""
        if doc.get("format") != FORMAT:
            raise ValueError(f"unknown format {doc.get('format')!r}")
        changes = tuple(
            Change(
                path=c["path"],
                operation=c["operation"],
                version=int(c["version"]),
                before=c["before"],
                after=c["after"],
                size=int(c["bytes"]),
                content=c.get("content"),
                renamed_from=c.get("renamedFrom"),
                renamed_to=c.get("renamedTo"),
                description=c.get("description"),
                metadata=dict(c.get("metadata") or {}),
            )
            for c in doc["changes"]
        )
        return cls(
            agent_id=doc["agentId"],
            revision=int(doc["revision"]),
            ts=parse_ts(doc["ts"]),
            actor=doc["actor"],
            message=doc["message"],
            changes=changes,
            agent_name=doc.get("agentName"),
        )

    @classmethod
    def from_bytes(cls, data: bytes, *, where: str) -> Commit:
        return cls.from_doc(read_entry(data, where=where), where=where)

    @classmethod
    def from_doc(cls, doc: dict[str, Any], *, where: str) -> Commit:
        try:
            return cls.from_json(doc)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptionError(f"log entry {where} is unreadable: {exc}") from None


def read_entry(data: bytes | str, *, where: str) -> dict[str, Any]:
    """The JSON document of a log entry, its format checked; raises CorruptionError."""
    try:
        doc = json.loads(data.decode() if isinstance(data, bytes) else data)  # UTF-8 only
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        raise CorruptionError(f"log entry {where} is unreadable: {exc}") from None
    if doc.get("format") != FORMAT:
        raise CorruptionError(
            f"log entry {where} is unreadable: unknown format {doc.get('format')!r}"
        )
    return doc


# json.dumps(ensure_ascii=False)'s own pieces: the C string encoder, and the encoder
# of a metadata mapping (scalars only).
_string = json.encoder.encode_basestring
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _nullable(value: str | None) -> str:
    return "null" if value is None else _string(value)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


_YEAR_10000 = 253_402_300_800  # seconds since the epoch


# The last timestamp formatted, with its text: a commit formats its own ``ts`` twice
# (the log entry, then the listing text its index row keeps) and reads format rows of
# one timestamp in a row. One (micros, text) tuple, swapped whole: thread-safe.
_last_ts: tuple[int | None, str] = (None, "")


def format_ts(micros: int) -> str:
    """RFC 3339 UTC with microseconds, e.g. 2026-11-29T22:42:34.123456Z."""
    global _last_ts
    last = _last_ts
    if last[0] == micros:
        return last[1]
    seconds, fraction = divmod(micros, 1_000_000)
    if 0 <= seconds < _YEAR_10000:  # the common case, several times faster than datetime
        t = time.gmtime(seconds)
        text = (
            f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T"
            f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}.{fraction:06d}Z"
        )
        _last_ts = (micros, text)
        return text
    when = _EPOCH + dt.timedelta(microseconds=micros)
    # Not strftime("%Y"): glibc writes year 745 as "745", which is not RFC 3339.
    return when.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def parse_ts(text: str) -> int:
    """Microseconds since the epoch of an RFC 3339 timestamp; raises ValueError."""
    if not isinstance(text, str) or "T" not in text.upper():
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    when = dt.datetime.fromisoformat(text.replace("z", "Z"))
    if when.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no time zone")
    delta = when - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def now_us() -> int:
    delta = dt.datetime.now(dt.UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
