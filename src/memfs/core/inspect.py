"""memory:inspect — an audit view of everything stored, read at one snapshot.

Three listings, each paged by its own signed token: ``chunks`` (every stored version,
superseded and deleted ones included, split by heading), graph ``nodes`` (memory
versions) and ``edges`` (links between memories, with the version holding each),
and ``log`` steps, oldest first. All sections of one request are read in one SQLite
read transaction, pinned at ``as_of`` (or the index's clock, returned as
``readTimestamp``): a version is visible when its commit's ``visible_at`` ≤ the pin.
A walk that sends the first ``readTimestamp`` back as ``asOf`` sees exactly the
store as it was then, because commits made later always get a later ``visible_at``.
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from memfs.core.store import Store
from memfs.core.tokens import Signer, query_digest
from memfs.derived.index.base import ReadSession
from memfs.domain.chunking import Chunk, split_chunks
from memfs.domain.commits import format_ts, now_us, parse_ts
from memfs.domain.shapes import INSPECT_TAIL
from memfs.errors import Damaged, InvalidRequest

# listing → (default page size, maximum)
LIMITS = {"chunks": (50, 200), "nodes": (100, 500), "edges": (100, 500), "log": (50, 200)}
TOKEN_TTL = 24 * 3600
CHUNK_BYTES = 2048


@dataclass(frozen=True)
class Target:
    """What is inspected: one agent, or every agent under a scope."""

    kind: str  # "agent" | "scope"
    ident: str

    @property
    def bound(self) -> str:
        return f"{self.kind}:{self.ident}"


# request section → its listings as (listing, limit field, token field)
_SECTIONS = {
    "vectors": [("chunks", "limit", "pageToken")],
    "graph": [("nodes", "nodeLimit", "nodePageToken"), ("edges", "edgeLimit", "edgePageToken")],
    "log": [("log", "limit", "pageToken")],
}


@dataclass(frozen=True)
class Page:
    limit: int
    token: str | None


def parse_request(doc: dict[str, Any]) -> tuple[dict[str, Page], int | None]:
    """The listings asked for with their page sizes and tokens, and ``asOf``."""
    for key in doc:
        if key not in ("vectors", "graph", "log", "asOf"):
            raise InvalidRequest(
                f"unknown field {key!r}; expected vectors, graph, log, asOf", field=key
            )
    pages: dict[str, Page] = {}
    for section, listings in _SECTIONS.items():
        if section not in doc:
            continue
        body = doc[section] if doc[section] is not None else {}
        if not isinstance(body, dict):
            raise InvalidRequest(f"{section} must be an object", field=section)
        known = {name for _listing, *names in listings for name in names}
        for key in body:
            if key not in known:
                raise InvalidRequest(f"unknown field {section}.{key}", field=f"{section}.{key}")
        tokens = {listing: _token(body.get(token_key)) for listing, _l, token_key in listings}
        continuing = any(tokens.values())
        for listing, limit_key, _token_key in listings:
            if continuing and tokens[listing] is None:
                # A section's listings exhaust independently: a request that continues
                # one of them (edges, say) does not restart the other (nodes) at its start.
                continue
            pages[listing] = Page(
                _limit(body.get(limit_key), listing, f"{section}.{limit_key}"),
                tokens[listing],
            )
    as_of = doc.get("asOf")
    pinned = None
    if as_of is not None:
        if not isinstance(as_of, str):
            raise InvalidRequest("asOf must be an RFC 3339 timestamp", field="asOf")
        try:
            if not _RFC3339.fullmatch(as_of):
                raise ValueError(as_of)  # fromisoformat also takes 20260102T030405Z
            pinned = parse_ts(as_of)
        except (ValueError, OverflowError):
            raise InvalidRequest(
                "asOf must be an RFC 3339 timestamp such as 2026-01-02T03:04:05.000000Z",
                field="asOf",
            ) from None
    return pages, pinned


_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:[Zz]|[+-]\d{2}:\d{2})", re.ASCII
)


def _limit(value: object, listing: str, field: str) -> int:
    default, maximum = LIMITS[listing]
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRequest(f"{field} must be an integer >= 1", field=field)
    return min(value, maximum)


def _token(value: object) -> str | None:
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise InvalidRequest("pageToken must be a string", field="pageToken")
    return value


def inspect(
    store: Store,
    target: Target,
    pages: dict[str, Page],
    as_of: int | None,
    signer: Signer,
    *,
    heads: bool = False,
) -> dict[str, Any]:
    """The listings of ``pages`` at one snapshot. ``heads`` is the console's abbreviated
    log: the same steps, order, pages, tokens and pin, each commit's ``changes`` cut to
    its first ``LOG_HEAD`` with ``changeCount`` its total (read from the commit's index
    row without the rest of a bulk commit's changes); the API gives every change."""
    if as_of is not None:
        _settle(store, as_of)
    with store.index.read_session() as conn:
        clock = conn.clock()
        if as_of is not None and as_of > max(clock, now_us()):
            raise InvalidRequest("asOf is in the future", field="asOf")
        positions: dict[str, Any] = {}
        for listing, page in pages.items():
            if page.token is None:
                continue
            pin, position = _decode(signer, page.token, listing, target)
            if as_of is not None and pin != as_of:
                raise InvalidRequest(
                    "pageToken belongs to a walk pinned at another asOf", field="pageToken"
                )
            as_of = pin
            positions[listing] = position
        pin = as_of if as_of is not None else clock
        out: dict[str, Any] = {}
        tokens = {"chunks": "", "nodes": "", "edges": "", "log": ""}
        walkers: dict[str, Walker] = {
            "chunks": _chunks,
            "nodes": _nodes,
            "edges": _edges,
            "log": functools.partial(_log, heads=heads),
        }
        results: dict[str, list[dict[str, Any]]] = {}
        for listing, page in pages.items():
            items: list[dict[str, Any]] = []
            last: Any = None
            more = False
            for position, item in walkers[listing](conn, target, pin, positions.get(listing)):
                if len(items) == page.limit:
                    more = True
                    break
                items.append(item)
                last = position
            results[listing] = items
            if more:
                tokens[listing] = _encode(signer, listing, target, pin, last)
        if "chunks" in results:
            out["vectors"] = {"chunks": results["chunks"]}
        if "nodes" in results or "edges" in results:
            out["graph"] = {"nodes": results.get("nodes", []), "edges": results.get("edges", [])}
        if "log" in results:
            out["log"] = {"steps": results["log"]}
        out.update(
            INSPECT_TAIL.build(
                tokens["chunks"], tokens["nodes"], tokens["edges"], tokens["log"], format_ts(pin)
            )
        )
        return out


def _settle(store: Store, as_of: int) -> None:
    """Make a client's ``as_of`` a stable pin: raise the index clock to it, under the
    write lock, when it is past the clock.

    A commit takes its timestamp before its log entry is durable, and becomes visible
    in its group commit, after it: this process's commits stamped at or before
    ``as_of`` are waited for first (visible at their timestamp, so in the walk), and
    every later one is made visible after the raised clock, so it never shows up on a
    later page. (A commit of another process in flight right then is stamped after
    the pin: left out of the walk, never added to it.)
    """
    with store.index.read_session() as conn:
        if as_of <= conn.clock():
            return
    if as_of > now_us():
        raise InvalidRequest("asOf is in the future", field="asOf")
    store.commits.settle(as_of)
    with store.index.write_session() as conn:
        conn.raise_clock(as_of)


def _encode(signer: Signer, listing: str, target: Target, pin: int, position: Any) -> str:
    return signer.encode(
        f"inspect:{listing}", target.bound, query_digest(listing), [pin, position], ttl=TOKEN_TTL
    )


def _decode(signer: Signer, token: str, listing: str, target: Target) -> tuple[int, Any]:
    value = signer.decode(
        token, f"inspect:{listing}", target.bound, query_digest(listing), field="pageToken"
    )
    if not isinstance(value, list) or len(value) != 2 or not isinstance(value[0], int):
        raise InvalidRequest("pageToken is not valid here", field="pageToken")
    return value[0], value[1]


# ---- walkers: each yields (position, item) in order, starting after ``after`` ------

Walker = Callable[[ReadSession, Target, int, Any], Iterator[tuple[Any, dict[str, Any]]]]

_BATCH = 256


def _versions(
    conn: ReadSession, target: Target, pin: int, after: Any, first: int = _BATCH
) -> Iterator[tuple[Any, ...]]:
    """Stored (non-tombstone) versions visible at ``pin``, by (agent, path, version).

    Each query is one primary-key range sought from ``after``. (A single query with
    ``agent_id=?`` or the scope's ``OR`` made SQLite range over the whole target and
    skip to ``after`` row by row, so a page cost grew with its place in the walk.)
    ``first``: the first batch's size, a default page and the row that says "more"
    (the rest are ``_BATCH``), so a default page reads no rows it does not show.
    """
    key = tuple(after[:3]) if isinstance(after, list) and len(after) >= 3 else ("", "", 0)
    batch = first
    for low, high in _spans(target):
        seek = max(key, (low, "", 0))
        while True:
            rows = conn.version_rows(seek, high, pin, batch)
            yield from rows
            if len(rows) < batch:
                break
            seek = (rows[-1][0], rows[-1][1], rows[-1][2])
            batch = _BATCH


def _spans(target: Target) -> list[tuple[str, str]]:
    """Agent-id spans [low, high) of a target: the agent itself (no id holds NUL), then
    a scope's sub-agents, which sort between scope + "/" and scope + "0"."""
    spans = [(target.ident, target.ident + "\x00")]
    if target.kind == "scope":
        spans.append((target.ident + "/", target.ident + "0"))
    return spans


def _validity(row: tuple[Any, ...], pin: int) -> tuple[str | None, bool]:
    superseded = row[8] is not None and row[8] <= pin
    return (format_ts(row[7]) if superseded else None), superseded


def _content(conn: ReadSession, agent: str, sha: str) -> str:
    data = conn.blob(agent, sha)
    if data is None:
        return ""
    if hashlib.sha256(data).hexdigest() != sha:  # never serve what fails its hash
        raise Damaged(agent, f"index copy of content {sha}", "does not match its sha256")
    return data.decode()


def _chunks(
    conn: ReadSession, target: Target, pin: int, after: Any
) -> Iterator[tuple[Any, dict[str, Any]]]:
    skip_through = after[3] if isinstance(after, list) and len(after) == 4 else -1
    first = True
    # Each version gives one chunk or more: a default page needs at most its size + 1.
    for row in _versions(conn, target, pin, _resume(after), LIMITS["chunks"][0] + 1):
        valid_to, superseded = _validity(row, pin)
        # An empty memory is still a stored version: it shows as one empty chunk.
        chunks = split_chunks(_content(conn, row[0], row[3]), CHUNK_BYTES) or [_EMPTY]
        for chunk in chunks:
            if first and _same(after, row) and chunk.index <= skip_through:
                continue
            yield (
                [row[0], row[1], row[2], chunk.index],
                {
                    "agentId": row[0],
                    "path": row[1],
                    "version": row[2],
                    "chunkIndex": chunk.index,
                    "byteStart": chunk.start,
                    "byteEnd": chunk.end,
                    "heading": chunk.heading,
                    "content": chunk.text,
                    "contentSha256": row[3],
                    "validFrom": format_ts(row[6]),
                    "validTo": valid_to,
                    "superseded": superseded,
                    "truncated": chunk.truncated,
                },
            )
        first = False


_EMPTY = Chunk(index=0, start=0, end=0, heading=None, text="", truncated=False)


def _resume(after: Any) -> Any:
    """Start the version walk at the version a chunk token stopped inside."""
    if isinstance(after, list) and len(after) == 4:
        return [after[0], after[1], after[2] - 1]
    return after


def _same(after: Any, row: tuple[Any, ...]) -> bool:
    return isinstance(after, list) and len(after) == 4 and tuple(after[:3]) == tuple(row[:3])


def _nodes(
    conn: ReadSession, target: Target, pin: int, after: Any
) -> Iterator[tuple[Any, dict[str, Any]]]:
    for row in _versions(conn, target, pin, after, LIMITS["nodes"][0] + 1):
        valid_to, superseded = _validity(row, pin)
        yield (
            [row[0], row[1], row[2]],
            {
                "id": f"{row[0]}:{row[1]}@{row[2]}",
                "agentId": row[0],
                "path": row[1],
                "version": row[2],
                "contentSha256": row[3],
                "bytes": row[4],
                "description": row[5],
                "validFrom": format_ts(row[6]),
                "validTo": valid_to,
                "superseded": superseded,
            },
        )


def _edges(
    conn: ReadSession, target: Target, pin: int, after: Any
) -> Iterator[tuple[Any, dict[str, Any]]]:
    """The links of every stored version visible at ``pin``, by (agent, path, version,
    link index): the index's links table (kept by each commit from the version's
    content, ``extract_links`` order), one primary-key range sought from ``after``,
    so a page never reads contents and its cost does not grow with the history."""
    key = tuple(after) if isinstance(after, list) and len(after) == 4 else ("", "", 0, -1)
    batch = LIMITS["edges"][0] + 1  # a default page and the one row that says "more"
    for low, high in _spans(target):
        seek = max(key, (low, "", 0, -1))
        while True:
            rows = conn.link_rows(seek, high, pin, batch)
            for row in rows:
                live = row[5]
                yield (
                    [row[0], row[1], row[2], row[3]],
                    {
                        "agentId": row[0],
                        "source": f"{row[0]}:{row[1]}@{row[2]}",
                        "sourcePath": row[1],
                        "sourceVersion": row[2],
                        "targetPath": row[4],
                        "target": f"{row[0]}:{row[4]}@{live}" if live is not None else None,
                        "targetExists": live is not None,
                    },
                )
            if len(rows) < batch:
                break
            seek = (rows[-1][0], rows[-1][1], rows[-1][2], rows[-1][3])
            batch = _BATCH


_LAST = 1 << 62  # after any revision


def _log(
    conn: ReadSession, target: Target, pin: int, after: Any, *, heads: bool = False
) -> Iterator[tuple[Any, dict[str, Any]]]:
    """Commit steps and run steps in the order they became visible, oldest first.

    Ordered by (visible_at, agent, kind, run, seq). Commits and run steps are each
    read with an index seek in bounded batches and merged here: one query over their
    UNION ALL sorted every step of the target on every page.
    """
    key = tuple(after) if isinstance(after, list) and len(after) == 5 else (-1, "", -1, "", 0)
    at, agent, kind, run_id, seq = key
    commit_seek = (at, agent, seq if kind == 0 else (-1 if kind < 0 else _LAST))
    run_seek = (at, agent, run_id, seq) if kind == 1 else (at, agent, "", -1)
    commits = _steps(conn, target, pin, commit_seek, commits=True, heads=heads)
    runs = _steps(conn, target, pin, run_seek, commits=False)
    for row in heapq.merge(commits, runs, key=lambda r: (r[0], r[1], r[2], r[3], r[4])):
        position = [row[0], row[1], row[2], row[3], row[4]]
        if row[2] == 0:
            step = {
                "type": "commit",
                "agentId": row[1],
                "revision": row[4],
                "timestamp": format_ts(row[5]),
                "actor": row[6],
                "message": row[7],
                "changes": json.loads(row[8]),
            }
            if heads:
                step["changeCount"] = row[11]
            yield position, step
        else:
            yield (
                position,
                {
                    "type": "run",
                    "step": row[9],
                    "agentId": row[1],
                    "runId": row[3],
                    "seq": row[4],
                    "attempt": row[10],
                    "timestamp": format_ts(row[5]),
                    "detail": _run_detail(row[8]),
                },
            )


def _run_detail(raw: str) -> dict[str, Any]:
    """A run step's detail as the API shows times: RFC 3339 (events store microseconds)."""
    detail: dict[str, Any] = json.loads(raw)
    retry_at = detail.get("nextRetryAt")
    if isinstance(retry_at, int) and not isinstance(retry_at, bool):
        detail["nextRetryAt"] = format_ts(retry_at)
    return detail


def _steps(
    conn: ReadSession,
    target: Target,
    pin: int,
    seek: tuple[Any, ...],
    *,
    commits: bool,
    heads: bool = False,
) -> Iterator[tuple[Any, ...]]:
    """Commit rows (or run-step rows) after ``seek`` = (visible_at, agent, *rest)."""
    lowest: tuple[Any, ...] = (-1,) if commits else ("", -1)
    batch = 64  # a default page (50) fits the first batch; log rows can be large
    while True:
        if target.kind == "agent":
            at, agent, *tail = seek
            # positions are bound to this agent; anything else seeks to a whole instant
            if agent != target.ident:
                at, tail = (at, list(lowest)) if agent < target.ident else (at + 1, list(lowest))
            rows = conn.step_rows(
                "agent", target.ident, (at, *tail), pin, batch, commits=commits, heads=heads
            )
        else:
            rows = conn.step_rows(
                "scope", target.ident, seek, pin, batch, commits=commits, heads=heads
            )
        yield from rows
        if len(rows) < batch:
            return
        last = rows[-1]
        seek = (last[0], last[1], last[4]) if commits else (last[0], last[1], last[3], last[4])
        batch = _BATCH
