"""Conventions every /v1 request meets (design §3): protocol header, Origin refusal,
request ids, the one error envelope, strict bodies and body limits."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest

from http_fixtures import (
    ADMIN_KEY,
    AGENT,
    Api,
    agent_url,
    assert_error,
    memory_url,
    open_api,
)
from memfs.errors import CorruptionError

MEMORY_BYTES = 2048


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with open_api(tmp_path, memory_bytes=MEMORY_BYTES) as opened:
        opened.create_agent()
        yield opened


# ---- Memfs-Protocol ------------------------------------------------------------------


def test_missing_or_unsupported_protocol_is_400_naming_header_and_versions(api: Api) -> None:
    for value in (None, "2", "", "1.0", "v1", " 1x"):
        response = api.get(agent_url(), protocol=value)
        body = assert_error(response, 400, "invalid_request", field="Memfs-Protocol")
        assert "Memfs-Protocol" in body["message"]
        assert "Memfs-Protocol: 1" in body["message"]  # the supported value
        assert ("missing" in body["message"]) == (value is None)


def test_protocol_is_checked_before_credentials(api: Api) -> None:
    # A request without the header tells the client what to send, whatever its key.
    assert_error(api.get("/v1/agents", protocol=None, auth=None), 400, "invalid_request")


def test_protocol_refusal_writes_nothing(api: Api) -> None:
    response = api.write("/memories/a.md", "x", headers={"Memfs-Protocol": "9"})
    assert_error(response, 400, "invalid_request", field="Memfs-Protocol")
    assert api.get(memory_url("/memories/a.md")).status_code == 404


# ---- Origin ----------------------------------------------------------------------------


def test_origin_is_refused_with_403_and_nothing_is_written(api: Api) -> None:
    response = api.write("/memories/a.md", "hello", headers={"Origin": "https://evil.example"})
    body = assert_error(response, 403, "forbidden")
    assert "Origin" in body["message"]
    assert api.get(memory_url("/memories/a.md")).status_code == 404
    listing = api.get(agent_url(rest="/memories")).json()
    assert listing["memories"] == []


def test_origin_is_refused_even_with_valid_key_on_reads(api: Api) -> None:
    response = api.get(agent_url(), headers={"Origin": "null"})
    assert_error(response, 403, "forbidden")


# ---- request ids, 404, 405 -------------------------------------------------------------


def test_every_response_has_a_fresh_request_id(api: Api) -> None:
    ok = api.get(agent_url())
    created = api.write("/memories/a.md", "x")
    deleted = api.delete(memory_url("/memories/a.md"))
    unknown = api.get("/nowhere", auth=None, protocol=None)
    ids = [r.headers["memfs-request-id"] for r in (ok, created, deleted, unknown)]
    assert (ok.status_code, created.status_code, deleted.status_code) == (200, 201, 204)
    assert len(set(ids)) == len(ids)


def test_openapi_has_a_request_id(api: Api) -> None:
    response = api.get("/openapi.json", auth=None, protocol=None)
    assert response.status_code == 200
    assert response.json()["paths"]


def test_unknown_route_is_404_envelope(api: Api) -> None:
    for url in ("/v1/nope", "/v1/agents/a/b/c/d", "/", "/v2/agents", "/v1/agents/x/memory:nope"):
        assert_error(api.get(url), 404, "not_found")
        assert_error(api.get(url, auth=None, protocol=None), 404, "not_found")


def test_wrong_method_is_405_with_allow(api: Api) -> None:
    response = api.post(agent_url(), json={})
    assert_error(response, 405, "method_not_allowed")
    allowed = {m.strip() for m in response.headers["allow"].split(",")}
    assert {"GET", "PUT", "DELETE"} <= allowed
    assert "POST" not in allowed
    # Same for the collection and for a memory.
    patch = api.call("PATCH", memory_url("/memories/a.md"), json={})
    assert_error(patch, 405, "method_not_allowed")
    assert "PUT" in patch.headers["allow"]


# ---- bodies ------------------------------------------------------------------------------


def test_malformed_json_is_400_naming_body(api: Api) -> None:
    response = api.put(
        agent_url("users/bob"),
        content=b'{"name": ',
        headers={"Content-Type": "application/json"},
    )
    assert_error(response, 400, "invalid_request", field="body")
    assert api.get(agent_url("users/bob")).status_code == 404


def test_wrong_content_type_is_400(api: Api) -> None:
    response = api.put(
        agent_url("users/bob"),
        content=b'{"name": "Bob"}',
        headers={"Content-Type": "text/plain"},
    )
    assert_error(response, 400, "invalid_request", field="Content-Type")
    memory = api.put(
        memory_url("/memories/a.md"), content=b"hi", headers={"Content-Type": "image/png"}
    )
    assert_error(memory, 400, "invalid_request", field="Content-Type")
    assert api.get(memory_url("/memories/a.md")).status_code == 404


def test_non_object_json_is_400(api: Api) -> None:
    for doc in ([], "name", 3, None, [{"name": "x"}]):
        response = api.put(
            agent_url("users/bob"),
            content=json.dumps(doc).encode(),
            headers={"Content-Type": "application/json"},
        )
        assert_error(response, 400, "invalid_request", field="body")
    memory = api.put(memory_url("/memories/a.md"), json=["content", "x"])
    assert_error(memory, 400, "invalid_request", field="body")
    assert api.get(agent_url("users/bob")).status_code == 404


def test_unknown_fields_are_400_naming_the_field(api: Api) -> None:
    response = api.put(agent_url("users/bob"), json={"name": "Bob", "nmae": "typo"})
    body = assert_error(response, 400, "invalid_request", field="nmae")
    assert "nmae" in body["message"]
    assert api.get(agent_url("users/bob")).status_code == 404
    memory = api.put(memory_url("/memories/a.md"), json={"content": "x", "contnet": "y"})
    assert_error(memory, 400, "invalid_request", field="contnet")


def test_unknown_query_parameter_is_400(api: Api) -> None:
    response = api.get(agent_url(rest="/memories"), params={"pathprefix": "a"})
    assert_error(response, 400, "invalid_request", field="pathprefix")
    # Typos never pass silently, on any route.
    for method, url in (
        ("GET", agent_url()),
        ("GET", agent_url(rest="/memory")),
        ("DELETE", agent_url()),
        ("GET", memory_url("/memories/a.md")),
        ("GET", "/v1/tenant/keys"),
        ("GET", "/v1/tenant/keys/k"),
        ("DELETE", "/v1/tenant/keys/k"),
    ):
        response = api.call(method, url, params={"verison": "1"})
        assert_error(response, 400, "invalid_request", field="verison")
    typo = api.put(agent_url(), params={"nmae": "x"}, json={"name": "renamed"})
    assert_error(typo, 400, "invalid_request", field="nmae")
    assert api.get(agent_url()).json()["name"] == AGENT
    assert api.get(agent_url()).status_code == 200  # the DELETE above did not erase it
    twice = api.get(agent_url(rest="/memories"), params=[("limit", "1"), ("limit", "2")])
    assert_error(twice, 400, "invalid_request", field="limit")


def test_declared_oversize_body_is_413_before_reading(api: Api) -> None:
    body = b"x" * (MEMORY_BYTES + 1)
    response = api.write("/memories/big.md", body)
    assert_error(response, 413, "payload_too_large")
    assert api.get(memory_url("/memories/big.md")).status_code == 404


def test_streamed_oversize_body_without_length_is_413(api: Api) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(8):
            yield b"y" * 1024

    response = api.put(
        memory_url("/memories/big.md"),
        content=chunks(),
        headers={"Content-Type": "text/markdown"},
    )
    assert "content-length" not in response.request.headers
    assert response.request.headers["transfer-encoding"] == "chunked"
    assert_error(response, 413, "payload_too_large")
    assert api.get(memory_url("/memories/big.md")).status_code == 404


def test_streamed_body_stops_being_read_once_over_the_limit(api: Api) -> None:
    """A sender streaming forever is cut off near the limit, not read to the end."""
    chunk = b"z" * 512
    sent = 0
    messages: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal sent
        sent += 1
        return {"type": "http.request", "body": chunk, "more_body": sent < 10_000}

    async def send(message: MutableMapping[str, Any]) -> None:
        messages.append(message)

    path = memory_url("/memories/big.md").encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "PUT",
        "scheme": "http",
        "path": path.decode(),
        "raw_path": path,
        "query_string": b"",
        "root_path": "",
        "server": ("testserver", 80),
        "client": ("testclient", 1),
        "headers": [
            (b"host", b"testserver"),
            (b"memfs-protocol", b"1"),
            (b"authorization", f"Bearer {ADMIN_KEY}".encode()),
            (b"content-type", b"text/markdown"),
            (b"transfer-encoding", b"chunked"),
        ],
    }
    asyncio.run(api.app(scope, receive, send))
    start = next(m for m in messages if m["type"] == "http.response.start")
    assert start["status"] == 413
    assert sent <= MEMORY_BYTES // len(chunk) + 2
    assert api.get(memory_url("/memories/big.md")).status_code == 404


def test_oversize_json_body_on_a_json_route_is_413(api: Api) -> None:
    response = api.put(
        agent_url("users/bob"),
        content=b'{"name": "' + b"n" * (2 * 1024 * 1024) + b'"}',
        headers={"Content-Type": "application/json"},
    )
    assert_error(response, 413, "payload_too_large")
    assert api.get(agent_url("users/bob")).status_code == 404


# ---- unexpected failures ---------------------------------------------------------------


def test_unexpected_exception_is_500_envelope_without_internals(
    api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    api.must_write("/memories/a.md", "hello")

    def explode(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("secret-internal-detail /srv/data/index.sqlite")

    monkeypatch.setattr(api.app.services.store, "read", explode)
    with caplog.at_level(logging.ERROR, logger="memfs.http"):
        response = api.get(memory_url("/memories/a.md"))
    body = assert_error(response, 500, "internal_error")
    request_id = response.headers["memfs-request-id"]
    assert "secret-internal-detail" not in response.text
    assert "RuntimeError" not in response.text
    assert "index.sqlite" not in response.text
    assert request_id in body["message"]
    assert body["details"]["retryable"] is False
    # The operator finds the traceback by the same request id.
    assert any(request_id in r.getMessage() and r.exc_info for r in caplog.records)


def test_unexpected_exception_in_a_write_is_500_and_the_next_request_works(
    api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def explode(*_args: object, **_kwargs: object) -> None:
        # Not a storage condition (those are 503, tests/test_storage_errors.py): a bug.
        raise OSError(13, "Permission denied", "/secret/path")

    with monkeypatch.context() as patched:
        patched.setattr(api.app.services.store, "write", explode)
        with caplog.at_level(logging.CRITICAL, logger="memfs.http"):
            response = api.write("/memories/a.md", "x")
    assert_error(response, 500, "internal_error")
    assert "/secret/path" not in response.text
    assert api.write("/memories/a.md", "x").status_code == 201


def test_corruption_is_a_generic_500_logged_for_the_operator(
    api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    api.must_write("/memories/a.md", "hello")

    def corrupt(*_args: object, **_kwargs: object) -> None:
        raise CorruptionError("log entry agents/x/.memfs/log/0000000001.json is missing")

    monkeypatch.setattr(api.app.services.store, "read", corrupt)
    with caplog.at_level(logging.ERROR, logger="memfs.http"):
        response = api.get(memory_url("/memories/a.md"))
    body = assert_error(response, 500, "internal_error")
    assert ".memfs" not in response.text and "log entry" not in response.text
    request_id = response.headers["memfs-request-id"]
    assert request_id in body["message"]
    assert any(
        request_id in r.getMessage() and ".memfs/log" in r.getMessage() for r in caplog.records
    )


# ---- the envelope --------------------------------------------------------------------


def test_envelope_shape_is_exact_for_every_kind_of_error(api: Api) -> None:
    api.must_write("/memories/a.md", "x")
    cases = [
        (api.get(agent_url(rest="/memories"), params={"limit": "0"}), 400),
        (api.get(agent_url(), auth=None), 401),
        (api.get(agent_url(), auth="nope-nope-nope"), 401),
        (api.get("/v1/tenant/keys", headers={"Origin": "https://x"}), 403),
        (api.get(memory_url("/memories/missing.md")), 404),
        (api.write("/memories/a.md/b.md", "y"), 409),
        (api.write("/memories/a.md", "y", headers={"If-None-Match": "*"}), 412),
        (api.write("/memories/big.md", "b" * (MEMORY_BYTES + 1)), 413),
    ]
    for response, status in cases:
        body = assert_error(response, status, response.json()["code"])
        assert body["details"]["retryable"] is False


def test_unauthorized_carries_www_authenticate(api: Api) -> None:
    response = api.get(agent_url(), auth=None)
    assert_error(response, 401, "unauthorized", field="Authorization")
    assert response.headers["www-authenticate"].lower().startswith("bearer")


def test_error_of_a_memory_route_on_unknown_agent_names_agent(api: Api) -> None:
    response = api.get(memory_url("/memories/a.md", "users/nobody"))
    assert_error(response, 404, "not_found", field="agentId")
    assert AGENT not in response.text


# ---- routing ----------------------------------------------------------------------------


def _samples(pattern: str) -> list[list[str]]:
    """Paths a pattern matches (as decoded segments), with values that are other
    routes' literals too, to catch one route shadowing another."""
    values = ["x", "v1", "agents", "memories", "memory", "versions", "runs", "triggers"]
    out: list[list[str]] = [[]]
    for part in pattern.split("/"):
        if part.endswith("*}"):
            options = [[v, "b.md"] for v in values] + [["only.md"]]
        elif part.startswith("{"):
            action = part.partition("}")[2]
            options = [[v + action] for v in values]
        else:
            options = [[part]]
        out = [prefix + option for prefix in out for option in options]
    return out


def test_each_method_and_path_has_exactly_one_route(api: Api) -> None:
    """The app tries its busiest routes first: that is safe only because no two routes
    answer the same method and path, whatever the order."""
    from memfs.http.app import ROUTES

    for route in ROUTES:
        for segments in _samples(route.pattern):
            path = "/" + "/".join(segments)
            matching = [
                r for r in ROUTES if r.method == route.method and r.match(segments) is not None
            ]
            assert matching == [route], (route.method, path, [r.name for r in matching])
            assert api.app.router.resolve(route.method, path)[0] is route
