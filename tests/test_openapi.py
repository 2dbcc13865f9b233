"""``GET /openapi.json``: complete (every route of ``ROUTES``), valid OpenAPI, and true.

"True" is checked by schemathesis (property-based, stateless): for every documented
operation it sends generated requests, valid and invalid ones, through the real ASGI
app, and checks that no response is a 5xx and that every response is documented —
status code, content type, headers (``Memfs-Request-Id``, ``ETag``) and body schema.
Response schemas are closed for the run, so an undocumented field fails too. Random
generation rarely puts, say, a list where a string goes, so each documented JSON body
field also gets every JSON type, deterministically.
"""

from __future__ import annotations

import base64
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import hypothesis
import jsonschema_rs
import pytest
import schemathesis
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (  # the registry's public names
    allow_header_conformance,
    content_type_conformance,
    ignored_auth,
    missing_required_header,
    negative_data_rejection,
    not_a_server_error,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
    use_after_free,
)
from schemathesis.python.asgi import shutdown_lifespans
from starlette.testclient import TestClient

from memfs.config import Settings
from memfs.core.runs import Runs
from memfs.core.triggers import Triggers
from memfs.domain.webhook_verify import sign
from memfs.errors import NotFound
from memfs.http.app import ROUTES, MemfsApp, build
from memfs.http.openapi import OPERATIONS, openapi_path, spec, undocumented
from memfs.http.routing import Route

ADMIN_KEY = "test-admin-key-123456"
AGENT = "users/alice/assistant"
MEMORY = "/memories/notes.md"  # "notes.md" as the {path} parameter
KEY_ID = "fuzz"
TRIGGER_ID = "fuzz-trigger"
SECRET = "whsec_" + base64.b64encode(b"fuzz-secret-of-32-bytes-exactly!").decode()
MAX_EXAMPLES = 30
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    positive_data_acceptance,
    missing_required_header,
    unsupported_method,
    allow_header_conformance,
    ignored_auth,
    use_after_free,
]
OPERATION_KEYS = [(r.method, openapi_path(r)) for r in ROUTES] + [("GET", "/openapi.json")]
Json = dict[str, Any]


@pytest.fixture
def app(tmp_path: Path) -> Iterator[MemfsApp]:
    built = build(Settings(data=tmp_path / "data", admin_key=ADMIN_KEY))
    yield built
    built.services.store.close()


def served(app: MemfsApp) -> Json:
    with TestClient(app) as client:
        response = client.get("/openapi.json")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    document: Json = response.json()
    return document


# ---- complete ----------------------------------------------------------------------


def test_every_route_is_served_and_described(app: MemfsApp) -> None:
    document = served(app)
    for route in ROUTES:
        path = openapi_path(route)
        assert path in document["paths"], f"{route.name}: {path} is not in /openapi.json"
        operation = document["paths"][path].get(route.method.lower())
        assert operation is not None, f"{route.method} {path} is not in /openapi.json"
        assert operation["operationId"] == route.name
        assert not operation.get("x-memfs-undocumented"), (
            f"route {route.name} ({route.method} {path}) has no entry in "
            "memfs.http.openapi.OPERATIONS: describe its parameters, body and responses there"
        )
    documented = {(m.upper(), p) for p, ops in document["paths"].items() for m in ops}
    assert documented == set(OPERATION_KEYS), "the document lists a route that does not exist"
    assert document == spec(ROUTES)


def test_every_description_belongs_to_a_route() -> None:
    assert set(OPERATIONS) <= {r.name for r in ROUTES}, "OPERATIONS describes a removed route"


async def _ok(ctx: object) -> None:
    raise AssertionError("never called")


def test_a_route_without_a_description_is_flagged_not_dropped() -> None:
    extra = Route("POST", "v1/agents/{agentId}/things/{thingId}:poke", _ok, "pokeThing")
    document = spec([*ROUTES, extra])
    operation = document["paths"]["/v1/agents/{agentId}/things/{thingId}:poke"]["post"]
    assert operation["x-memfs-undocumented"] is True
    assert undocumented([*ROUTES, extra]) == ["pokeThing"]
    assert undocumented(ROUTES) == []


