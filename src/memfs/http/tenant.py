"""Routes for application keys (admin only)."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from memfs.errors import InvalidRequest
from memfs.http.context import Ctx, only_fields


async def put_key(ctx: Ctx) -> Response:
    ctx.allow_query()
    ctx.who.require_admin()
    doc = await ctx.json()
    only_fields(doc, "scopes", "description")
    key, secret = await run_in_threadpool(
        ctx.services.keys.create, ctx.params["keyId"], doc.get("scopes"), doc.get("description", "")
    )
    return JSONResponse({**key.to_json(), "secret": secret}, status_code=201)


async def list_keys(ctx: Ctx) -> Response:
    ctx.allow_query("limit", "cursor")
    ctx.who.require_admin()
    limit = ctx.limit()
    after = ""
    cursor = ctx.query("cursor")
    if cursor:
        after = ctx.services.signer.decode(cursor, "keys", "", "", field="cursor")
        if not isinstance(after, str):
            raise InvalidRequest("cursor is not valid here", field="cursor")
    keys = sorted((k for k in ctx.services.keys.list() if k.key_id > after), key=lambda k: k.key_id)
    page = keys[:limit]
    next_cursor = (
        ctx.services.signer.encode("keys", "", "", page[-1].key_id) if len(keys) > limit else None
    )
    return JSONResponse({"keys": [k.to_json() for k in page], "nextCursor": next_cursor})


async def get_key(ctx: Ctx) -> Response:
    ctx.allow_query()
    ctx.who.require_admin()
    return JSONResponse(ctx.services.keys.get(ctx.params["keyId"]).to_json())


async def delete_key(ctx: Ctx) -> Response:
    ctx.allow_query()
    ctx.who.require_admin()
    await run_in_threadpool(ctx.services.keys.revoke, ctx.params["keyId"])
    return Response(status_code=204)
