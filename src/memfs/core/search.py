"""memory:query — full-text search over the live memories of one agent or of a scope.

One call is one read snapshot of the index. The query language (words, "phrases",
prefix*, -excluded) is parsed by ``domain.search_query``; ranking is the index's
column-weighted BM25 (description and path above the body), ties broken by agent and
path so that pages are stable. A page token is signed and bound to the target and the
query (words, path prefix, metadata filters); it carries the next result's offset, and
``""`` means there is no more. Every edge (HTTP, CLI, client, MCP) calls ``search``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memfs.core.store import Store
from memfs.core.tokens import Signer, query_digest
from memfs.domain import paths
from memfs.domain.content import metadata_text
from memfs.domain.records import SearchHit
from memfs.domain.search_query import parse_query
from memfs.errors import InvalidRequest

DEFAULT_LIMIT, MAX_LIMIT = 10, 50
MAX_FILTERS = 32
TOKEN_TTL = 24 * 3600
FIELDS = ("query", "pathPrefix", "metadata", "limit", "pageToken")


@dataclass(frozen=True)
class SearchPage:
    """A page of results, best first; ``next_page_token`` is "" after the last."""

    results: list[SearchHit]
    next_page_token: str


def search(
    store: Store,
    signer: Signer,
    *,
    agent_id: str | None = None,
    scope: str | None = None,
    query: object,
    path_prefix: object = "",
    metadata: object = None,
    limit: object = None,
    page_token: object = None,
) -> SearchPage:
    """Search the agent ``agent_id``, or every agent under ``scope`` (exactly one).

    Every argument a client sends is checked here: a bad one raises InvalidRequest
    naming its field (``query``, ``pathPrefix``, ``metadata``, ``limit``,
    ``pageToken``); an unknown agent raises NotFound, a damaged one Damaged."""
    if (agent_id is None) == (scope is None):
        raise ValueError("search takes an agent_id or a scope, not both or neither")
    parsed = parse_query(query)
    if path_prefix is None:
        path_prefix = ""
    if not isinstance(path_prefix, str):
        raise InvalidRequest("pathPrefix must be a string", field="pathPrefix")
    folder = paths.folder_prefix(path_prefix)
    filters = _filters(metadata)
    size = _limit(limit)
    if agent_id is not None:
        target = ("agent", paths.agent_id(agent_id))
        store.get_agent(target[1])  # 404 for an unknown agent, 503 for a damaged one
    else:
        target = ("scope", paths.scope_id(str(scope)))
    match = parsed.match_expression()
    bound = f"{target[0]}:{target[1]}"
    digest = query_digest(match, folder, filters)
    offset = 0
    if page_token not in (None, ""):
        if not isinstance(page_token, str):
            raise InvalidRequest("pageToken must be a string", field="pageToken")
        position = signer.decode(page_token, "search", bound, digest, field="pageToken")
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise InvalidRequest("pageToken is not valid here", field="pageToken")
        offset = position
    with store.index.read_session() as session:
        hits = session.search(match, target, folder, filters, size + 1, offset)
    more = len(hits) > size
    hits = hits[:size]
    token = ""
    if more:
        token = signer.encode("search", bound, digest, offset + size, ttl=TOKEN_TTL)
    return SearchPage(hits, token)


def request_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``search`` from a request body (the HTTP API's
    ``{"query", "pathPrefix", "metadata", "limit", "pageToken"}``), refusing others."""
    for key in doc:
        if key not in FIELDS:
            raise InvalidRequest(
                f"unknown field {key!r}; expected {', '.join(FIELDS)}", field=str(key)
            )
    return {
        "query": doc.get("query"),
        "path_prefix": doc.get("pathPrefix", ""),
        "metadata": doc.get("metadata"),
        "limit": doc.get("limit"),
        "page_token": doc.get("pageToken"),
    }


def _filters(metadata: object) -> list[tuple[str, str]]:
    """``{"KEY": scalar}`` as sorted (key, text) pairs, compared as listings compare."""
    if metadata is None:
        return []
    if not isinstance(metadata, Mapping):
        raise InvalidRequest(
            'metadata must be an object such as {"KEY": "VALUE"}', field="metadata"
        )
    if len(metadata) > MAX_FILTERS:
        raise InvalidRequest(f"metadata holds at most {MAX_FILTERS} filters", field="metadata")
    out: list[tuple[str, str]] = []
    for key, value in metadata.items():
        if not isinstance(key, str) or not key:
            raise InvalidRequest("metadata keys must be non-empty strings", field="metadata")
        if value is not None and not isinstance(value, (str, int, float, bool)):
            raise InvalidRequest(
                f"metadata.{key} must be a string, number, boolean or null", field="metadata"
            )
        pair = (key, metadata_text(value))
        try:
            "".join(pair).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (JSON "\ud800") is no text
            raise InvalidRequest("metadata must be valid Unicode text", field="metadata") from None
        out.append(pair)
    return sorted(out)


def _limit(value: object) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidRequest(f"limit must be an integer from 1 to {MAX_LIMIT}", field="limit")
    return min(value, MAX_LIMIT)
