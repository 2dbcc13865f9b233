"""memfs.client against a real ``memfs serve``: every route, paging, errors, narrowing."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator

import httpx
import pytest

from memfs.client import (
    Agent,
    ApiError,
    Client,
    CommandResult,
    ConflictError,
    CreatedKey,
    ForbiddenError,
    InvalidRequestError,
    Key,
    MemoryWrite,
    NotFoundError,
    PreconditionFailedError,
    SearchPage,
    SearchResult,
    TransportError,
    UnauthorizedError,
    UnavailableError,
    UnexpectedResponseError,
)
from servers import MemfsServer, free_port

_ids = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemfsServer]:
    running = MemfsServer(tmp_path_factory.mktemp("client") / "data")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def admin(server: MemfsServer) -> Iterator[Client]:
    with Client(server.url, server.admin_key) as client:
        yield client


@pytest.fixture
def agent(admin: Client) -> str:
    """A fresh agent per test, with slashes in its id (one encoded URL segment)."""
    agent_id = f"users/t{next(_ids)}/assistant"
    admin.put_agent(agent_id, name="Assistant")
    return agent_id


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---- keys ----------------------------------------------------------------------------


def test_keys_round_trip(server: MemfsServer, admin: Client) -> None:
    created = admin.create_key("k-round", ["memories:read", "agents:*"], description="reader")
    assert isinstance(created, CreatedKey)
    assert created.secret.startswith("mfs_k-round~")
    assert created.secret not in repr(created)
    assert (created.key_id, created.scopes, created.description) == (
        "k-round",
        ("memories:read", "agents:*"),
        "reader",
    )
    assert admin.get_key("k-round") == Key("k-round", created.scopes, "reader", created.created_at)
    assert "k-round" in [k.key_id for k in admin.list_keys()]
    with pytest.raises(ConflictError):
        admin.create_key("k-round", ["memories:read"])

    with Client(server.url, created.secret) as reader:
        assert isinstance(reader.list_agents(), object)
        with pytest.raises(ForbiddenError):
            reader.list_keys()  # admin only
        admin.revoke_key("k-round")
        with pytest.raises(UnauthorizedError) as caught:
            reader.list_agents()
    assert caught.value.status == 401 and caught.value.field == "Authorization"
    with pytest.raises(NotFoundError):
        admin.get_key("k-round")
    with pytest.raises(NotFoundError):
        admin.revoke_key("k-round")


# ---- agents --------------------------------------------------------------------------


def test_agents_round_trip(admin: Client) -> None:
    created = admin.put_agent("team/x/bot.v1", name="Bot")
    assert isinstance(created, Agent)
    assert (created.agent_id, created.name, created.revision) == ("team/x/bot.v1", "Bot", 0)
    renamed = admin.put_agent("team/x/bot.v1", name="Bot 2")
    assert renamed.name == "Bot 2" and renamed.memory_store_id == created.memory_store_id
    assert admin.get_agent("team/x/bot.v1") == renamed
    admin.put_agent("team/x/other")
    assert admin.get_agent("team/x/other").name == "team/x/other"

    page = admin.list_agents(prefix="team/x/")
    assert [a.agent_id for a in page.agents] == ["team/x/bot.v1", "team/x/other"]
    assert page.next_cursor is None
    first = admin.list_agents(prefix="team/x/", limit=1)
    assert len(first.agents) == 1 and first.next_cursor is not None
    assert [a.agent_id for a in admin.iter_agents(prefix="team/x/", limit=1)] == [
        "team/x/bot.v1",
        "team/x/other",
    ]

    admin.delete_agent("team/x/other")
    with pytest.raises(NotFoundError):
        admin.get_agent("team/x/other")
    assert [a.agent_id for a in admin.iter_agents(prefix="team/x/")] == ["team/x/bot.v1"]


def test_scoped_key_lists_only_its_agents(server: MemfsServer, admin: Client) -> None:
    for name in ("a1", "a2", "a3", "a4", "a5", "b1", "b2", "b3"):
        admin.put_agent(f"short/{name[0]}/{name}")
    key = admin.create_key("k-short", ["memories:read", "agents:short/b"])
    with Client(server.url, key.secret) as scoped:
        found = [a.agent_id for a in scoped.iter_agents(prefix="short/", limit=2)]
    assert found == ["short/b/b1", "short/b/b2", "short/b/b3"]


def test_iterators_stop_only_on_a_null_cursor() -> None:
    # Pages may come back short, even empty, before the end: only nextCursor = null ends.
    pages = {
        None: (["m/1", "m/2"], "c1"),
        "c1": ([], "c2"),
        "c2": (["m/3"], "c3"),
        "c3": ([], None),
    }
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        cursor = request.url.params.get("cursor")
        seen.append(cursor)
        names, next_cursor = pages[cursor]
        memories = [
            {"path": f"/memories/{n}.md", "bytes": 1, "contentSha256": "0" * 64,
             "description": None, "version": 1, "updatedAt": "2025-01-01T00:00:00.000000Z"}
            for n in names
        ]  # fmt: skip
        return httpx.Response(
            200, json={"memories": memories, "folders": [], "nextCursor": next_cursor}
        )

    with Client("http://memfs.test", "k", transport=httpx.MockTransport(handler)) as client:
        found = [m.path for m in client.iter_memories("a", limit=2)]
    assert found == ["/memories/m/1.md", "/memories/m/2.md", "/memories/m/3.md"]
    assert seen == [None, "c1", "c2", "c3"]


# ---- memories ------------------------------------------------------------------------

NOTE = "---\ndescription: Naming rules\nteam: core\n---\n# Naming\n\nUse snake_case.\n"


def test_memory_round_trip(admin: Client, agent: str) -> None:
    path = "/memories/conventions/naming.md"
    written = admin.put_memory(agent, path, NOTE, if_none_match=True, message="first")
    assert isinstance(written, MemoryWrite)
    assert written.created and written.version == 1 and written.revision == 1
    assert written.content_sha256 == sha(NOTE.encode()) and written.bytes == len(NOTE)
    assert written.description == "Naming rules"

    memory = admin.get_memory(agent, path)
    assert memory.content == NOTE and memory.metadata == {"team": "core"}
    assert memory.etag == f'"{written.content_sha256}"'
    assert admin.get_memory_text(agent, "conventions/naming.md") == NOTE.encode()

    # bytes in, If-Match with the bare sha or the quoted ETag
    v2 = NOTE.replace("snake_case", "kebab-case").encode()
    updated = admin.put_memory(agent, path, v2, if_match=memory.content_sha256, message="second")
    assert not updated.created and updated.version == 2
    same = admin.put_memory(agent, path, v2, if_match=f'"{updated.content_sha256}"')
    assert same.version == 2  # identical content: a no-op answering the current version

    assert admin.get_memory(agent, path, version=1).content == NOTE
    assert admin.get_memory_text(agent, path, version=1) == NOTE.encode()
    assert admin.get_memory_text(agent, path) == v2

    with pytest.raises(PreconditionFailedError) as stale:
        admin.put_memory(agent, path, "x", if_match=memory.content_sha256)
    assert stale.value.status == 412 and stale.value.code == "precondition_failed"
    with pytest.raises(PreconditionFailedError):
        admin.put_memory(agent, path, "x", if_none_match=True)
    with pytest.raises(PreconditionFailedError):
        admin.delete_memory(agent, path, if_match=memory.content_sha256)

    admin.delete_memory(agent, path, if_match=updated.content_sha256, message="gone")
    with pytest.raises(NotFoundError):
        admin.get_memory(agent, path)
    versions = list(admin.iter_versions(agent, path))
    assert [(v.version, v.operation, v.message, v.actor) for v in versions] == [
        (1, "created", "first", "admin"),
        (2, "modified", "second", "admin"),
        (3, "deleted", "gone", "admin"),
    ]
    assert versions[0].content_sha256 == written.content_sha256
    assert versions[0].valid_to == versions[1].valid_from and versions[2].valid_to is None
    page = admin.list_versions(agent, "conventions/naming.md", limit=2)
    assert [v.version for v in page.versions] == [1, 2] and page.next_cursor is not None
    rest = admin.list_versions(agent, path, limit=2, cursor=page.next_cursor)
    assert [v.version for v in rest.versions] == [3] and rest.next_cursor is None


def test_paths_are_encoded_segment_by_segment(admin: Client, agent: str) -> None:
    path = "/memories/odd names/é 100% ?#&=+;.md"
    admin.put_memory(agent, path, "odd\n")
    assert admin.get_memory(agent, path).path == path
    assert [m.path for m in admin.iter_memories(agent)] == [path]
    # '..' is sent encoded, so no URL normalisation turns it into another path
    with pytest.raises(InvalidRequestError) as caught:
        admin.put_memory(agent, "/memories/odd names/../escape.md", "x")
    assert caught.value.field == "path"
    with pytest.raises(ValueError):
        admin.get_memory(agent, "/etc/passwd")


def test_iter_memories_pages_to_the_end(admin: Client, agent: str) -> None:
    paths = [f"/memories/notes/{i:02}.md" for i in range(25)]
    for path in paths:
        admin.put_memory(agent, path, f"note {path}\n")
    admin.put_memory(agent, "/memories/notes2/other.md", "not in notes/\n")

    first = admin.list_memories(agent, path_prefix="notes", limit=10, include_total=True)
    assert len(first.memories) == 10 and first.total == 25 and first.next_cursor is not None
    sizes = [len(first.memories)]
    cursor: str | None = first.next_cursor
    while cursor is not None:
        page = admin.list_memories(agent, path_prefix="notes", limit=10, cursor=cursor)
        sizes.append(len(page.memories))
        cursor = page.next_cursor
    assert sizes == [10, 10, 5]
    assert [m.path for m in admin.iter_memories(agent, path_prefix="notes", limit=10)] == paths
    assert len(list(admin.iter_memories(agent, limit=7))) == 26

    shallow = admin.list_memories(agent, depth=1)
    assert shallow.folders == ("/memories/notes", "/memories/notes2") and shallow.memories == ()
    admin.put_memory(agent, "/memories/notes/tagged.md", "---\nkind: x\n---\nbody\n")
    assert [m.path for m in admin.iter_memories(agent, metadata={"kind": "x"})] == [
        "/memories/notes/tagged.md"
    ]


def test_search_and_iter_search(admin: Client, agent: str) -> None:
    scope = agent.rsplit("/", 1)[0]  # users/tN: this test's agent alone
    for i in range(12):
        admin.put_memory(agent, f"/memories/n{i:02}.md", f"---\nkind: k{i % 2}\n---\nlemur {i}\n")
    admin.put_memory(agent, "/memories/top.md", "---\ndescription: lemur facts\n---\nlemur\n")
    page = admin.search("lemur", agent_id=agent, limit=5)
    assert isinstance(page, SearchPage) and len(page.results) == 5 and page.next_page_token
    best = page.results[0]
    assert isinstance(best, SearchResult) and best.path == "/memories/top.md"
    assert best.agent_id == agent and best.version == 1 and best.description == "lemur facts"
    assert isinstance(best.score, float) and "«lemur»" in best.snippet
    every = list(admin.iter_search("lemur", agent_id=agent, limit=5))
    assert len(every) == 13 and len({r.path for r in every}) == 13
    assert [r.path for r in admin.iter_search("lemur", scope_id=scope)] == [r.path for r in every]
    kinds = admin.search("lemur", agent_id=agent, metadata={"kind": "k1"}, path_prefix="/memories")
    assert len(kinds.results) == 6 and kinds.next_page_token == ""
    with pytest.raises(InvalidRequestError) as caught:
        admin.search('"open', agent_id=agent)
    assert caught.value.field == "query"
    with pytest.raises(ValueError):
        admin.search("lemur")


def test_summary_and_memory_command(admin: Client, agent: str) -> None:
    summary = admin.memory_summary(agent)
    assert (summary.agent_id, summary.agent_name, summary.state) == (agent, "Assistant", "waiting")
    assert summary.memory_count == 0 and summary.last_updated_at is None

    created = admin.memory_command(
        agent, {"command": "create", "path": "/memories/todo.md", "file_text": "one\ntwo\n"}
    )
    assert created == CommandResult(True, "File created successfully at: /memories/todo.md")
    ok, text = admin.memory_command(agent, {"command": "view", "path": "/memories/todo.md"})
    assert ok and text.endswith("     1\tone\n     2\ttwo\n     3\t")
    refused = admin.memory_command(agent, {"command": "view", "path": "/elsewhere"})
    assert refused == (False, "Path must start with /memories, got: /elsewhere")

    summary = admin.memory_summary(agent)
    assert (summary.memory_count, summary.total_bytes, summary.revision) == (1, 8, 1)
    assert summary.state == "idle" and summary.last_updated_at is not None


# ---- errors --------------------------------------------------------------------------


def test_errors_carry_the_envelope(admin: Client, agent: str) -> None:
    with pytest.raises(NotFoundError) as missing:
        admin.get_memory(agent, "/memories/nope.md")
    err = missing.value
    assert (err.status, err.code, err.retryable) == (404, "not_found", False)
    assert err.request_id is not None and err.request_id.startswith("req_")
    assert "nope.md" in err.message and err.request_id in str(err)

    with pytest.raises(InvalidRequestError) as bad_limit:
        admin.list_memories(agent, limit=0)
    assert (bad_limit.value.code, bad_limit.value.field) == ("invalid_request", "limit")

    with pytest.raises(InvalidRequestError) as bad_cursor:
        admin.list_memories(agent, cursor="forged")
    assert bad_cursor.value.field == "cursor"
    other = admin.put_agent(f"{agent}-other")
    admin.put_memory(agent, "/memories/a.md", "a")
    admin.put_memory(agent, "/memories/b.md", "b")
    cursor = admin.list_memories(agent, limit=1).next_cursor
    assert cursor is not None
    with pytest.raises(InvalidRequestError) as foreign:
        admin.list_memories(other.agent_id, cursor=cursor)
    assert foreign.value.field == "cursor"

    with pytest.raises(ConflictError):
        admin.put_memory(agent, "/memories/a.md/inside.md", "file under a file")
    with pytest.raises(NotFoundError) as no_agent:
        admin.put_memory("no/such/agent", "/memories/x.md", "x")
    assert no_agent.value.field is not None
    with pytest.raises(InvalidRequestError) as bad_id:
        admin.get_agent("bad agent id")
    assert bad_id.value.field == "agentId" and isinstance(bad_id.value, ApiError)


def test_subject_narrowed_client_is_forbidden_and_writes_nothing(
    server: MemfsServer, admin: Client, agent: str
) -> None:
    owner = agent.rsplit("/", 1)[0]
    key = admin.create_key(
        f"k-{owner.replace('/', '-')}", ["memories:read", "memories:write", f"agents:{owner}"]
    )
    with Client(
        server.url, key.secret, subject="bob", scopes=["memories:read", f"agents:{owner}"]
    ) as bob:
        with pytest.raises(ForbiddenError) as caught:
            bob.put_memory(agent, "/memories/bob.md", "should not land")
        assert caught.value.status == 403 and caught.value.field == "scopes"
        with pytest.raises(ForbiddenError):
            bob.memory_command(
                agent, {"command": "create", "path": "/memories/bob.md", "file_text": "x"}
            )
        assert bob.list_memories(agent).memories == ()  # reading is allowed

        alice = bob.with_subject("alice", f"memories:read memories:write agents:{owner}")
        written = alice.put_memory(agent, "/memories/alice.md", "by alice")
        alice.close()  # shares bob's connections; bob stays usable
        assert bob.get_memory(agent, "/memories/alice.md").content == "by alice"
        with pytest.raises(ForbiddenError) as wider:
            bob.with_subject("eve", ["memories:read", "agents:*"]).list_agents()
        assert wider.value.field == "Memfs-Scopes"

    with pytest.raises(NotFoundError):
        admin.get_memory(agent, "/memories/bob.md")
    assert [v.actor for v in admin.iter_versions(agent, "/memories/alice.md")] == ["subject:alice"]
    assert admin.memory_summary(agent).revision == written.revision == 1

    with pytest.raises(ValueError):
        Client(server.url, key.secret, subject="bob")


def test_update_memory_retries_on_a_concurrent_change(
    server: MemfsServer, admin: Client, agent: str
) -> None:
    path = "/memories/counter.md"
    admin.put_memory(agent, path, "items:\n")
    calls: list[str] = []

    def append(text: str) -> str:
        calls.append(text)
        if len(calls) == 1:  # another writer commits between our read and our write
            with Client(server.url, server.admin_key) as other:
                other.put_memory(agent, path, text + "- theirs\n")
        return text + "- ours\n"

    result = admin.update_memory(agent, path, append, message="append")
    assert calls == ["items:\n", "items:\n- theirs\n"]
    assert admin.get_memory_text(agent, path) == b"items:\n- theirs\n- ours\n"
    assert result.version == 3

    def always_stale(text: str) -> str:
        admin.put_memory(agent, path, text + "x")
        return text + "y"

    with pytest.raises(PreconditionFailedError):
        admin.update_memory(agent, path, always_stale, attempts=2)

    made = admin.update_memory(agent, "/memories/new.md", lambda t: t + "1\n", default="")
    assert made.created and admin.get_memory_text(agent, "/memories/new.md") == b"1\n"
    with pytest.raises(NotFoundError):
        admin.update_memory(agent, "/memories/absent.md", lambda t: t)


# ---- without the server: odd answers and no answer ---------------------------------


def _mock(status: int, body: bytes, content_type: str, **headers: str) -> Client:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["Memfs-Protocol"] == "1"
        assert request.headers["Authorization"] == "Bearer secret"
        return httpx.Response(
            status, content=body, headers={"Content-Type": content_type, **headers}
        )

    return Client("http://memfs.test", "secret", transport=httpx.MockTransport(handler))


def test_non_json_error_bodies() -> None:
    gateway = _mock(502, b"<html>Bad Gateway</html>", "text/html", **{"Memfs-Request-Id": "req_1"})
    with gateway as c, pytest.raises(UnavailableError) as caught:
        c.get_agent("a")
    err = caught.value
    assert (err.status, err.code, err.retryable, err.request_id) == (
        502,
        "unavailable",
        True,
        "req_1",
    )
    assert "Bad Gateway" in err.message and err.field is None

    with _mock(418, b"", "text/plain") as c, pytest.raises(ApiError) as teapot:
        c.get_agent("a")
    assert type(teapot.value) is ApiError and teapot.value.status == 418

    envelope = b'{"code": "brand_new", "message": "m", "details": {"requestId": "req_2"}}'
    with _mock(409, envelope, "application/json") as c, pytest.raises(ConflictError) as odd:
        c.get_agent("a")
    assert (odd.value.code, odd.value.request_id) == ("brand_new", "req_2")

    with _mock(200, b"not json", "text/plain") as c, pytest.raises(UnexpectedResponseError):
        c.get_agent("a")
    wrong = _mock(200, b'{"agentId": 1}', "application/json")
    with wrong as c, pytest.raises(UnexpectedResponseError):
        c.get_agent("a")


def test_no_server_is_a_transport_error() -> None:
    with (
        Client(f"http://127.0.0.1:{free_port()}", "k") as c,
        pytest.raises(TransportError) as caught,
    ):
        c.list_agents()
    assert caught.value.retryable and isinstance(caught.value.__cause__, httpx.ConnectError)
