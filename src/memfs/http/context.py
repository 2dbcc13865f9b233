"""What a route handler gets: the request, its principal, the app's services, and
helpers that read parameters and bodies strictly (a bad one is a 400, never a 500)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from starlette.requests import Request

from memfs.config import Settings
from memfs.core.auth import Principal
from memfs.core.keys import AdminKey, KeyRing
from memfs.core.runner import Runner
from memfs.core.store import Store
from memfs.core.tokens import Signer
from memfs.errors import InvalidRequest, PayloadTooLarge

T = TypeVar("T")

# Concurrent commits one server process runs (see Services.writer).
WRITERS = 16


def writer_pool() -> ThreadPoolExecutor:
    """The threads the commits of one server process run on."""
    return ThreadPoolExecutor(WRITERS, thread_name_prefix="memfs-writer")


@dataclass
class Services:
    store: Store
    keys: KeyRing
    signer: Signer
    settings: Settings
    admin_key: AdminKey
    runner: Runner | None = None  # set while the app's lifespan runs
    # Commits of memory writes run here, WRITERS at a time: commits of different agents
    # make their log entries durable at once, outside the index lock, and share one
    # index transaction (the Store's group commit, core/commit.py). A dedicated pool,
    # not the default one, so reads never wait behind a burst of writes.
    writer: ThreadPoolExecutor = field(default_factory=lambda: writer_pool())


@dataclass
class Ctx:
    request: Request
    params: dict[str, str]
    services: Services
    request_id: str
    principal: Principal | None = None
    _seen: set[str] = field(default_factory=set)

    @property
    def store(self) -> Store:
        return self.services.store

    async def commit(self, write: Callable[[], T]) -> T:
        """Run ``write`` (a store call that commits) on the app's writer thread."""
        return await asyncio.get_running_loop().run_in_executor(self.services.writer, write)

    @property
    def who(self) -> Principal:
        assert self.principal is not None
        return self.principal

    # ---- query parameters ------------------------------------------------------

    def allow_query(self, *names: str, prefixes: tuple[str, ...] = ()) -> None:
        """Refuse unknown or repeated query parameters (typos must not pass silently)."""
        seen: set[str] = set()
        for key, _value in self.request.query_params.multi_items():
            if key not in names and not key.startswith(prefixes):
                raise InvalidRequest(f"unknown query parameter {key!r}", field=key)
            if key in seen:
                raise InvalidRequest(f"query parameter {key!r} given twice", field=key)
            seen.add(key)

    def query(self, name: str, default: str | None = None) -> str | None:
        value = self.request.query_params.get(name)
        return default if value is None else value

    def limit(self, name: str = "limit", *, maximum: int | None = None) -> int:
        maximum = maximum or self.services.settings.page_items
        raw = self.query(name)
        if raw is None or raw == "":
            return maximum
        if not raw.isascii() or not raw.lstrip("-").isdigit():
            raise InvalidRequest(f"{name} must be an integer >= 1", field=name)
        value = int(raw)
        if value < 1:
            raise InvalidRequest(f"{name} must be an integer >= 1", field=name)
        return min(value, maximum)

    def boolean(self, name: str) -> bool:
        raw = self.query(name)
        if raw in (None, "", "false"):
            return False
        if raw == "true":
            return True
        raise InvalidRequest(f"{name} must be true or false", field=name)

    # ---- bodies -----------------------------------------------------------------

    async def body(self, limit: int) -> bytes:
        """The body, refused with 413 as soon as it passes ``limit`` bytes."""
        declared = self.request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge(f"body is larger than {limit} bytes", field="body")
        chunks: list[bytes] = []
        size = 0
        seconds = self.services.settings.body_timeout_seconds
        try:
            # A slow client holds a connection: its whole body must arrive in time.
            async with asyncio.timeout(seconds):
                async for chunk in self.request.stream():
                    size += len(chunk)
                    if size > limit:
                        raise PayloadTooLarge(f"body is larger than {limit} bytes", field="body")
                    chunks.append(chunk)
        except TimeoutError:
            raise InvalidRequest(
                f"the body did not arrive within {seconds} s (MEMFS_BODY_TIMEOUT_SECONDS)",
                field="body",
            ) from None
        return b"".join(chunks)

    def media_type(self) -> str:
        return self.request.headers.get("content-type", "").split(";")[0].strip().lower()

    async def json(self, limit: int = 1024 * 1024) -> dict[str, Any]:
        if self.media_type() != "application/json":
            raise InvalidRequest(
                "send the body as Content-Type: application/json", field="Content-Type"
            )
        raw = await self.body(limit)
        depth = json_depth(raw)
        if depth > MAX_JSON_DEPTH:
            raise InvalidRequest(
                f"body nests arrays and objects {depth} deep; at most {MAX_JSON_DEPTH} are accepted",
                field="body",
            )
        try:
            doc = json.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise InvalidRequest(f"body is not valid JSON: {exc}", field="body") from None
        if not isinstance(doc, dict):
            raise InvalidRequest("body must be a JSON object", field="body")
        return doc


MAX_JSON_DEPTH = 32  # far more than any memfs body needs; json.loads recurses per level
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_JSON_BRACKET = re.compile(rb"[\[\]{}]")


def json_depth(raw: bytes) -> int:
    """How deep arrays and objects nest in ``raw`` (strings skipped), before parsing:
    a 2 KB body of brackets would otherwise raise RecursionError in json.loads."""
    depth = deepest = 0
    for match in _JSON_BRACKET.finditer(_JSON_STRING.sub(b"", raw)):
        if match.group() in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > MAX_JSON_DEPTH:
                return deepest
        else:
            depth -= 1
    return deepest


def only_fields(doc: dict[str, Any], *allowed: str) -> None:
    for key in doc:
        if key not in allowed:
            raise InvalidRequest(
                f"unknown field {key!r}; expected {', '.join(allowed) or 'none'}", field=key
            )
