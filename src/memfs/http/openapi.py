"""The OpenAPI 3.1 document served at ``/openapi.json``, built from the route table.

The route table (``memfs.http.app.ROUTES``) alone says which operations exist;
``OPERATIONS`` says, per route name, what each one takes and answers, in the words of
``memfs.http.openapi_components``. A route with no entry is still listed, flagged
``x-memfs-undocumented``, and ``tests/test_openapi.py`` fails on it: nothing is
dropped silently.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

from memfs import __version__
from memfs.http.openapi_components import (
    ERRORS,
    HEADERS,
    PARAMETERS,
    SCHEMAS,
    STRING,
    Json,
    error_response,
    json_content,
    ref,
    response,
    schema_ref,
)
from memfs.http.routing import Route

# ---- operations -----------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """What one route takes and answers; path parameters come from its pattern."""

    tag: str
    summary: str
    ok: dict[int, tuple[str, str | None]]  # status: (description, schema or None)
    errors: tuple[int, ...] = ()  # beyond 400, 401, 403, 500 and 503
    params: tuple[str, ...] = ()
    body: str | None = None  # a JSON schema name, or */* for any bytes
    description: str = ""
    markdown: bool = False  # text/markdown too: the PUT body, the GET response
    etag: bool = False


PAGE = ("limit", "cursor")
INSPECT = (
    "Needs inspect. Every stored version (superseded and deleted ones too) as chunks, graph "
    "nodes and link edges, and the log, oldest first. Page tokens are signed, bound to the "
    "target and section, and expire after 24 h; asOf in the future is a 400."
)
SEARCH = (
    "Needs memories:read. Full-text search of the current memories. Page tokens are "
    "signed, bound to the target and the query, and expire after 24 h."
)
ADMIN = "Admin key only."
TW = "Needs triggers:write."

OPERATIONS: dict[str, Op] = {
    "putKey": Op(
        "tenant",
        "Create an application key",
        {201: ("created; the secret is shown only here", "NewKey")},
        (409, 413),
        body="KeyRequest",
        description=f"{ADMIN} The secret is stored as a hash; a taken keyId is a 409.",
    ),
    "listKeys": Op(
        "tenant",
        "List application keys",
        {200: ("a page of keys, by keyId", "KeyList")},
        params=PAGE,
        description=ADMIN,
    ),
    "getKey": Op("tenant", "Read a key", {200: ("the key", "Key")}, (404,), description=ADMIN),
    "revokeKey": Op("tenant", "Revoke a key", {204: ("revoked", None)}, (404,), description=ADMIN),
    "listAgents": Op(
        "agents",
        "List agents",
        {200: ("a page of agents, by id", "AgentList")},
        params=("prefix", *PAGE),
        description="Needs memories:read; agents the key does not cover are left out.",
    ),
    "putAgent": Op(
        "agents",
        "Create or rename an agent",
        {201: ("created", "Agent"), 200: ("existed; renamed if the name differs", "Agent")},
        (409, 413),
        body="AgentRequest",
        description="Needs memories:write on the agent. Send {} to use the id as name.",
    ),
    "getAgent": Op("agents", "Read an agent", {200: ("the agent", "Agent")}, (404,)),
    "deleteAgent": Op(
        "agents",
        "Erase an agent",
        {204: ("erased", None)},
        (404,),
        description=f"{ADMIN} Erases its memories and whole history, irrecoverably.",
    ),
    "getMemorySummary": Op(
        "agents", "Summarise an agent's memory", {200: ("the summary", "MemorySummary")}, (404,)
    ),
    "memoryCommand": Op(
        "memories",
        "Run one Claude memory-tool command",
        {200: ("the tool result; ok=false for a refused command", "MemoryCommandResult")},
        (404, 413),
        body="MemoryCommand",
        description="view needs memories:read, the others memories:write; each change is "
        "one commit. Texts are those of the Anthropic SDK's BetaLocalFilesystemMemoryTool.",
    ),
    "listMemories": Op(
        "memories",
        "List a folder's memories",
        {200: ("a page of memories, bytewise path order", "MemoryList")},
        (404,),
        params=("pathPrefix", *PAGE, "depth", "includeTotal"),
        description="Filter on frontmatter with metadata.KEY=VALUE query parameters (any "
        "number; a dynamic name, so not listed below): metadata.kind=rule keeps memories "
        "whose frontmatter has kind: rule. Unknown or repeated parameters are a 400.",
    ),
    "getMemory": Op(
        "memories",
        "Read a memory",
        {200: ("the memory; its raw bytes with Accept: text/markdown", "Memory")},
        (404,),
        params=("version", "Accept"),
        description="Needs memories:read. Reading a deletion is a 404 naming the version before.",
        markdown=True,
        etag=True,
    ),
    "putMemory": Op(
        "memories",
        "Write a memory",
        {201: ("created", "MemoryWritten"), 200: ("updated, or unchanged", "MemoryWritten")},
        (404, 409, 412, 413),
        params=("If-Match", "If-None-Match", "Memfs-Message"),
        body="MemoryContent",
        description="Needs memories:write. The body is the whole file as text/markdown "
        '(text/plain, text/x-markdown too) or JSON {"content": "..."}: UTF-8, at most '
        "MEMFS_MEMORY_BYTES. Identical content is a no-op answering the current version. "
        "409 when a file and a folder would share a name.",
        markdown=True,
        etag=True,
    ),
    "deleteMemory": Op(
        "memories",
        "Delete a memory",
        {204: ("deleted: a tombstone version; history stays", None)},
        (404, 409, 412),
        params=("If-Match", "Memfs-Message"),
        description="Needs memories:write.",
    ),
    "listVersions": Op(
        "memories",
        "List the versions of one memory",
        {200: ("a page of versions, oldest first", "VersionList")},
        (404,),
        params=("versionsPath", *PAGE),
        description="Needs memories:read. Deletions and renames are versions too.",
    ),
    "inspectAgent": Op(
        "inspect",
        "Audit an agent's memory at one snapshot",
        {200: ("the sections asked for, read at readTimestamp", "InspectResponse")},
        (404, 413),
        body="InspectRequest",
        description=INSPECT,
    ),
    "inspectScope": Op(
        "inspect",
        "Audit every agent under a scope at one snapshot",
        {200: ("the sections asked for, read at readTimestamp", "InspectResponse")},
        (413,),
        body="InspectRequest",
        description=f"{INSPECT} The scope reads as one workspace (no agent under it: empty).",
    ),
    "queryAgent": Op(
        "search",
        "Search an agent's memories",
        {200: ("matching memories, best first", "SearchResponse")},
        (404, 413),
        body="SearchRequest",
        description=SEARCH,
    ),
    "queryScope": Op(
        "search",
        "Search the memories of every agent under a scope",
        {200: ("matching memories of all its agents, ranked in one list", "SearchResponse")},
        (413,),
        body="SearchRequest",
        description=f"{SEARCH} The scope is one list (no agent under it: empty).",
    ),
    "listTriggers": Op(
        "triggers",
        "List an agent's triggers",
        {200: ("every trigger, by id (nextCursor is null)", "TriggerList")},
        (404,),
        description="Needs triggers:write. Secrets are not shown.",
    ),
    "putTrigger": Op(
        "triggers",
        "Create or replace a trigger",
        {201: ("created, with its secret", "Trigger"), 200: ("replaced", "Trigger")},
        (404, 409, 413),
        body="TriggerRequest",
        description="Needs triggers:write. The secret is generated unless given, shown on "
        "creation (or when given), and kept on replacement unless given.",
    ),
    "getTrigger": Op(
        "triggers", "Read a trigger", {200: ("the trigger, no secret", "Trigger")}, (404,)
    ),
    "deleteTrigger": Op(
        "triggers", "Delete a trigger", {204: ("deleted", None)}, (404, 409), description=TW
    ),
    "rotateTriggerSecret": Op(
        "triggers",
        "Rotate a trigger's secret",
        {200: ("the trigger with its new secret", "Trigger")},
        (404, 409),
        description=f"{TW} The old secret keeps verifying for 24 hours.",
    ),
    "deliverWebhook": Op(
        "triggers",
        "Deliver a webhook (for senders)",
        {202: ("accepted: the run it started", "Run"), 200: ("a known webhook-id: its run", "Run")},
        (401, 404, 413),
        params=("webhook-id", "webhook-timestamp", "webhook-signature"),
        body="*/*",
        description="No credential (Authorization is ignored) and no Memfs-Protocol: the "
        "Standard Webhooks signature is the credential. The body, any media type, is read as "
        "bytes up to MEMFS_WEBHOOK_BODY_BYTES (413 past it), then verified (401 naming the "
        "failed check). One run per webhook-id, whenever and however often it is retried.",
    ),
    "listRuns": Op(
        "runs",
        "List an agent's runs",
        {200: ("a page of runs, oldest first", "RunList")},
        (404,),
        params=("runsTriggerId", "status", *PAGE),
        description="Needs runs:read.",
    ),
    "getRun": Op(
        "runs", "Read a run", {200: ("the run", "Run")}, (404,), description="Needs runs:read."
    ),
    "retryRun": Op(
        "runs",
        "Retry a failed run",
        {202: ("queued again for one more attempt", "Run")},
        (404, 409),
        description=f"{TW} Only a failed run can be retried (else 409).",
    ),
}

INFO_DESCRIPTION = """\
memfs: versioned Markdown memories for AI agents; docs/api.md has worked examples.

