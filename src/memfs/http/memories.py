"""Routes for memories: list by folder, read, write, delete, versions."""

from __future__ import annotations

import json

from starlette.responses import JSONResponse, Response

from memfs import wire
from memfs.core.auth import header_text
from memfs.core.browse import versions_page
from memfs.core.tokens import query_digest
from memfs.domain import paths
from memfs.errors import InvalidRequest
from memfs.http.context import Ctx, only_fields

RAW_TYPES = ("text/markdown", "text/plain", "text/x-markdown")


def _agent(ctx: Ctx, action: str) -> str:
    agent_id = paths.agent_id(ctx.params["agentId"])
    ctx.who.require(action, agent_id)
    return agent_id


def _memory_path(ctx: Ctx) -> str:
    return paths.memory_path(f"{paths.ROOT}/{ctx.params['path']}")


async def list_memories(ctx: Ctx) -> Response:
    ctx.allow_query(
        "pathPrefix", "limit", "cursor", "depth", "includeTotal", prefixes=("metadata.",)
    )
    agent_id = _agent(ctx, "memories:read")
    folder = paths.folder_prefix(ctx.query("pathPrefix", "") or "")
    limit = ctx.limit()
    depth = ctx.query("depth")
    if depth not in (None, "", "1"):
        raise InvalidRequest("depth must be 1 (or absent for a recursive listing)", field="depth")
    depth_one = depth == "1"
    filters = sorted(
        (k.removeprefix("metadata."), v)
        for k, v in ctx.request.query_params.multi_items()
        if k.startswith("metadata.")
    )
    if any(not key for key, _ in filters):
        raise InvalidRequest("metadata filters look like metadata.KEY=VALUE", field="metadata")
    include_total = ctx.boolean("includeTotal")
    digest = query_digest(folder, depth_one, filters)
    after = None
    cursor = ctx.query("cursor")
    if cursor:
        after = ctx.services.signer.decode(cursor, "memories", agent_id, digest, field="cursor")
        if not isinstance(after, str):
            raise InvalidRequest("cursor is not valid here", field="cursor")
    page = ctx.store.list_page_json(
        agent_id, folder, after=after, limit=limit, depth_one=depth_one, filters=filters
    )
    total = None
    if include_total:
        total = ctx.store.count_memories(agent_id, folder, depth_one=depth_one, filters=filters)
    next_cursor = None
    if page.more:
        next_cursor = ctx.services.signer.encode("memories", agent_id, digest, page.last)
    return Response(wire.listing_page_body(page, total, next_cursor), media_type="application/json")


async def get_memory(ctx: Ctx) -> Response:
    ctx.allow_query("version")
    agent_id = _agent(ctx, "memories:read")
    path = _memory_path(ctx)
    raw_version = ctx.query("version")
    version = None
    if raw_version is not None:
        if not raw_version.isascii() or not raw_version.isdigit() or int(raw_version) < 1:
            raise InvalidRequest("version must be an integer >= 1", field="version")
        version = int(raw_version)
    memory = ctx.store.read(agent_id, path, version)
    headers = {"ETag": f'"{memory.sha256}"'}
    if "text/markdown" in ctx.headers.get("accept", ""):
        return Response(memory.content, media_type="text/markdown; charset=utf-8", headers=headers)
    return JSONResponse(wire.memory_json(memory), headers=headers)


def _etag(ctx: Ctx, header: str) -> str | None:
    value = ctx.headers.get(header)
    if value is None:
        return None
    value = value.strip()
    if header == "if-none-match":
        if value != "*":
            raise InvalidRequest("If-None-Match supports only *", field="If-None-Match")
        return value
    if value.startswith("W/"):
        raise InvalidRequest("If-Match takes a strong ETag", field="If-Match")
    sha = value.strip('"')
    if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        raise InvalidRequest(
            'If-Match takes "<contentSha256>" (64 lowercase hex)', field="If-Match"
        )
    return sha


def _message(ctx: Ctx) -> str:
    message = header_text(ctx.headers.get("memfs-message", ""), "Memfs-Message")
    if len(message) > 4096:
        raise InvalidRequest("Memfs-Message is longer than 4096 characters", field="Memfs-Message")
    return message


async def put_memory(ctx: Ctx) -> Response:
    ctx.allow_query()
    agent_id = _agent(ctx, "memories:write")
    path = _memory_path(ctx)
    limit = ctx.services.settings.memory_bytes
    media = ctx.media_type()
    if media in RAW_TYPES:
        data = await ctx.body(limit)
    elif media == "application/json":
        doc = await ctx.json(limit * 6 + 1024)  # JSON escaping may inflate text
        only_fields(doc, "content")
        content = doc.get("content")
        if not isinstance(content, str):
            raise InvalidRequest("content must be a string", field="content")
        try:
            data = content.encode()
        except UnicodeEncodeError:
            raise InvalidRequest("content is not valid UTF-8", field="content") from None
    else:
        raise InvalidRequest(
            'send text/markdown (the whole file) or application/json {"content": ...}',
            field="Content-Type",
        )
    if_match = _etag(ctx, "if-match")
    create_only = _etag(ctx, "if-none-match") is not None
    message = _message(ctx)
    result = await ctx.commit(
        lambda: ctx.store.write(
            agent_id,
            path,
            data,
            if_match=if_match,
            create_only=create_only,
            actor=ctx.who.actor,
            message=message,
        )
    )
    body = wire.memory_write_json(result.memory, result.revision)
    return JSONResponse(
        body,
        status_code=201 if result.created else 200,
        headers={"ETag": f'"{result.memory.sha256}"'},
    )


async def delete_memory(ctx: Ctx) -> Response:
    ctx.allow_query()
    agent_id = _agent(ctx, "memories:write")
    path = _memory_path(ctx)
    if_match = _etag(ctx, "if-match")
    message = _message(ctx)
    await ctx.commit(
        lambda: ctx.store.delete(
            agent_id, path, if_match=if_match, actor=ctx.who.actor, message=message
        )
    )
    return Response(status_code=204)


async def list_versions(ctx: Ctx) -> Response:
    ctx.allow_query("path", "limit", "cursor")
    agent_id = _agent(ctx, "memories:read")
    raw = ctx.query("path")
    if not raw:
        raise InvalidRequest("path is required, e.g. ?path=/memories/notes.md", field="path")
    page = versions_page(
        ctx.store, ctx.services.signer, agent_id, raw, ctx.query("cursor"), ctx.limit()
    )
    return JSONResponse(
        {"versions": [wire.version_json(r) for r in page.items], "nextCursor": page.next_cursor}
    )


def dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)
