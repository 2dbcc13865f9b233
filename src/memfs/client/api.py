"""The ``Client``: one typed method per route of the memfs HTTP API."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import httpx

from memfs import __version__
from memfs.client.errors import (
    NotFoundError,
    PreconditionFailedError,
    TransportError,
    _api_error,
)
from memfs.client.results import (
    Agent,
    AgentPage,
    CommandResult,
    CreatedKey,
    InspectPage,
    Key,
    Memory,
    MemoryEntry,
    MemoryPage,
    MemorySummary,
    MemoryWrite,
    Run,
    RunPage,
    Scalar,
    SearchPage,
    SearchResult,
    T,
    Trigger,
    Version,
    VersionPage,
    _bad,
    _decode,
    _KeyList,
    _TriggerList,
)

PROTOCOL = "1"
ROOT = "/memories"
DEFAULT_TIMEOUT = 30.0


# ---- URLs --------------------------------------------------------------------------


def _segment(value: str) -> str:
    """One URL path segment; '.' and '..' encoded so no URL normalisation eats them."""
    encoded = quote(value, safe="")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def _agent_url(agent_id: str) -> str:
    return f"/v1/agents/{_segment(agent_id)}"


def _memory_url(agent_id: str, path: str) -> str:
    """``…/memories/<each segment encoded>`` for ``/memories/a/b.md`` or ``a/b.md``."""
    if path.startswith(ROOT + "/"):
        relative = path[len(ROOT) + 1 :]
    elif path.startswith("/") or path == ROOT:
        raise ValueError(f"a memory path starts with {ROOT}/ or is relative to it, got {path!r}")
    else:
        relative = path
    if not relative:
        raise ValueError(f"{path!r} names no memory")
    return f"{_agent_url(agent_id)}/memories/" + "/".join(_segment(s) for s in relative.split("/"))


def _etag(sha: str) -> str:
    return sha if sha.startswith('"') else f'"{sha}"'


def _header_value(name: str, value: str) -> str:
    # HTTP headers are ASCII here; httpx would fail later with a less helpful error.
    if not value.isascii() or not value.isprintable():
        raise ValueError(f"{name} must be printable ASCII, got {value!r}")
    return value


class _Page(Protocol):
    @property
    def next_cursor(self) -> str | None: ...


PageT = TypeVar("PageT", bound=_Page)


# ---- the client --------------------------------------------------------------------


class Client:
    """memfs over HTTP for one key, optionally narrowed to a subject; thread-safe."""

    def __init__(
        self,
        base_url: str,
        key: str,
        *,
        subject: str | None = None,
        scopes: Sequence[str] | str | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
    ) -> None:
        self._http = httpx.Client(
            base_url=base_url,
            transport=transport,
            timeout=timeout,
            headers={"User-Agent": f"memfs-client/{__version__}"},
        )
        self._owns_http = True
        self._base_url = base_url
        self._key = key
        self._headers = _auth_headers(key, subject, scopes)

    def with_subject(self, subject: str, scopes: Sequence[str] | str) -> Client:
        """A client for the same key narrowed to ``subject`` and ``scopes``, sharing
        this client's connections (closing it leaves this one open)."""
        other = Client.__new__(Client)
        other._http = self._http
        other._owns_http = False
        other._base_url = self._base_url
        other._key = self._key
        other._headers = _auth_headers(self._key, subject, scopes)
        return other

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        subject = self._headers.get("Memfs-Subject")
        return f"Client({self._base_url!r}" + (f", subject={subject!r})" if subject else ")")

    # ---- transport -----------------------------------------------------------------

    def _send(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        json: object = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        merged = {**self._headers, **(headers or {})}
        try:
            response = self._http.request(
                method,
                url,
                params=dict(params) if params else None,
                json=json,
                content=content,
                headers=merged,
            )
        except httpx.RequestError as exc:
            raise TransportError(f"{method} {url}: {exc!r}") from exc
        if not response.is_success:
            raise _api_error(response)
        return response

    @staticmethod
    def _result(cls: type[T], response: httpx.Response, **given: object) -> T:
        try:
            value: object = response.json()
        except ValueError:
            raise _bad(response, f"{cls.__name__}: the body is not JSON") from None
        return _decode(cls, value, response, **given)

    def _get(self, cls: type[T], url: str, params: Mapping[str, str | int] | None = None) -> T:
        return self._result(cls, self._send("GET", url, params=params))

    @staticmethod
    def _pages(fetch: Callable[[str | None], PageT]) -> Iterator[PageT]:
        """Pages until ``next_cursor`` is None; the size of a page says nothing."""
        page = fetch(None)
        yield page
        while page.next_cursor is not None:
            page = fetch(page.next_cursor)
            yield page

    # ---- keys (admin) --------------------------------------------------------------

    def create_key(
        self, key_id: str, scopes: Sequence[str], *, description: str = ""
    ) -> CreatedKey:
        """``PUT /v1/tenant/keys/{keyId}``: a new key and its secret (shown once)."""
        body = {"scopes": list(scopes), "description": description}
        return self._result(
            CreatedKey, self._send("PUT", f"/v1/tenant/keys/{_segment(key_id)}", json=body)
        )

    def list_keys(self) -> list[Key]:
        """``GET /v1/tenant/keys``: every key, by id (one page: keys are few)."""
        return list(self._get(_KeyList, "/v1/tenant/keys").keys)

    def get_key(self, key_id: str) -> Key:
        return self._get(Key, f"/v1/tenant/keys/{_segment(key_id)}")

    def revoke_key(self, key_id: str) -> None:
        """``DELETE /v1/tenant/keys/{keyId}``: the secret stops working at once."""
        self._send("DELETE", f"/v1/tenant/keys/{_segment(key_id)}")

    # ---- agents --------------------------------------------------------------------

    def put_agent(self, agent_id: str, *, name: str | None = None) -> Agent:
        """Create the agent, or rename it. PUT replaces: without ``name`` the name
        becomes the agent id."""
        body = {} if name is None else {"name": name}
        return self._result(Agent, self._send("PUT", _agent_url(agent_id), json=body))

    def get_agent(self, agent_id: str) -> Agent:
        return self._get(Agent, _agent_url(agent_id))

    def list_agents(
        self, *, prefix: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> AgentPage:
        """One page of agents whose id starts with ``prefix`` (those the key covers)."""
        params = _params(prefix=prefix, limit=limit, cursor=cursor)
        return self._get(AgentPage, "/v1/agents", params)

    def iter_agents(
        self, *, prefix: str | None = None, limit: int | None = None
    ) -> Iterator[Agent]:
        for page in self._pages(lambda c: self.list_agents(prefix=prefix, limit=limit, cursor=c)):
            yield from page.agents

    def delete_agent(self, agent_id: str) -> None:
        """Erase the agent and all its history (admin only)."""
        self._send("DELETE", _agent_url(agent_id))

    def memory_summary(self, agent_id: str) -> MemorySummary:
        """``GET /v1/agents/{agentId}/memory``."""
        return self._get(MemorySummary, f"{_agent_url(agent_id)}/memory")

    def memory_command(self, agent_id: str, command: Mapping[str, object]) -> CommandResult:
        """One Claude memory-tool command (``memory_20250818``); answers the tool
        result's text, ``ok`` False where the SDK's tool would report an error."""
        url = f"{_agent_url(agent_id)}/memory:command"
        return self._result(CommandResult, self._send("POST", url, json=dict(command)))

    # ---- memories ------------------------------------------------------------------

    def list_memories(
        self,
        agent_id: str,
        *,
        path_prefix: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        depth: int | None = None,
        metadata: Mapping[str, str] | None = None,
        include_total: bool = False,
    ) -> MemoryPage:
        """One page of memories in one folder (``path_prefix``, relative to
        /memories); recursive unless ``depth=1``, which adds subfolders."""
        params = _params(pathPrefix=path_prefix, limit=limit, cursor=cursor, depth=depth)
        if include_total:
            params["includeTotal"] = "true"
        for key, value in (metadata or {}).items():
            params[f"metadata.{key}"] = value
        return self._get(MemoryPage, f"{_agent_url(agent_id)}/memories", params)

    def iter_memories(
        self,
        agent_id: str,
        *,
        path_prefix: str | None = None,
        limit: int | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> Iterator[MemoryEntry]:
        """Every memory under ``path_prefix`` (recursive), following cursors to the end."""
        for page in self._pages(
            lambda c: self.list_memories(
                agent_id, path_prefix=path_prefix, limit=limit, cursor=c, metadata=metadata
            )
        ):
            yield from page.memories

    def get_memory(self, agent_id: str, path: str, *, version: int | None = None) -> Memory:
        """The memory at ``path``, or its past ``version`` (superseded or deleted)."""
        return self._get(Memory, _memory_url(agent_id, path), _params(version=version))

    def get_memory_text(self, agent_id: str, path: str, *, version: int | None = None) -> bytes:
        """The raw file (``Accept: text/markdown``), byte for byte."""
        response = self._send(
            "GET",
            _memory_url(agent_id, path),
            params=_params(version=version),
            headers={"Accept": "text/markdown"},
        )
        return response.content

    def put_memory(
        self,
        agent_id: str,
        path: str,
        content: str | bytes,
        *,
        if_match: str | None = None,
        if_none_match: bool = False,
        message: str | None = None,
    ) -> MemoryWrite:
        """Write the whole file. ``if_match`` (a contentSha256 or ETag) updates only
        that version; ``if_none_match`` creates only; both fail with 412."""
        data = content.encode() if isinstance(content, str) else content
        headers = {"Content-Type": "text/markdown; charset=utf-8"}
        if if_match is not None:
            headers["If-Match"] = _etag(if_match)
        if if_none_match:
            headers["If-None-Match"] = "*"
        if message is not None:
            headers["Memfs-Message"] = _header_value("Memfs-Message", message)
        response = self._send("PUT", _memory_url(agent_id, path), content=data, headers=headers)
        return self._result(MemoryWrite, response, created=response.status_code == 201)

    def delete_memory(
        self, agent_id: str, path: str, *, if_match: str | None = None, message: str | None = None
    ) -> None:
        """Delete (a tombstone version; history stays readable)."""
        headers: dict[str, str] = {}
        if if_match is not None:
            headers["If-Match"] = _etag(if_match)
        if message is not None:
            headers["Memfs-Message"] = _header_value("Memfs-Message", message)
        self._send("DELETE", _memory_url(agent_id, path), headers=headers)

    def update_memory(
        self,
        agent_id: str,
        path: str,
        fn: Callable[[str], str],
        *,
        attempts: int = 5,
        default: str | None = None,
        message: str | None = None,
    ) -> MemoryWrite:
        """Read, apply ``fn`` to the content, write it back with ``If-Match``; when
        another writer got in between (412), start over, up to ``attempts`` times.

        A missing memory raises NotFoundError, unless ``default`` is given: then
        ``fn(default)`` is written with ``If-None-Match: *``. ``fn`` may run more
        than once, so it should only compute.
        """
        if attempts < 1:
            raise ValueError("attempts must be >= 1")
        for attempt in range(attempts):
            try:
                current = self.get_memory(agent_id, path)
            except NotFoundError:
                if default is None:
                    raise
                sha, content = None, default
            else:
                sha, content = current.content_sha256, current.content
            try:
                return self.put_memory(
                    agent_id,
                    path,
                    fn(content),
                    if_match=sha,
                    if_none_match=sha is None,
                    message=message,
                )
            except PreconditionFailedError:
                if attempt == attempts - 1:
                    raise
            # Racing writers spread out a little, so each round has one winner.
            time.sleep(random.uniform(0, 0.01 * 2**attempt))
        raise AssertionError("unreachable")

    def list_versions(
        self, agent_id: str, path: str, *, limit: int | None = None, cursor: str | None = None
    ) -> VersionPage:
        """One page of the versions of ``path``, oldest first (deletes included)."""
        full = path if path.startswith("/") else f"{ROOT}/{path}"
        params = _params(path=full, limit=limit, cursor=cursor)
        return self._get(VersionPage, f"{_agent_url(agent_id)}/versions", params)

    def iter_versions(
        self, agent_id: str, path: str, *, limit: int | None = None
    ) -> Iterator[Version]:
        for page in self._pages(
            lambda c: self.list_versions(agent_id, path, limit=limit, cursor=c)
        ):
            yield from page.versions

    # ---- triggers, deliveries, runs --------------------------------------------

    def _trigger_url(self, agent_id: str, trigger_id: str) -> str:
        return f"{_agent_url(agent_id)}/triggers/{_segment(trigger_id)}"

    def put_trigger(
        self,
        agent_id: str,
        trigger_id: str,
        *,
        prompt: str = "",
        action: Mapping[str, Any] | None = None,
        max_attempts: int = 5,
        secret: str | None = None,
    ) -> Trigger:
        """Create or replace a trigger; ``secret`` is set on the result only when new."""
        body: dict[str, Any] = {"prompt": prompt, "maxAttempts": max_attempts}
        if action is not None:
            body["action"] = dict(action)
        if secret is not None:
            body["secret"] = secret
        response = self._send("PUT", self._trigger_url(agent_id, trigger_id), json=body)
        return self._result(Trigger, response)

    def get_trigger(self, agent_id: str, trigger_id: str) -> Trigger:
        return self._get(Trigger, self._trigger_url(agent_id, trigger_id))

    def list_triggers(self, agent_id: str) -> list[Trigger]:
        return list(self._get(_TriggerList, f"{_agent_url(agent_id)}/triggers").triggers)

    def delete_trigger(self, agent_id: str, trigger_id: str) -> None:
        self._send("DELETE", self._trigger_url(agent_id, trigger_id))

    def rotate_trigger_secret(self, agent_id: str, trigger_id: str) -> Trigger:
        """A new secret (on the result); the old one keeps verifying for 24 hours."""
        url = self._trigger_url(agent_id, trigger_id) + ":rotateSecret"
        return self._result(Trigger, self._send("POST", url))

    def deliver(
        self,
        agent_id: str,
        trigger_id: str,
        body: bytes,
        *,
        secret: str,
        webhook_id: str | None = None,
        content_type: str = "application/json",
    ) -> tuple[Run, bool]:
        """Send a Standard-Webhooks delivery signed with ``secret``; (run, started now)."""
        from memfs.domain.webhook_verify import sign

        webhook_id = webhook_id or f"msg_{random.getrandbits(96):024x}"
        stamp = int(time.time())
        headers = {
            "webhook-id": webhook_id,
            "webhook-timestamp": str(stamp),
            "webhook-signature": sign(secret, webhook_id, stamp, body),
            "Content-Type": content_type,
        }
        url = self._trigger_url(agent_id, trigger_id) + ":deliver"
        response = self._send("POST", url, content=body, headers=headers)
        return self._result(Run, response), response.status_code == 202

    def list_runs(
        self,
        agent_id: str,
        *,
        trigger_id: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> RunPage:
        params = _params(triggerId=trigger_id, status=status, limit=limit, cursor=cursor)
        return self._get(RunPage, f"{_agent_url(agent_id)}/runs", params)

    def iter_runs(
        self, agent_id: str, *, trigger_id: str | None = None, status: str | None = None
    ) -> Iterator[Run]:
        for page in self._pages(
            lambda c: self.list_runs(agent_id, trigger_id=trigger_id, status=status, cursor=c)
        ):
            yield from page.runs

    def get_run(self, agent_id: str, run_id: str) -> Run:
        return self._get(Run, f"{_agent_url(agent_id)}/runs/{_segment(run_id)}")

    def retry_run(self, agent_id: str, run_id: str) -> Run:
        """Give a failed run one more attempt."""
        url = f"{_agent_url(agent_id)}/runs/{_segment(run_id)}:retry"
        return self._result(Run, self._send("POST", url))

    # ---- memory:query -------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        agent_id: str | None = None,
        scope_id: str | None = None,
        path_prefix: str | None = None,
        metadata: Mapping[str, Scalar] | None = None,
        limit: int | None = None,
        page_token: str | None = None,
    ) -> SearchPage:
        """One ``memory:query`` page of an agent or a scope (give exactly one), best
        first: words all must match, "exact phrases", prefix*, -excluded."""
        if (agent_id is None) == (scope_id is None):
            raise ValueError("give agent_id or scope_id")
        url = (
            f"{_agent_url(agent_id)}/memory:query"
            if agent_id is not None
            else f"/v1/scopes/{_segment(scope_id or '')}/memory:query"
        )
        body: dict[str, Any] = {"query": query}
        if path_prefix is not None:
            body["pathPrefix"] = path_prefix
        if metadata is not None:
            body["metadata"] = dict(metadata)
        if limit is not None:
            body["limit"] = limit
        if page_token:
            body["pageToken"] = page_token
        return self._result(SearchPage, self._send("POST", url, json=body))

    def iter_search(
        self,
        query: str,
        *,
        agent_id: str | None = None,
        scope_id: str | None = None,
        path_prefix: str | None = None,
        metadata: Mapping[str, Scalar] | None = None,
        limit: int | None = None,
    ) -> Iterator[SearchResult]:
        """Every result of a query, best first, following page tokens to the end
        (``limit``: the page size)."""
        token: str | None = None
        while True:
            page = self.search(
                query,
                agent_id=agent_id,
                scope_id=scope_id,
                path_prefix=path_prefix,
                metadata=metadata,
                limit=limit,
                page_token=token,
            )
            yield from page.results
            token = page.next_page_token
            if not token:
                return

    # ---- memory:inspect ----------------------------------------------------------

    def inspect(
        self,
        request: Mapping[str, Any],
        *,
        agent_id: str | None = None,
        scope_id: str | None = None,
    ) -> InspectPage:
        """One ``memory:inspect`` page of an agent or a scope (give exactly one)."""
        if (agent_id is None) == (scope_id is None):
            raise ValueError("give agent_id or scope_id")
        url = (
            f"{_agent_url(agent_id)}/memory:inspect"
            if agent_id is not None
            else f"/v1/scopes/{_segment(scope_id or '')}/memory:inspect"
        )
        return self._result(InspectPage, self._send("POST", url, json=dict(request)))

    def iter_inspect(
        self,
        listing: str,
        *,
        agent_id: str | None = None,
        scope_id: str | None = None,
        as_of: str | None = None,
        limit: int | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Every item of one inspect listing (``chunks``, ``nodes``, ``edges``, ``log``),
        page by page, all pinned at ``as_of`` (default: the first page's readTimestamp)."""
        if listing not in _LISTINGS:
            raise ValueError(f"listing must be one of {', '.join(_LISTINGS)}")
        section, items, token_field, limit_key, token_key = _LISTINGS[listing]
        token: str | None = None
        while True:
            part: dict[str, Any] = {}
            if limit is not None:
                part[limit_key] = limit
            if token:
                part[token_key] = token
            request: dict[str, Any] = {section: part}
            if as_of is not None:
                request["asOf"] = as_of
            page = self.inspect(request, agent_id=agent_id, scope_id=scope_id)
            as_of = page.read_timestamp  # every later page sees the same instant
            body = getattr(page, section) or {}
            yield from body.get(items, [])
            token = getattr(page, token_field)
            if not token:
                return

    def iter_chunks(self, **where: Any) -> Iterator[dict[str, Any]]:
        """``iter_inspect("chunks", ...)``: every chunk of every stored version."""
        return self.iter_inspect("chunks", **where)

    def iter_nodes(self, **where: Any) -> Iterator[dict[str, Any]]:
        """``iter_inspect("nodes", ...)``: every memory version as a graph node."""
        return self.iter_inspect("nodes", **where)

    def iter_edges(self, **where: Any) -> Iterator[dict[str, Any]]:
        """``iter_inspect("edges", ...)``: every link between memories."""
        return self.iter_inspect("edges", **where)

    def iter_log(self, **where: Any) -> Iterator[dict[str, Any]]:
        """``iter_inspect("log", ...)``: commit and run steps, oldest first."""
        return self.iter_inspect("log", **where)


# listing → (request section, items key, next-token field, limit key, token key)
_LISTINGS = {
    "chunks": ("vectors", "chunks", "next_chunk_token", "limit", "pageToken"),
    "nodes": ("graph", "nodes", "next_node_token", "nodeLimit", "nodePageToken"),
    "edges": ("graph", "edges", "next_edge_token", "edgeLimit", "edgePageToken"),
    "log": ("log", "steps", "next_log_token", "limit", "pageToken"),
}


def _auth_headers(
    key: str, subject: str | None, scopes: Sequence[str] | str | None
) -> dict[str, str]:
    headers = {"Memfs-Protocol": PROTOCOL}
    if key:  # an empty key: a webhook sender's client, which only calls deliver
        headers["Authorization"] = "Bearer " + _header_value("key", key)
    if (subject is None) != (scopes is None):
        raise ValueError("subject and scopes go together: give both or neither")
    if subject is not None and scopes is not None:
        tokens = scopes.split() if isinstance(scopes, str) else list(scopes)
        headers["Memfs-Subject"] = _header_value("subject", subject)
        headers["Memfs-Scopes"] = _header_value("scopes", " ".join(tokens))
    return headers


def _params(**values: str | int | None) -> dict[str, str | int]:
    return {name: value for name, value in values.items() if value is not None}
