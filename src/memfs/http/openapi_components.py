"""The vocabulary of the OpenAPI document: schemas, parameters, headers, errors.

``memfs.http.openapi`` says which operation uses which; this module only says what
each shape is. Response schemas name every field and mark the always-present ones
required, but stay open (no ``additionalProperties: false``) so that clients generated
from the document keep working when a field is added; the tests close them to catch
drift. Request bodies are closed where the server refuses unknown fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memfs.core.keys import ACTIONS

Json = dict[str, Any]


def ref(kind: str, name: str) -> Json:
    return {"$ref": f"#/components/{kind}/{name}"}


def schema_ref(name: str) -> Json:
    return ref("schemas", name)


def _object(props: Json, optional: Sequence[str] = (), closed: bool = False) -> Json:
    """An object schema whose properties are all required except ``optional``."""
    out: Json = {
        "type": "object",
        "required": [p for p in props if p not in optional],
        "properties": props,
    }
    if closed:
        out["additionalProperties"] = False
    return out


def _obj(optional: Sequence[str] = (), closed: bool = False, **props: Json) -> Json:
    return _object(props, optional, closed)


def _array(items: Json) -> Json:
    return {"type": "array", "items": items}


def _page(items: str, item_schema: str, **more: Json) -> Json:
    """The one list shape: ``{"<items>": [...], "nextCursor": ...}``."""
    props = {items: _array(schema_ref(item_schema)), **more, "nextCursor": schema_ref("Cursor")}
    return _object(props, ("total",))


def _desc(schema: Json, text: str) -> Json:
    return {**schema, "description": text}


def _fields(spec: str, **more: Json | str) -> Json:
    """An object of required fields from ``"name:type …"`` (a type of ``TYPES``, ``?``
    allowing null); in ``more`` a string describes a field, a schema adds one."""
    props: Json = {}
    for item in spec.split():
        name, _, kind = item.partition(":")
        props[name] = TYPES[kind]
    for name, value in more.items():
        props[name] = _desc(props[name], value) if isinstance(value, str) else value
    return _object(props)


def _section(**props: Json) -> Json:
    """An inspect request section: every field optional, unknown ones refused, null = {}."""
    return {**_object(props, tuple(props), closed=True), "type": ["object", "null"]}


TOKENS = ("Chunk", "Node", "Edge", "Log")
STRING: Json = {"type": "string"}
NULLABLE_STRING: Json = {"type": ["string", "null"]}
BOOLEAN: Json = {"type": "boolean"}
INT0: Json = {"type": "integer", "minimum": 0}
INT1: Json = {"type": "integer", "minimum": 1}
TS: Json = {"type": "string", "format": "date-time", "examples": ["2026-01-02T03:04:05.123456Z"]}
TS_OR_NULL: Json = {"type": ["string", "null"], "format": "date-time"}
UUID: Json = {"type": "string", "format": "uuid"}
SHA256: Json = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
# What paths.memory_path enforces that a pattern can say: the prefix, no control
# character or backslash, at most 1024 UTF-8 bytes (maxLength counts characters, so
# it is an upper bound); no empty, '.', '..' or .git segment is said in words.
_NO_CONTROL = "[^\\x00-\\x1f\\x7f-\\x9f\\\\]"
MEMORY_PATH: Json = {
    "type": "string",
    "maxLength": 1024,
    "pattern": f"^/memories/{_NO_CONTROL}+$",
}
PATH_PARAM: Json = {"type": "string", "minLength": 1, "maxLength": 1014, "pattern": f"^{_NO_CONTROL}+$"}
AGENT_ID_PATTERN = "^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$"
SIMPLE_ID_PATTERN = "^[A-Za-z0-9._-]{1,128}$"
ETAG_PATTERN = '^"[0-9a-f]{64}"$'
RUN_ID_PATTERN = "^run_[A-Za-z0-9]{1,60}$"
INBOX = "/memories/inbox/{triggerId}/{webhookId}.md"
_SCOPE_TOKEN = f"({'|'.join(ACTIONS)}|agents:\\*|agents:{AGENT_ID_PATTERN[1:-1]})"
SCOPES_PATTERN = f"^{_SCOPE_TOKEN}( {_SCOPE_TOKEN})*$"
AGENT_ID: Json = {"type": "string", "minLength": 1, "maxLength": 256, "pattern": AGENT_ID_PATTERN}
NON_EMPTY: Json = {"type": "string", "minLength": 1}
RUN_STATUS: Json = {
    "type": "string",
    "enum": ["queued", "running", "succeeded", "failed", "delayed"],
}
TYPES: dict[str, Json] = {
    "str": STRING,
    "str?": NULLABLE_STRING,
    "bool": BOOLEAN,
    "int0": INT0,
    "int1": INT1,
    "ts": TS,
    "ts?": TS_OR_NULL,
    "int?": {"type": ["integer", "null"]},
    "num": {"type": "number"},
    "uuid": UUID,
    "sha": SHA256,
    "sha?": {**SHA256, "type": ["string", "null"]},
    "path": MEMORY_PATH,
    "agent": {"type": "string", "pattern": AGENT_ID_PATTERN},
    "simpleId": {"type": "string", "pattern": SIMPLE_ID_PATTERN},
    "etag": {"type": "string", "pattern": ETAG_PATTERN},
}

# status: (component name, code, when) — the code table of design §3
ERRORS: dict[int, tuple[str, str, str]] = {
    400: ("BadRequest", "invalid_request", "a bad parameter, path, header, body, cursor or YAML"),
    401: ("Unauthorized", "unauthorized", "no, unknown or revoked key"),
    403: ("Forbidden", "forbidden", "outside the key's (or narrowed) scopes; Origin present"),
    404: ("NotFound", "not_found", "no such agent, memory, version or key"),
    405: ("MethodNotAllowed", "method_not_allowed", "the path exists, the method does not"),
    409: ("Conflict", "conflict", "the name is taken (existing key or agent, file vs folder)"),
    412: ("PreconditionFailed", "precondition_failed", "If-Match / If-None-Match not met"),
    413: ("PayloadTooLarge", "payload_too_large", "the body or memory is over its limit"),
    500: ("InternalError", "internal_error", "a server fault, never bad input"),
    503: (
        "Unavailable",
        "unavailable",
        "retryable: shutting down, storage full or failing, the index being rebuilt;"
        " not retryable: the agent is damaged (an operator runs memfs fsck)",
    ),
}

# Claude memory-tool commands: fields, "?" marking an optional one.
COMMANDS: dict[str, tuple[str, ...]] = {
    "view": ("path", "view_range?"),
    "create": ("path", "file_text"),
    "str_replace": ("path", "old_str", "new_str"),
    "insert": ("path", "insert_line", "insert_text"),
    "delete": ("path",),
    "rename": ("old_path", "new_path"),
}
COMMAND_FIELDS: dict[str, Json] = {
    "view_range": {**_array({"type": "integer"}), "minItems": 2, "maxItems": 2},
    "insert_line": INT0,
}


def _command(name: str, fields: tuple[str, ...]) -> Json:
    props = {f.rstrip("?"): COMMAND_FIELDS.get(f.rstrip("?"), STRING) for f in fields}
    optional = [f.rstrip("?") for f in fields if f.endswith("?")]
    return _object({"command": {"const": name}, **props}, optional, closed=True)


SCHEMAS: dict[str, Json] = {
    "Error": _desc(
        _obj(
            code={"type": "string", "enum": sorted({code for _n, code, _w in ERRORS.values()})},
            message=_desc(STRING, "what went wrong and what to do next"),
            details=_obj(
                field=_desc(NULLABLE_STRING, "the parameter, header or body field at fault"),
                issues=_array(STRING),
                requestId=_desc(STRING, "the response's Memfs-Request-Id"),
                retryable=BOOLEAN,
            ),
        ),
        "The one error envelope of every non-2xx response.",
    ),
    "Cursor": _desc(NULLABLE_STRING, "opaque and signed; null exactly when nothing follows"),
    "ScopeToken": {
        "type": "string",
        "description": "an action, agents:<scopeId> (an agent-id prefix on a segment "
        "boundary) or agents:* (every agent)",
        "pattern": f"^({'|'.join(ACTIONS)}|agents:\\*|agents:{AGENT_ID_PATTERN[1:-1]})$",
    },
    "Key": _fields(
        "keyId:simpleId description:str createdAt:ts", scopes=_array(schema_ref("ScopeToken"))
    ),
    "NewKey": {"allOf": [schema_ref("Key"), _fields("secret:str", secret="shown only this once")]},
    "KeyRequest": _obj(
        ("description",),
        closed=True,
        scopes=_array(schema_ref("ScopeToken")),
        description={"type": "string", "maxLength": 1024},
    ),
    "KeyList": _page("keys", "Key"),
    "Agent": _fields(
        "agentId:agent name:str memoryStoreId:uuid createdAt:ts revision:int0",
        revision="number of the agent's last commit (0: none yet)",
    ),
    "AgentRequest": _obj(
        ("name",),
        closed=True,
        name=_desc(
            {"type": "string", "minLength": 1, "maxLength": 256},
            "display name, printable characters; default: the agent id",
        ),
    ),
    "AgentList": _page("agents", "Agent"),
    "Health": _obj(
        ("status",),
        closed=True,
        status={"type": "string", "enum": ["ok", "ready"]},
    ),
    "MemorySummary": _fields(
        "agentId:str agentName:str memoryStoreId:uuid memoryCount:int0 totalBytes:int0 "
        "revision:int0 pendingRunCount:int0 failedRunCount:int0 lastUpdatedAt:ts? "
        "lastCheckedAt:ts? nextRetryAt:ts?",
        state={"type": "string", "enum": ["waiting", "idle", "updating", "delayed"]},
        lastCheckedAt="when the last run finished",
    ),
    "MemoryListing": _fields(
        "path:path bytes:int0 contentSha256:sha description:str? version:int1 updatedAt:ts",
        description="the frontmatter's description",
    ),
    "MemoryList": _page(
        "memories",
        "MemoryListing",
        folders=_desc(_array(MEMORY_PATH), "subfolders, with depth=1 only"),
        total=_desc(INT0, "all matches, only with includeTotal=true"),
    ),
    "Memory": {
        "allOf": [
            schema_ref("MemoryListing"),
            _fields(
                "content:str createdAt:ts",
                content="the whole file, frontmatter included",
                createdAt="when this version was written",
                metadata={
                    "type": "object",
                    "description": "scalar frontmatter keys other than description",
                    "additionalProperties": {"type": ["string", "number", "boolean", "null"]},
                },
            ),
        ]
    },
    "MemoryWritten": {
        "allOf": [
            schema_ref("MemoryListing"),
            _fields("revision:int1", revision="the agent's revision after the write"),
        ]
    },
    "MemoryContent": _obj(closed=True, content=STRING),
    "Version": _fields(
        "version:int1 contentSha256:sha? bytes:int0 revision:int1 validFrom:ts validTo:ts? "
        "actor:str message:str",
        operation={"type": "string", "enum": ["created", "modified", "deleted", "renamed"]},
        contentSha256="null for a deletion",
        validTo="null while current",
        actor="admin, key:<keyId>, subject:<name> or run:<runId>",
    ),
    "VersionList": _page("versions", "Version"),
    "MemoryCommand": {
        "description": "One Claude memory-tool command (memory_20250818), same field names. "
        "A malformed or refused command is answered 200 with ok=false, as the SDK's tool; "
        "a field the command does not have is a 400.",
        "oneOf": [_command(name, fields) for name, fields in COMMANDS.items()],
    },
    "InspectRequest": _desc(
        _obj(
            ("vectors", "graph", "log", "asOf"),
            closed=True,
            vectors=_section(limit=INT1, pageToken=STRING),
            graph=_section(
                nodeLimit=INT1, edgeLimit=INT1, nodePageToken=STRING, edgePageToken=STRING
            ),
            log=_section(limit=INT1, pageToken=STRING),
            asOf=_desc(TS, "read as of this instant; send the first readTimestamp back"),
        ),
        "Only the sections present are read. Page sizes default/max: vectors 50/200, graph "
        "nodes and edges 100/500, log 50/200 (larger values are coerced).",
    ),
    "SearchRequest": _desc(
        _obj(
            ("pathPrefix", "metadata", "limit", "pageToken"),
            closed=True,
            query=_desc(
                {"type": "string", "minLength": 1, "maxLength": 1024},
                'words (all must match), "exact phrases", prefix*, -excluded; at most 1 KiB',
            ),
            pathPrefix=_desc(STRING, "only memories below this folder"),
            metadata=_desc(
                {
                    "type": "object",
                    "maxProperties": 32,
                    "additionalProperties": {"type": ["string", "number", "boolean", "null"]},
                },
                "frontmatter equalities, all required (compared as metadata.KEY=VALUE)",
            ),
            limit=_desc(INT1, "default 10; larger than 50 is coerced to 50"),
            pageToken=_desc(STRING, "the nextPageToken of the previous page"),
        ),
        "Case- and accent-insensitive, English stemming. Ranked by BM25: the description "
        "and the path weigh more than the body.",
    ),
    "SearchResponse": _obj(
        results=_array(schema_ref("SearchResult")),
        nextPageToken=_desc(STRING, '"" after the last page'),
    ),
    "SearchResult": _fields(
        "agentId:agent path:path version:int1 contentSha256:sha description:str? "
        "updatedAt:ts score:num snippet:str",
        score="higher is better (column-weighted BM25)",
        snippet="the best matching passage; matched terms between « and », cuts marked …",
    ),
    "InspectResponse": _object(
        {
            "vectors": _obj(chunks=_array(schema_ref("Chunk"))),
            "graph": _obj(nodes=_array(schema_ref("Node")), edges=_array(schema_ref("Edge"))),
            "log": _obj(steps=_array(schema_ref("LogStep"))),
            **{f"next{k}Token": _desc(STRING, '"" once exhausted') for k in TOKENS},
            "readTimestamp": _desc(TS, "the snapshot read; send it as asOf on the next pages"),
        },
        ("vectors", "graph", "log"),
    ),
    "Chunk": _fields(
        "agentId:str path:path version:int1 chunkIndex:int0 byteStart:int0 byteEnd:int0 "
        "heading:str? content:str contentSha256:sha validFrom:ts validTo:ts? superseded:bool "
        "truncated:bool",
        byteStart="UTF-8 byte range [byteStart, byteEnd) of the version's content",
    ),
    "Node": _fields(
        "id:str agentId:str path:path version:int1 contentSha256:sha bytes:int0 "
        "description:str? validFrom:ts validTo:ts? superseded:bool",
        id="<agentId>:<path>@<version>",
    ),
    "Edge": _fields(
        "agentId:str source:str sourcePath:path sourceVersion:int1 targetPath:path target:str? "
        "targetExists:bool",
        source="the node holding the link",
        target="the target's node at the snapshot, null if it does not exist then",
    ),
    "LogStep": {
        "oneOf": [
            _fields(
                "agentId:agent revision:int1 timestamp:ts actor:str message:str",
                type={"const": "commit"},
                changes=_array({"type": "object"}),
            ),
            _fields(
                "agentId:agent runId:str seq:int1 attempt:int0 timestamp:ts",
                type={"const": "run"},
                step={
                    "type": "string",
                    "examples": ["created", "claimed", "output", "succeeded", "failed"],
                },
                detail={"type": "object"},
            ),
        ]
    },
    "Action": {
        "description": "What a delivery runs; default: the memory action with its default path.",
        "oneOf": [
            _obj(
                ("path",),
                closed=True,
                type={"const": "memory"},
                path=_desc(STRING, "may use {triggerId} and {webhookId}; default " + INBOX),
            ),
            _obj(
                ("timeoutSeconds",),
                closed=True,
                type={"const": "command"},
                argv={**_array({"type": "string", "minLength": 1}), "minItems": 1},
                timeoutSeconds={"type": "integer", "minimum": 1, "maximum": 86400, "default": 60},
            ),
        ],
    },
    "TriggerRequest": _obj(
        ("prompt", "action", "maxAttempts", "secret"),
        closed=True,
        prompt={"type": "string", "maxLength": 65536, "default": ""},
        action=schema_ref("Action"),
        maxAttempts={"type": "integer", "minimum": 1, "maximum": 100, "default": 5},
        secret=_desc({"type": "string", "pattern": "^whsec_"}, "default: generated"),
    ),
    "Trigger": _obj(
        ("secret",),
        agentId=TYPES["agent"],
        triggerId=TYPES["simpleId"],
        prompt=STRING,
        action=schema_ref("Action"),
        maxAttempts=INT1,
        createdAt=TS,
        updatedAt=TS,
        secret=_desc(STRING, "whsec_...; only when created, given or rotated"),
    ),
    "TriggerList": _page("triggers", "Trigger"),
    "Run": _fields(
        "agentId:agent triggerId:simpleId webhookId:str attempt:int0 maxAttempts:int1 "
        "nextRetryAt:ts? createdAt:ts startedAt:ts? finishedAt:ts? exitCode:int? output:str? "
        "error:str?",
        id={"type": "string", "pattern": RUN_ID_PATTERN},
        status=RUN_STATUS,
        output="the program's output, capped",
    ),
    "RunList": _page("runs", "Run"),
    "MemoryCommandResult": _obj(
        ok=_desc(BOOLEAN, "false where the tool result is an error"),
        result=_desc(STRING, "the text the tool result carries"),
    ),
}


# key: (in, schema, description); the name is the key but for NAMES
_PARAMETERS: dict[str, tuple[str, Json, str]] = {
    "agentId": ("path", AGENT_ID, "The agent id as ONE percent-encoded segment (a%2Fb)."),
    "scopeId": ("path", AGENT_ID, "An agent-id prefix, as ONE percent-encoded segment."),
    "keyId": ("path", TYPES["simpleId"], "Key id."),
    "path": (
        "path",
        PATH_PARAM,
        "The memory path after /memories/, each segment percent-encoded; no empty, '.',"
        " '..' or .git segment (any case, trailing dots or spaces, git~1), no trailing"
        " '/', at most 1024 UTF-8 bytes with the /memories/ prefix.",
    ),
    "triggerId": ("path", TYPES["simpleId"], "Trigger id."),
    "runId": ("path", {"type": "string", "pattern": RUN_ID_PATTERN}, "Run id."),
    "runsTriggerId": ("query", TYPES["simpleId"], "Only the runs of this trigger."),
    "status": ("query", RUN_STATUS, "Only runs in this status."),
    "webhook-id": ("header", NON_EMPTY, "The delivery's id: one run per webhook-id."),
    "webhook-timestamp": (
        "header",
        {"type": "string", "pattern": "^[0-9]{1,12}$"},
        "Unix seconds.",
    ),
    "webhook-signature": ("header", NON_EMPTY, "Space-separated v1,<base64 HMAC-SHA256>."),
    "limit": ("query", INT1, "Page size; default and maximum MEMFS_PAGE_ITEMS (200)."),
    "cursor": ("query", STRING, "The previous page's nextCursor, same query."),
    "prefix": ("query", STRING, "Only agent ids starting with this."),
    "pathPrefix": ("query", STRING, "One folder, relative to /memories (or /memories/...)."),
    "depth": ("query", {"type": "integer", "enum": [1]}, "1 lists like ls; default recursive."),
    "includeTotal": ("query", BOOLEAN, "Also count every match (total)."),
    "version": ("query", INT1, "Read this version (past ones included)."),
    "versionsPath": ("query", NON_EMPTY, "The memory path, /memories/... or relative."),
    "Memfs-Protocol": ("header", {"type": "string", "enum": ["1"]}, "The protocol version."),
    "Memfs-Subject": (
        "header",
        {"type": "string", "minLength": 1, "maxLength": 256, "pattern": "^[^\\x00-\\x1f\\x7f]+$"},
        "Acting for this person (1-256 printable characters). Only together with"
        " Memfs-Scopes: one without the other is 400.",
    ),
    "Memfs-Scopes": (
        "header",
        {"type": "string", "pattern": SCOPES_PATTERN},
        "Space-separated scopes, a subset of the key's (else 403). Only together with"
        " Memfs-Subject: one without the other is 400.",
    ),
    "If-Match": ("header", TYPES["etag"], 'Only if the current sha256 is this ("<sha>").'),
    "If-None-Match": ("header", {"type": "string", "enum": ["*"]}, "Create only."),
    "Memfs-Message": ("header", {"type": "string", "maxLength": 4096}, "Commit message."),
    "Accept": ("header", STRING, "text/markdown: the raw file (tools ignore this parameter)."),
}
NAMES = {"versionsPath": "path", "runsTriggerId": "triggerId"}
REQUIRED = {
    "Memfs-Protocol",
    "versionsPath",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
}

PARAMETERS: dict[str, Json] = {
    key: {
        "name": NAMES.get(key, key),
        "in": where,
        "required": where == "path" or key in REQUIRED,
        "description": text,
        "schema": schema,
    }
    for key, (where, schema, text) in _PARAMETERS.items()
}

HEADERS: dict[str, Json] = {
    "Memfs-Request-Id": {
        "description": "Id of this request; quote it when reporting a problem.",
        "required": True,
        "schema": {"type": "string", "pattern": "^req_[0-9a-f]{16}$"},
    },
    "ETag": {
        "description": 'The strong ETag "<contentSha256>", for If-Match.',
        "required": True,
        "schema": TYPES["etag"],
    },
    "Allow": {"description": "The methods of this path.", "schema": STRING},
    "WWW-Authenticate": {"description": 'Bearer realm="memfs"', "schema": STRING},
}


def json_content(schema: Json) -> Json:
    return {"application/json": {"schema": schema}}


def response(description: str, content: Json | None = None, *headers: str) -> Json:
    out: Json = {
        "description": description,
        "headers": {h: ref("headers", h) for h in ("Memfs-Request-Id", *headers)},
    }
    if content is not None:
        out["content"] = content
    return out


def error_response(status: int) -> Json:
    _name, code, when = ERRORS[status]
    extra = {401: ("WWW-Authenticate",), 405: ("Allow",)}.get(status, ())
    envelope = {"allOf": [schema_ref("Error"), {"properties": {"code": {"const": code}}}]}
    return response(f"{code}: {when}", json_content(envelope), *extra)