def test_conventions_are_on_every_v1_operation(app: MemfsApp) -> None:
    document = served(app)
    parameters = document["components"]["parameters"]
    assert parameters["Memfs-Protocol"]["required"] is True
    assert parameters["Memfs-Protocol"]["schema"]["enum"] == ["1"]
    protocol = {(r.method, openapi_path(r)): r.protocol for r in ROUTES}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            refs = {p.get("$ref", "").rsplit("/", 1)[-1] for p in operation.get("parameters", [])}
            if protocol.get((method.upper(), path)):
                assert {"Memfs-Protocol", "Memfs-Subject", "Memfs-Scopes"} <= refs, where
                assert operation["security"] == [{"bearer": []}], where
                assert {"400", "401", "403", "500"} <= set(operation["responses"]), where
            for name in {n for n in refs if n in parameters and parameters[n]["in"] == "path"}:
                assert "{" + parameters[name]["name"] + "}" in path, where
            for status, response in operation["responses"].items():
                response = _resolve(document, response)
                assert "Memfs-Request-Id" in response["headers"], f"{where} {status}"
                if int(status) >= 400:
                    schema = response["content"]["application/json"]["schema"]
                    assert schema["allOf"][0] == {"$ref": "#/components/schemas/Error"}


def test_error_envelope_component_matches_the_contract(app: MemfsApp) -> None:
    components = served(app)["components"]
    error = components["schemas"]["Error"]
    assert error["required"] == ["code", "message", "details"]
    details = error["properties"]["details"]
    assert details["required"] == ["field", "issues", "requestId", "retryable"]
    codes = {
        "BadRequest": "invalid_request",
        "Unauthorized": "unauthorized",
        "Forbidden": "forbidden",
        "NotFound": "not_found",
        "MethodNotAllowed": "method_not_allowed",
        "Conflict": "conflict",
        "PreconditionFailed": "precondition_failed",
        "PayloadTooLarge": "payload_too_large",
        "InternalError": "internal_error",
    }
    for name, code in codes.items():
        schema = components["responses"][name]["content"]["application/json"]["schema"]
        assert schema["allOf"][1]["properties"]["code"] == {"const": code}


# ---- valid ---------------------------------------------------------------------------


