"""``memfs search``: memory:query (full-text search) on the data folder."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from memfs import wire
from memfs.cli.base import Parser, command, out
from memfs.core.search import MAX_LIMIT, search
from memfs.core.store import Store
from memfs.core.tokens import Signer
from memfs.domain.records import SearchHit
from memfs.errors import InvalidRequest


def cmd_search(args: argparse.Namespace, store: Store) -> int:
    words = list(args.words)
    if args.scope is None:
        if len(words) < 2:
            raise InvalidRequest("name an AGENT and a QUERY (or --scope ID and a QUERY)")
        where: dict[str, Any] = {"agent_id": words.pop(0)}
    else:
        where = {"scope": args.scope}
    query = " ".join(words)
    hits = list(_hits(store, where, query, args.prefix, _filters(args.meta), args.limit))
    lines: list[str] = []
    for hit in hits:
        who = f"{hit.agent_id}  " if args.scope is not None else ""
        lines.append(f"{who}{hit.path}  v{hit.version}  {hit.score:.3f}")
        if hit.snippet:
            lines.append(f"    {hit.snippet}")
    out(args, {"results": [wire.search_hit_json(h) for h in hits]}, lines)
    return 0


def _hits(
    store: Store,
    where: dict[str, Any],
    query: str,
    prefix: str,
    filters: dict[str, str],
    limit: int,
) -> Iterator[SearchHit]:
    """The best ``limit`` results, paged through as a client pages (50 a page)."""
    signer = Signer.for_data_dir(store.data_dir)
    token = ""
    left = limit
    while left > 0:
        page = search(
            store,
            signer,
            **where,
            query=query,
            path_prefix=prefix,
            metadata=filters or None,
            limit=min(left, MAX_LIMIT),
            page_token=token,
        )
        yield from page.results
        left -= len(page.results)
        token = page.next_page_token
        if not token:
            return


def _filters(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise InvalidRequest(f"--meta {pair!r} must look like KEY=VALUE")
        out[key] = value
    return out


def _limit(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer >= 1")
    return number


def add_commands(sub: argparse._SubParsersAction[Parser]) -> None:
    p = command(
        sub,
        "search",
        cmd_search,
        'full-text search: words (all must match), "exact phrases", prefix*, -excluded',
        "memfs search users/alice/assistant '\"code review\" python -draft' --limit 5",
    )
    p.add_argument(
        "words",
        nargs="+",
        metavar="WORD",
        help="the agent id (left out with --scope), then the query (several words are joined)",
    )
    p.usage = (
        "memfs search [options] AGENT QUERY...\n       memfs search [options] --scope ID QUERY..."
    )
    p.add_argument("--scope", help="search every agent under this scope id, ranked as one list")
    p.add_argument("--limit", type=_limit, default=10, help="at most N results (default 10)")
    p.add_argument("--prefix", default="", help="only memories below this folder")
    p.add_argument(
        "--meta",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only memories whose frontmatter has KEY: VALUE (repeatable)",
    )
