"""An inspect answer is freed with its own response, not by the next request.

The API's ``memory:inspect`` and the console's inspect page read in the thread pool. An
anyio worker keeps its last job, and the future holding that job's result, until it
gets another one: an answer of bulk commits (≈ 100k change objects at 100k memories)
was freed by whichever request next used the pool, 16-20 ms of that request's time
(the console's inspect page measured after the API's call: docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from console_helpers import sign_in
from http_fixtures import ADMIN_KEY, AGENT, Api, enc, open_api
from memfs.console import pages
from memfs.core import inspect as inspecting
from memfs.http import inspect as http_inspect


class Answer(dict[str, Any]):
    """A dict that a weak reference can watch (a plain dict cannot be)."""


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with open_api(tmp_path) as opened:
        opened.create_agent()
        opened.must_write("/memories/a.md", "# A\n")
        yield opened


def asgi(
    api: Api, method: str, path: str, body: bytes, headers: dict[str, str], refs: list[Any]
) -> tuple[int, bool]:
    """One request straight into the app on an event loop of its own, and a check of
    what is still alive right after it: nothing else uses that loop's thread pool in
    between (a TestClient request runs more jobs around the app's own)."""
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "root_path": "",
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def run() -> tuple[int, bool]:
        await api.app(scope, receive, send)
        status: int = sent[0]["status"]
        # Checked on the loop, its worker threads still running (idle, waiting).
        return status, refs[-1]() is None

    return asyncio.run(run())


def watching(monkeypatch: pytest.MonkeyPatch, module: Any, attr: str) -> list[Any]:
    refs: list[Any] = []
    real: Callable[..., dict[str, Any]] = inspecting.inspect

    def inspect(*args: Any, **kwargs: Any) -> dict[str, Any]:
        answer = Answer(real(*args, **kwargs))
        refs.append(weakref.ref(answer))
        return answer

    monkeypatch.setattr(module, attr, inspect)
    return refs


def test_the_apis_inspect_answer_is_freed_with_its_response(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    refs = watching(monkeypatch, http_inspect, "inspect")
    headers = {
        "Authorization": f"Bearer {ADMIN_KEY}",
        "Memfs-Protocol": "1",
        "Content-Type": "application/json",
    }
    body = json.dumps({"log": {}}).encode()
    path = f"/v1/agents/{enc(AGENT)}/memory:inspect"
    status, freed = asgi(api, "POST", path, body, headers, refs)
    assert status == 200
    assert freed, "the thread pool kept the answer for its next job"


def test_the_console_inspect_pages_answer_is_freed_with_its_response(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    refs = watching(monkeypatch, pages.inspecting, "inspect")
    answer = sign_in(api.client, ADMIN_KEY)
    assert answer.status_code == 303
    cookie = "; ".join(f"{k}={v}" for k, v in api.client.cookies.items())
    path = f"/console/agents/{enc(AGENT)}/inspect"
    status, freed = asgi(api, "GET", path, b"", {"Cookie": cookie}, refs)
    assert status == 200 and len(refs) == 1
    assert freed, "the thread pool kept the answer for its next job"