def _resolve(document: Json, node: Json) -> Json:
    while "$ref" in node:
        target: Json = document
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def _refs(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def test_document_is_valid_openapi_3_1(app: MemfsApp) -> None:
    document = served(app)
    assert document["openapi"] == "3.1.0"
    schemathesis.openapi.from_dict(document).validate()  # the OpenAPI 3.1 meta-schema
    for name, schema in document["components"]["schemas"].items():
        assert jsonschema_rs.meta.is_valid(schema), name  # JSON Schema 2020-12
    for ref in set(_refs(document)):
        assert ref.startswith("#/components/"), ref
        _resolve(document, {"$ref": ref})  # raises KeyError when dangling
    used = {ref.rsplit("/", 1)[-1] for ref in _refs(document)}
    unused = set(document["components"]["schemas"]) - used
    assert not unused, f"component schemas no operation uses: {unused}"


# ---- true: schemathesis against the in-process app ---------------------------------


def _closed(document: Json, schema: Json) -> Json:
    """``schema`` inlined, ``allOf`` merged, every object closed to unknown fields."""
    schema = _resolve(document, schema)
    if "allOf" in schema:
        merged: Json = {"type": "object", "properties": {}, "required": []}
        for part in schema["allOf"]:
            flat = _closed(document, part)
            merged["properties"].update(flat.get("properties", {}))
            merged["required"] += flat.get("required", [])
        merged["additionalProperties"] = False
        return merged
    out = dict(schema)
    if "properties" in out:
        out["properties"] = {k: _closed(document, v) for k, v in out["properties"].items()}
        out.setdefault("additionalProperties", False)
    if "items" in out:
        out["items"] = _closed(document, out["items"])
    for key in ("oneOf", "anyOf"):
        if key in out:
            out[key] = [_closed(document, s) for s in out[key]]
    return out


def closed_responses(document: Json) -> Json:
    """The document with each response's schemas closed (drift shows as a failure)."""
    for operations in document["paths"].values():
        for operation in operations.values():
            for status, response in list(operation["responses"].items()):
                response = dict(_resolve(document, response))
                response["content"] = {
                    media: {**body, "schema": _closed(document, body["schema"])}
                    for media, body in response.get("content", {}).items()
                }
                operation["responses"][status] = response
    return document


def _together(case: schemathesis.Case) -> schemathesis.Case:
    """Memfs-Subject and Memfs-Scopes go together (OpenAPI can't say that one header
    requires another; the spec says it in words and test_subject_headers_go_together
    checks it): a case with one of them alone gets the other dropped too."""
    headers = case.headers or {}
    if ("Memfs-Subject" in headers) != ("Memfs-Scopes" in headers):
        for name in ("Memfs-Subject", "Memfs-Scopes"):
            headers.pop(name, None)
    return case


def _plain(case: schemathesis.Case) -> schemathesis.Case:
    """The case without subject narrowing (random scopes would stop it at a 400/403)."""
    for name in ("Memfs-Subject", "Memfs-Scopes"):
        (case.headers or {}).pop(name, None)
    return case


@dataclass
class Fuzz:
    app: MemfsApp
    schema: schemathesis.BaseSchema
    document: Json
    failed_run: str = ""

    def ensure_fixtures(self) -> None:
        """Put back what an earlier case may have changed: agent, memory, key, trigger."""
        store, keys = self.app.services.store, self.app.services.keys
        try:
            store.get_agent(AGENT)
        except NotFound:
            store.create_agent(AGENT)
        try:
            store.read(AGENT, MEMORY)
        except NotFound:
            store.write(AGENT, MEMORY, b"---\ndescription: d\nkind: rule\n---\n# n\n", actor="t")
        try:
            keys.get(KEY_ID)
        except NotFound:
            keys.create(KEY_ID, ["memories:read", "agents:users"], "")
        triggers = Triggers(store.backend)
        try:
            current = triggers.get(AGENT, TRIGGER_ID).secrets[0].value
        except NotFound:
            current = None
        if current != SECRET:
            triggers.put(AGENT, TRIGGER_ID, {"secret": SECRET, "prompt": "fuzz"})

    def make_failed_run(self) -> None:
        """A failed run (before the app's runner starts), for :retry to accept once."""
        runs = Runs(self.app.services.store)
        run, _created = runs.deliver(AGENT, TRIGGER_ID, "msg_failed", b"{}", "application/json", 1)
        runs.append(AGENT, run.run_id, lambda cur: {"type": "failed", "error": "fixture"})
        assert runs.get(AGENT, run.run_id).status == "failed"
        self.failed_run = run.run_id

    def known(self, operation: Any) -> Json:
        """Fixed parameters that name existing things, so handlers do their real work."""
        names = {p.name for p in operation.path_parameters}
        values = {
            "agentId": AGENT,
            "scopeId": "users",
            "path": MEMORY.removeprefix("/memories/"),
            "keyId": KEY_ID,
            "triggerId": TRIGGER_ID,
            "runId": self.failed_run,
        }
        out: Json = {"path_parameters": {k: v for k, v in values.items() if k in names}}
        if operation.path.endswith("/versions"):
            out["query"] = {"path": MEMORY}
        if operation.path.endswith(":deliver"):
            body = b'{"event": "fuzz"}'
            stamp = int(time.time())
            out["headers"] = {
                "webhook-id": "msg_fuzz",
                "webhook-timestamp": str(stamp),
                "webhook-signature": sign(SECRET, "msg_fuzz", stamp, body),
                "Content-Type": "application/json",
            }
            out["body"] = body
            out["media_type"] = "application/json"
        return out


@pytest.fixture
def fuzz(app: MemfsApp) -> Iterator[Fuzz]:
    document = closed_responses(served(app))
    schema = schemathesis.openapi.from_dict(document, config=schemathesis.Config())
    schema.app = app  # what from_asgi sets: requests go to the app in-process
    # Every request carries the admin key (HEADERS); generating keys would only slow it down.
    schema.config.generation.update(with_security_parameters=False)
    # A schema-valid request may still be refused for what a schema can't state: an
    # opaque signed cursor that was never issued, frontmatter that is not YAML, scopes
    # the key doesn't hold, a random If-Match (412), a memory over the size limit (413).
    # So positive_data_acceptance takes 400/412/413 too: it still fails on 405, 415,
    # 422 or an undocumented status. negative_data_rejection stays strict.
    checks = schema.config.checks
    checks.positive_data_acceptance.expected_statuses = [
        "2xx", "3xx", "400", "401", "403", "404", "409", "412", "413", "429",
    ]  # fmt: skip
    checks.negative_data_rejection.expected_statuses = [
        "400", "401", "403", "404", "405", "406", "409", "412", "413", "415", "422", "428", "429",
    ]  # fmt: skip
    fuzz = Fuzz(app, schema, document)
    fuzz.ensure_fixtures()
    fuzz.make_failed_run()
    yield fuzz
    shutdown_lifespans()  # schemathesis ran the app's lifespan; end it with the test


HEADERS = {"Authorization": f"Bearer {ADMIN_KEY}"}


@pytest.mark.parametrize(
    ("method", "path"), OPERATION_KEYS, ids=[f"{m} {p}" for m, p in OPERATION_KEYS]
)
def test_the_app_answers_as_documented(fuzz: Fuzz, method: str, path: str) -> None:
    operation = fuzz.schema[path][method]
    strategies = [operation.as_strategy(mode).map(_together) for mode in GenerationMode]
    known = fuzz.known(operation)
    if known["path_parameters"]:
        # Random ids mostly miss; these reach the handlers' real work too.
        strategies.append(operation.as_strategy(GenerationMode.POSITIVE, **known).map(_plain))
    statuses: Counter[int] = Counter()

    @hypothesis.settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    @hypothesis.given(case=st.one_of(strategies))
    def run(case: schemathesis.Case) -> None:
        fuzz.ensure_fixtures()
        response = case.call(headers=HEADERS)
        statuses[response.status_code] += 1
        case.validate_response(response, checks=CHECKS)

    run()
    assert any(200 <= status < 300 for status in statuses), (
        f"no generated request got past validation: {dict(statuses)}"
    )


# ---- true: every documented JSON field, every JSON type --------------------------------

WRONG = [None, True, -1, 1.5, "", "x" * 300, [], [1, "a"], {}, {"k": [None]}]


def _variants(document: Json, schema: Json) -> list[tuple[Json, list[str]]]:
    """(base body, top-level field names): ``{}`` with every name of the body schema,
    then per oneOf branch its discriminator (a const field) with that branch's names."""
    schema = _resolve(document, schema)
    branches = [_resolve(document, b) for b in schema.get("oneOf", [])]
    names = {*schema.get("properties", {})}.union(*(b.get("properties", {}) for b in branches))
    out: list[tuple[Json, list[str]]] = [({}, sorted(names))]
    for branch in branches:
        props = branch.get("properties", {})
        base = {name: prop["const"] for name, prop in props.items() if "const" in prop}
        if base:
            out.append((base, sorted(set(props) - set(base))))
    return out


JSON_BODIES = [
    (m, p)
    for m, p in OPERATION_KEYS
    if "application/json"
    in spec(ROUTES)["paths"][p][m.lower()].get("requestBody", {}).get("content", {})
]


@pytest.mark.parametrize(("method", "path"), JSON_BODIES, ids=[f"{m} {p}" for m, p in JSON_BODIES])
def test_any_json_type_in_any_body_field_is_answered_as_documented(
    fuzz: Fuzz, method: str, path: str
) -> None:
    # Deterministic type confusion, which random generation reaches only by luck: a
    # list where a string goes once made memory:command answer 500.
    operation = fuzz.schema[path][method]
    body = fuzz.document["paths"][path][method.lower()]["requestBody"]["content"]
    variants = _variants(fuzz.document, body["application/json"]["schema"])
    # A case made by hand is sent as given: encode the ids as the generated ones are.
    known = {k: quote(v, safe="") for k, v in fuzz.known(operation)["path_parameters"].items()}
    for base, names in variants:
        for name in names:
            for value in WRONG:
                fuzz.ensure_fixtures()
                case = operation.Case(
                    path_parameters=known,
                    headers={"Memfs-Protocol": "1", **HEADERS},
                    body={**base, name: value},
                    media_type="application/json",
                )
                case.validate_response(case.call(), checks=CHECKS)
