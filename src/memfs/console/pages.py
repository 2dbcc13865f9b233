"""The console's pages: each checks the session's scopes, calls core reads, renders.

URLs mirror the API's: agent ids are one percent-encoded segment, memory paths follow
``…/memories/`` segment by segment. A page the key's scopes do not cover is a 403 and
shows nothing of what it would have shown; lists hold only what the key covers.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from memfs import wire
from memfs.console import inspect_html
from memfs.console.render import (
    RENDER_LIMIT,
    body_of,
    listing_rows,
    looks_binary,
    segment,
)
from memfs.console.view import Page, View
from memfs.core import browse
from memfs.core import inspect as inspecting
from memfs.core.summary import summary
from memfs.core.tokens import query_digest
from memfs.domain import paths
from memfs.domain.records import FolderEntry, MemoryRow
from memfs.errors import Forbidden, InvalidRequest, NotFound

RAW_PREVIEW = 512 * 1024  # characters of raw text a memory page shows at most
DIFF_LIMIT = 512 * 1024


def _agent(view: View, action: str) -> str:
    agent_id = paths.agent_id(view.params["agentId"])
    view.who.require(action, agent_id)
    return agent_id


def _int(view: View, name: str) -> int | None:
    raw = view.arg(name)
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) < 2**63:
        raise InvalidRequest(f"{name} must be an integer >= 1", field=name)
    return int(raw)


async def agents(view: View) -> Response:
    prefix = view.arg("prefix") or ""
    page = browse.agents_page(
        view.store, view.signer, view.who, prefix, view.arg("cursor"), view.limit()
    )
    return view.page("agents.html", agents=page.items, next_cursor=page.next_cursor, prefix=prefix)


async def agent(view: View) -> Response:
    agent_id = _agent(view, "memories:read")
    folder = paths.folder_prefix(view.arg("folder") or "", field="folder")
    info = summary(view.store, agent_id)
    digest = query_digest(folder, True, [])
    after = None
    cursor = view.arg("cursor")
    if cursor:
        after = view.signer.decode(cursor, "memories", agent_id, digest, field="cursor")
        if not isinstance(after, str):
            raise InvalidRequest("cursor is not valid here", field="cursor")
    items, more = view.store.list_memories(
        agent_id, folder, after=after, limit=view.limit(), depth_one=True
    )
    next_cursor = None
    if more and items:
        last = items[-1]
        position = last.path + "/" if isinstance(last, FolderEntry) else last.path
        next_cursor = view.signer.encode("memories", agent_id, digest, position)
    folders = [i.path for i in items if isinstance(i, FolderEntry)]
    memories = [i for i in items if isinstance(i, MemoryRow)]
    return view.page(
        "agent.html",
        agent_id=agent_id,
        info=info,
        folder=folder,
        parents=_parents(folder),
        rows=listing_rows(f"/console/agents/{segment(agent_id)}", folders, memories),
        next_cursor=next_cursor,
    )


def _parents(folder: str) -> list[tuple[str, str]]:
    """Breadcrumbs of a folder: (name, folder) from /memories down."""
    crumbs = [("memories", paths.ROOT)]
    inside = folder.removeprefix(paths.ROOT).strip("/")
    parts = inside.split("/") if inside else []
    for i, name in enumerate(parts):
        crumbs.append((name, f"{paths.ROOT}/" + "/".join(parts[: i + 1])))
    return crumbs


async def memory(view: View) -> Response:
    agent_id = _agent(view, "memories:read")
    path = paths.memory_path(f"{paths.ROOT}/{view.params['path']}")
    version = _int(view, "version")
    old, new = _int(view, "from"), _int(view, "to")
    shown = await run_in_threadpool(view.store.read, agent_id, path, version)
    versions = browse.versions_page(
        view.store, view.signer, agent_id, path, view.arg("vcursor"), view.limit()
    )
    diff = None
    if old is not None or new is not None:
        if old is None or new is None:
            raise InvalidRequest("a diff needs both from and to", field="from")
        a = view.store.read(agent_id, path, old).content
        b = view.store.read(agent_id, path, new).content
        diff = wire.patch(path, a, b, f"v{old}", f"v{new}")[:DIFF_LIMIT]
    binary = looks_binary(shown.content)
    text = shown.content.decode("utf-8", errors="replace")
    rendered = None
    if not binary and len(shown.content) <= RENDER_LIMIT:
        rendered = view.markdown.render(body_of(text))
    return view.page(
        "memory.html",
        agent_id=agent_id,
        path=path,
        memory=shown,
        pinned_version=version,
        binary=binary,
        raw=text[:RAW_PREVIEW],
        raw_cut=len(text) > RAW_PREVIEW,
        rendered=rendered,
        versions=versions.items,
        next_versions=versions.next_cursor,
        diff=diff,
        diff_from=old,
        diff_to=new,
    )


# A history page lists commits until it has listed this many changes (always at least
# one commit), and at most COMMIT_CHANGES of one commit (the rest counted, with the
# command that prints them): a bulk import's commits would otherwise make one page of
# hundreds of thousands of lines.
HISTORY_CHANGES = 500
COMMIT_CHANGES = 2000


async def history(view: View) -> Response:
    agent_id = _agent(view, "memories:read")
    view.store.get_agent(agent_id)
    before = _int(view, "before")
    limit = min(view.limit(), 50)
    commits, older = browse.history_page(
        view.store, agent_id, before=before, limit=limit, changes=HISTORY_CHANGES
    )
    shown = [(c, c.changes[:COMMIT_CHANGES], max(0, len(c.changes) - COMMIT_CHANGES)) for c in commits]
    return view.page("history.html", agent_id=agent_id, commits=shown, older=older)


async def runs(view: View) -> Response:
    agent_id = _agent(view, "runs:read")
    view.store.get_agent(agent_id)
    trigger_id, status = view.arg("triggerId"), view.arg("status")
    page = browse.runs_page(
        view.store,
        view.signer,
        agent_id,
        trigger_id=trigger_id,
        status=status,
        cursor=view.arg("cursor"),
        limit=view.limit(),
    )
    from memfs.core.runs import STATUSES

    return view.page(
        "runs.html",
        agent_id=agent_id,
        runs=page.items,
        next_cursor=page.next_cursor,
        trigger_id=trigger_id or "",
        status=status or "",
        statuses=STATUSES,
    )


async def scope(view: View) -> Response:
    scope_id = paths.scope_id(view.params["scopeId"])
    view.who.require("memories:read")
    if not view.who.covers_scope(scope_id):
        raise Forbidden(f"this key's agents: scopes do not cover scope {scope_id!r}")
    page = browse.agents_page(
        view.store, view.signer, view.who, scope_id + "/", view.arg("cursor"), view.limit()
    )
    itself = None
    if view.arg("cursor") is None:
        try:
            itself = view.store.get_agent(scope_id)
        except NotFound:
            itself = None
    return view.page(
        "scope.html",
        scope_id=scope_id,
        agents=([itself] if itself else []) + page.items,
        next_cursor=page.next_cursor,
    )


TOKENS = {"chunks": "chunkToken", "nodes": "nodeToken", "edges": "edgeToken", "log": "logToken"}
NEXT = {
    "chunks": "nextChunkToken",
    "nodes": "nextNodeToken",
    "edges": "nextEdgeToken",
    "log": "nextLogToken",
}


async def _inspect(view: View, target: inspecting.Target, title: str) -> Response:
    as_of_text = view.arg("asOf")
    _pages, as_of = inspecting.parse_request({"asOf": as_of_text} if as_of_text else {})
    pages = {
        listing: inspecting.Page(inspecting.LIMITS[listing][0], view.arg(name))
        for listing, name in TOKENS.items()
    }
    # The abbreviated log: a bulk commit's first changes and its count, read without
    # its thousands of other changes (the API and the CLI give them all).
    # In a list emptied here, as http/inspect.py does: the worker thread would keep the
    # answer alive until its next job, and that job would pay for freeing it.
    box = await run_in_threadpool(
        lambda: [inspecting.inspect(view.store, target, pages, as_of, view.signer, heads=True)]
    )
    body = box.pop()
    read_at = str(body["readTimestamp"])
    current = {name: view.arg(name) or "" for name in TOKENS.values()}
    links: dict[str, dict[str, str] | None] = {}
    for listing, name in TOKENS.items():
        token = body[NEXT[listing]]
        # A next page is read at the walk's instant: its link carries asOf, so the
        # banner says so and the instant can be shared with the link.
        links[listing] = (
            {k: v for k, v in {**current, name: token, "asOf": read_at}.items() if v}
            if token
            else None
        )
    hrefs: dict[str, str] = {}  # agent id -> its history page (a scope's log has many)
    sections: dict[str, Any] = {
        "chunks": body["vectors"]["chunks"],
        "nodes": body["graph"]["nodes"],
        "edges": body["graph"]["edges"],
        "log": [_step(step, hrefs) for step in body["log"]["steps"]],
    }
    items = {
        "chunks": inspect_html.chunk_items(sections["chunks"]),
        "nodes": inspect_html.node_items(sections["nodes"]),
        "edges": inspect_html.edge_items(sections["edges"]),
        "log": inspect_html.log_items(sections["log"]),
    }
    return view.page(
        "inspect.html",
        title=title,
        target=target,
        sections=sections,
        items=items,
        links=links,
        read_at=read_at,
        pinned=as_of_text is not None,
        first_pin={"asOf": read_at},
    )


# A log step shows its commit's first LOG_SHOWN changes (the index row keeps LOG_HEAD
# apart, the history page lists them all): a log page of 50 bulk commits was 1,000
# changes listed and boxed, most of the page's time at 100k memories.
LOG_SHOWN = 5


def _step(step: dict[str, Any], hrefs: dict[str, str]) -> dict[str, Any]:
    """A log step as shown: a commit's changes beyond its first ``LOG_SHOWN`` are
    counted, with a link to the commit on the agent's history page, which lists them."""
    count = step.get("changeCount")
    changes = step.get("changes")
    if not isinstance(count, int) or not isinstance(changes, list):
        return step
    if len(changes) <= LOG_SHOWN and count <= len(changes):
        return step
    shown = changes[:LOG_SHOWN]
    agent_id = str(step["agentId"])
    history = hrefs.get(agent_id)
    if history is None:
        history = hrefs[agent_id] = f"/console/agents/{segment(agent_id)}/history"
    return {
        **step,
        "changes": shown,
        "moreChanges": count - len(shown),
        "commitHref": f"{history}?before={int(step['revision']) + 1}#revision-{step['revision']}",
    }


async def inspect_agent(view: View) -> Response:
    agent_id = _agent(view, "inspect")
    view.store.get_agent(agent_id)
    return await _inspect(view, inspecting.Target("agent", agent_id), agent_id)


async def inspect_scope(view: View) -> Response:
    scope_id = paths.scope_id(view.params["scopeId"])
    view.who.require("inspect", scope_id)
    return await _inspect(view, inspecting.Target("scope", scope_id), scope_id)


_INSPECT_QUERY = ("asOf", *TOKENS.values())
PAGES = [
    Page(("agents",), agents, ("prefix", "cursor")),
    Page(("agents", "{agentId}"), agent, ("folder", "cursor")),
    Page(
        ("agents", "{agentId}", "memories", "{path*}"),
        memory,
        ("version", "from", "to", "vcursor"),
    ),
    Page(("agents", "{agentId}", "history"), history, ("before",)),
    Page(("agents", "{agentId}", "runs"), runs, ("triggerId", "status", "cursor")),
    Page(("agents", "{agentId}", "inspect"), inspect_agent, _INSPECT_QUERY),
    Page(("scopes", "{scopeId}"), scope, ("cursor",)),
    Page(("scopes", "{scopeId}", "inspect"), inspect_scope, _INSPECT_QUERY),
]