- Every /v1 route needs `Memfs-Protocol: 1` and `Authorization: Bearer <key>`;
  `Memfs-Subject` with `Memfs-Scopes` narrows the key for one request.
- A request with an `Origin` header is refused (403): keys never come from browsers.
  `/healthz`, `/readyz` and `/metrics` are outside /v1: no protocol header, no key, any
  Origin.
- Every response carries `Memfs-Request-Id`; every error is the `Error` envelope.
- Another method on a known path is a 405 with `Allow`; HEAD works wherever GET does.
- Lists are `{"<items>": [...], "nextCursor": ...}`; cursors are opaque, signed and bound
  to the agent and query (an altered or foreign one is a 400 on field `cursor`).
- MCP (Model Context Protocol) is served at `/mcp/agents/{agentId}` (Streamable HTTP,
  stateless, JSON-RPC bodies the MCP SDKs speak, so not described here): the same keys
  and scopes as /v1, no `Memfs-Protocol` header; docs/mcp.md lists its tools.
"""

OPENAPI_JSON: Json = {
    "operationId": "getOpenApi",
    "tags": ["meta"],
    "summary": "This document",
    "security": [],
    "responses": {
        "200": response("the OpenAPI document", json_content({"type": "object"})),
        "403": ref("responses", "Forbidden"),
        "500": ref("responses", "InternalError"),
    },
}


MONITOR = (
    "For monitors: no Memfs-Protocol, no key, and answered whatever the Origin header "
    "(no CORS headers are sent). Nothing in the answer names an agent, a path or a key."
)


def _monitor(name: str, summary: str, ok: str, content: Json, *errors: int) -> Json:
    responses: Json = {"200": response(ok, content)}
    for status in (*errors, 500):
        responses[str(status)] = ref("responses", ERRORS[status][0])
    return {
        "operationId": name,
        "tags": ["meta"],
        "summary": summary,
        "description": MONITOR,
        "parameters": [],
        "security": [],
        "responses": responses,
    }


# Routes outside /v1, described whole (they share none of the /v1 conventions).
MONITORS: dict[str, Json] = {
    "getHealth": _monitor(
        "getHealth",
        "Liveness: the process serves",
        'always {"status": "ok"} while the process answers',
        json_content(schema_ref("Health")),
    ),
    "getReadiness": _monitor(
        "getReadiness",
        "Readiness: the index is open and caught up",
        '{"status": "ready"}; a 503 (retryable) while the index is rebuilt or catches up',
        json_content(schema_ref("Health")),
        503,
    ),
    "getMetrics": _monitor(
        "getMetrics",
        "Prometheus metrics",
        "the Prometheus text exposition format, summed over every worker",
        {"text/plain": {"schema": STRING}},
    ),
}


def _path_params(route: Route) -> list[Json]:
    out = []
    for part in route.pattern.strip("/").split("/"):
        if part.startswith("{"):
            name = part[1:].partition("}")[0].rstrip("*")
            generic = {"name": name, "in": "path", "required": True, "schema": STRING}
            out.append(ref("parameters", name) if name in PARAMETERS else generic)
    return out


def _operation(route: Route) -> Json:
    if route.name in MONITORS:
        return MONITORS[route.name]
    params = _path_params(route)
    if route.protocol:
        params += [ref("parameters", h) for h in ("Memfs-Protocol", "Memfs-Subject")]
        params.append(ref("parameters", "Memfs-Scopes"))
    out: Json = {
        "operationId": route.name,
        "parameters": params,
        "security": [{"bearer": []}] if route.protocol else [],
    }
    op = OPERATIONS.get(route.name)
    if op is None:
        out.update(summary=route.name, responses={"default": ref("responses", "BadRequest")})
        out["x-memfs-undocumented"] = True
        return out
    out.update(tags=[op.tag], summary=op.summary, description=op.description)
    out["parameters"] += [ref("parameters", p) for p in op.params]
    if op.body == "*/*":
        out["requestBody"] = {"required": True, "content": {"*/*": {"schema": {}}}}
    elif op.body is not None:
        body = json_content(schema_ref(op.body))
        if op.markdown:
            body = {"text/markdown": {"schema": STRING}, **body}
        out["requestBody"] = {"required": True, "content": body}
    responses: Json = {}
    for status, (text, schema) in sorted(op.ok.items()):
        content = json_content(schema_ref(schema)) if schema else None
        if content and op.markdown and op.body is None:
            content["text/markdown"] = {"schema": STRING}
        responses[str(status)] = response(text, content, *(["ETag"] if op.etag else []))
    common = (400, 401, 403, 500, 503) if route.protocol else (400, 403, 500, 503)
    for status in sorted({*common, *op.errors}):
        responses[str(status)] = ref("responses", ERRORS[status][0])
    out["responses"] = responses
    return out


def openapi_path(route: Route) -> str:
    """The OpenAPI path template of a route: ``{path*}`` becomes ``{path}``."""
    return "/" + route.pattern.strip("/").replace("*}", "}")


def undocumented(routes: Sequence[Route]) -> list[str]:
    """Names of the routes that ``OPERATIONS`` does not describe."""
    return [r.name for r in routes if r.name not in OPERATIONS and r.name not in MONITORS]


def spec(routes: Sequence[Route]) -> Json:
    """The OpenAPI document of ``routes`` plus ``GET /openapi.json``."""
    paths: dict[str, Json] = {"/openapi.json": {"get": OPENAPI_JSON}}
    for route in routes:
        paths.setdefault(openapi_path(route), {})[route.method.lower()] = _operation(route)
    document = {
        "openapi": "3.1.0",
        "info": {
            "title": "memfs",
            "version": __version__,
            "description": INFO_DESCRIPTION,
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "tags": [
            {"name": "tenant", "description": "application keys (admin)"},
            {"name": "agents", "description": "agents and their memory summary"},
            {"name": "memories", "description": "list, read, write and version memories"},
            {"name": "inspect", "description": "the audit surface (not retrieval)"},
            {"name": "search", "description": "memory:query, full-text retrieval"},
            {"name": "triggers", "description": "webhook triggers and deliveries"},
            {"name": "runs", "description": "what deliveries started"},
            {"name": "meta", "description": "this document, health, readiness and metrics"},
        ],
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "parameters": PARAMETERS,
            "headers": HEADERS,
            "responses": {name: error_response(s) for s, (name, _c, _w) in ERRORS.items()},
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The admin key (MEMFS_ADMIN_KEY or data/admin.key) or an "
                    "application key made with PUT /v1/tenant/keys/{keyId}.",
                }
            },
        },
    }
    return copy.deepcopy(document)  # callers may mutate it; the tables stay pristine
