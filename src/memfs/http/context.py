"""What a route handler gets: the request, its principal, the app's services, and
helpers that read parameters and bodies strictly (a bad one is a 400, never a 500)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from starlette.requests import ClientDisconnect, Request

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


# A job: the call, and the loop and future its answer goes back to.
_Job = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


class Writers:
    """The threads commits run on: ``await writers.run(fn)`` runs ``fn`` on one of them.

    One hand-off each way and nothing more: the job goes on a queue that idle threads
    wait on, and its answer comes back with one ``call_soon_threadsafe`` on the
    caller's loop. ``run_in_executor`` on a ThreadPoolExecutor did the same hand-off
    through a ``concurrent.futures.Future`` (a Condition and its lock each), a chain of
    callbacks copying its state into an asyncio future, and a semaphore check for an
    idle thread on every submit: a tenth of the event loop's Python per write
    (docs/benchmarks.md). The ``size`` threads start at the first call.
    """

    def __init__(self, size: int = WRITERS, name: str = "memfs-writer") -> None:
        self.size, self.name = size, name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False

    async def run(self, fn: Callable[[], T]) -> T:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        # Under the lock: a job queued behind shutdown's sentinels would never run.
        with self._lock:
            if self._closed:
                raise RuntimeError("the writer threads are shut down")
            if not self._threads:
                self._start()
            self._jobs.put((fn, loop, future))
        return await future

    def _start(self) -> None:
        """Start the threads (under ``_lock``)."""
        while len(self._threads) < self.size:
            # Daemon threads: an app never shut down (a test's) must not hold the
            # interpreter's exit; a server's lifespan shutdown joins them first.
            thread = threading.Thread(
                target=self._work, name=f"{self.name}_{len(self._threads)}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, loop, future = job
            del job
            try:
                result = fn()
            except BaseException as exc:
                _answer(loop, future, None, exc)
                del exc
            else:
                _answer(loop, future, result, None)
                del result  # an idle thread holds on to no answer
            del fn, loop, future

    def shutdown(self, wait: bool = True) -> None:
        """Refuse new calls; the threads end once the calls queued so far are done."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._jobs.put(None)
        if wait:
            for thread in threads:
                thread.join()


def _answer(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: Any,
    exc: BaseException | None,
) -> None:
    # A closed loop (RuntimeError): nobody waits for the answer any more.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(_settle, future, result, exc)


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.cancelled():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


def writer_pool() -> Writers:
    """The threads the commits of one server process run on."""
    return Writers(WRITERS)


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
    writer: Writers = field(default_factory=lambda: writer_pool())


@dataclass
class Ctx:
    request: Request
    params: dict[str, str]
    services: Services
    request_id: str
    principal: Principal | None = None
    _seen: set[str] = field(default_factory=set)
    _headers: dict[str, str] | None = None

    @property
    def headers(self) -> Mapping[str, str]:
        """The request's headers by (lower-case) name, the first of a repeated one, as
        ``request.headers.get`` answers: read from the raw list once, where each of
        Starlette's look-ups scans and decodes the whole list again."""
        if self._headers is None:
            self._headers = request_headers(self.request.scope)
        return self._headers

    @property
    def store(self) -> Store:
        return self.services.store

    async def commit(self, write: Callable[[], T]) -> T:
        """Run ``write`` (a store call that commits) on one of the app's writer threads."""
        return await self.services.writer.run(write)

    @property
    def who(self) -> Principal:
        assert self.principal is not None
        return self.principal

    # ---- query parameters ------------------------------------------------------

    def allow_query(self, *names: str, prefixes: tuple[str, ...] = ()) -> None:
        """Refuse unknown or repeated query parameters (typos must not pass silently)."""
        if not self.request.scope.get("query_string"):
            return  # none sent (every write): nothing to parse
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
        """The body, refused with 413 as soon as it passes ``limit`` bytes.

        A slow client holds a connection, so its whole body must arrive within
        ``body_timeout_seconds``. The ASGI messages are read directly and the deadline is
        one timer handle that cancels this task: a request's body usually arrives in one
        message, and Starlette's stream generator and ``asyncio.timeout`` cost more than
        the read itself on the duplicate-delivery path (docs/benchmarks.md).
        """
        declared = self.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge(f"body is larger than {limit} bytes", field="body")
        request = self.request
        seconds = self.services.settings.body_timeout_seconds
        deadline = _Deadline()
        handle = asyncio.get_running_loop().call_later(seconds, deadline.expire)
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                message = await request.receive()
                if message["type"] != "http.request":  # http.disconnect
                    raise ClientDisconnect()
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise PayloadTooLarge(f"body is larger than {limit} bytes", field="body")
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        except asyncio.CancelledError:
            if deadline.expired and deadline.task.uncancel() == 0:
                raise InvalidRequest(
                    f"the body did not arrive within {seconds} s (MEMFS_BODY_TIMEOUT_SECONDS)",
                    field="body",
                ) from None
            raise  # cancelled by someone else (shutdown): not ours to swallow
        finally:
            handle.cancel()
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def media_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

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


class _Deadline:
    """The body timer's target: marks the deadline passed and cancels the reading task."""

    __slots__ = ("expired", "task")

    def __init__(self) -> None:
        self.expired = False
        task = asyncio.current_task()
        assert task is not None, "a request body is read inside a task"
        self.task = task

    def expire(self) -> None:
        self.expired = True
        self.task.cancel()


def request_headers(scope: Mapping[str, Any]) -> dict[str, str]:
    """A request's headers (``scope["headers"]``, names lower-cased by the server) as a
    dict: the first value of a repeated name, as Starlette's ``Headers.get``."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1")
        if name not in headers:
            headers[name] = raw_value.decode("latin-1")
    return headers


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
