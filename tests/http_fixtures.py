"""Helpers for the HTTP tests: an in-process app on ``tmp_path`` and a small client.

Each test module opens an ``Api`` in its own fixture::

    @pytest.fixture
    def api(tmp_path: Path) -> Iterator[Api]:
        with open_api(tmp_path) as opened:
            yield opened

Requests go through Starlette's ``TestClient`` (sync, real ASGI, lifespan run on
exit so the store is closed). ``Api.call`` sends ``Memfs-Protocol: 1`` and the admin
key unless told otherwise (``auth=None`` / ``protocol=None`` leave them out).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.testclient import TestClient

from memfs.config import Settings
from memfs.http.app import MemfsApp, build

if TYPE_CHECKING:
    # Starlette's TestClient answers with httpx2 responses (the httpx API) when installed.
    from httpx2 import Response

ADMIN_KEY = "test-admin-key-123456"
AGENT = "users/alice/assistant"
ENVELOPE_KEYS = {"code", "message", "details"}
DETAIL_KEYS = {"field", "issues", "requestId", "retryable"}


def enc(agent_id: str) -> str:
    """An agent id as one URL path segment (``users%2Falice%2Fassistant``)."""
    return quote(agent_id, safe="")


def agent_url(agent_id: str = AGENT, rest: str = "") -> str:
    return f"/v1/agents/{enc(agent_id)}{rest}"


def memory_url(path: str, agent_id: str = AGENT) -> str:
    """The URL of a memory: ``/memories/a b/c.md`` → ``…/memories/a%20b/c.md``."""
    assert path.startswith("/memories/")
    segments = path.removeprefix("/memories/").split("/")
    return agent_url(agent_id, "/memories/" + "/".join(quote(s, safe="") for s in segments))


def sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def assert_error(
    response: Response, status: int, code: str, field: str | None = None
) -> dict[str, Any]:
    """The response is the error envelope, exactly, with this status/code(/field)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == ENVELOPE_KEYS, body
    assert set(body["details"]) == DETAIL_KEYS, body
    assert body["code"] == code, body
    assert isinstance(body["message"], str) and body["message"], body
    assert isinstance(body["details"]["issues"], list)
    assert isinstance(body["details"]["retryable"], bool)
    request_id = response.headers["memfs-request-id"]
    assert request_id and body["details"]["requestId"] == request_id
    if field is not None:
        assert body["details"]["field"] == field, body
    details: dict[str, Any] = body
    return details


class Api:
    """A client on one in-process memfs app."""

    def __init__(self, client: TestClient, app: MemfsApp, data: Path) -> None:
        self.client, self.app, self.data = client, app, data

    def call(
        self,
        method: str,
        url: str,
        *,
        auth: str | None = ADMIN_KEY,
        protocol: str | None = "1",
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> Response:
        sent: dict[str, str] = {}
        if protocol is not None:
            sent["Memfs-Protocol"] = protocol
        if auth is not None:
            sent["Authorization"] = f"Bearer {auth}"
        sent.update(headers or {})
        response = self.client.request(method, url, headers=sent, **kwargs)
        assert response.headers.get("memfs-request-id", "").startswith("req_"), (
            method,
            url,
            response.headers,
        )
        return response

    def get(self, url: str, **kwargs: Any) -> Response:
        return self.call("GET", url, **kwargs)

    def put(self, url: str, **kwargs: Any) -> Response:
        return self.call("PUT", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> Response:
        return self.call("POST", url, **kwargs)

    def delete(self, url: str, **kwargs: Any) -> Response:
        return self.call("DELETE", url, **kwargs)

    # ---- shortcuts that must succeed ---------------------------------------------

    def create_agent(self, agent_id: str = AGENT, name: str | None = None) -> dict[str, Any]:
        body = {} if name is None else {"name": name}
        response = self.put(agent_url(agent_id), json=body)
        assert response.status_code == 201, response.text
        created: dict[str, Any] = response.json()
        return created

    def write(
        self,
        path: str,
        content: str | bytes,
        *,
        agent_id: str = AGENT,
        auth: str | None = ADMIN_KEY,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """PUT a memory as text/markdown (the whole file)."""
        data = content.encode() if isinstance(content, str) else content
        return self.put(
            memory_url(path, agent_id),
            content=data,
            auth=auth,
            headers={"Content-Type": "text/markdown", **(headers or {})},
        )

    def must_write(self, path: str, content: str | bytes, agent_id: str = AGENT) -> dict[str, Any]:
        response = self.write(path, content, agent_id=agent_id)
        assert response.status_code in (200, 201), response.text
        body: dict[str, Any] = response.json()
        return body

    def make_key(self, key_id: str, scopes: list[str], description: str = "") -> str:
        response = self.put(
            f"/v1/tenant/keys/{key_id}", json={"scopes": scopes, "description": description}
        )
        assert response.status_code == 201, response.text
        secret: str = response.json()["secret"]
        return secret

    def versions(self, path: str, agent_id: str = AGENT) -> list[dict[str, Any]]:
        response = self.get(agent_url(agent_id, "/versions"), params={"path": path})
        assert response.status_code == 200, response.text
        rows: list[dict[str, Any]] = response.json()["versions"]
        return rows

    def walk(self, url: str, items: str, params: Mapping[str, str]) -> list[dict[str, Any]]:
        """Every page of a listing; each page's body, in order."""
        pages: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            query = dict(params)
            if cursor is not None:
                query["cursor"] = cursor
            response = self.get(url, params=query)
            assert response.status_code == 200, response.text
            page: dict[str, Any] = response.json()
            assert items in page
            pages.append(page)
            cursor = page["nextCursor"]
            if cursor is None:
                return pages
            assert len(pages) < 1000, "the walk does not end"


def settings(tmp_path: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"data": tmp_path / "data", "admin_key": ADMIN_KEY, **overrides}
    return Settings(**values)


@contextmanager
def open_api(tmp_path: Path, **overrides: Any) -> Iterator[Api]:
    """An app on ``tmp_path / "data"`` (settings ``overrides`` on top), closed on exit."""
    app = build(settings(tmp_path, **overrides))
    app.run_runs = False  # no background run executor: these tests are about the HTTP edge
    with TestClient(app, raise_server_exceptions=True) as client:
        yield Api(client, app, tmp_path / "data")
