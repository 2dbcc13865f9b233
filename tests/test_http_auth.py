"""Keys, subjects and scopes over HTTP (design §3 "Keys, subjects, scopes")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from http_fixtures import (
    ADMIN_KEY,
    Api,
    agent_url,
    assert_error,
    memory_url,
    open_api,
    sha,
)

ALICE = "users/alice"
ALICE_X = "users/alice/x"
ALICEX = "users/alicex"
BOB = "users/bob"


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with open_api(tmp_path) as opened:
        for agent_id in (ALICE, ALICE_X, ALICEX, BOB):
            opened.create_agent(agent_id)
        yield opened


def _write_notes(api: Api) -> None:
    """One note per agent: ``/memories/note.md`` holding ``# <agent id>``."""
    for agent_id in (ALICE, ALICE_X, ALICEX, BOB):
        api.must_write("/memories/note.md", f"# {agent_id}\n", agent_id)


def _memory_count(api: Api, agent_id: str) -> int:
    response = api.get(agent_url(agent_id, "/memories"))
    assert response.status_code == 200
    return len(response.json()["memories"])


# ---- authentication --------------------------------------------------------------------


BAD_AUTHORIZATION = [
    None,
    "",
    "Bearer",
    "Bearer ",
    "Basic dXNlcjpwYXNz",
    f"Token {ADMIN_KEY}",
    "Bearer unknown-key-0123456789",
    "Bearer mfs_ghost~abcdef",
    "Bearer mfs_../../etc~passwd",
    f"Bearer {ADMIN_KEY}x",
    f"Bearer {ADMIN_KEY[:-1]}",
]


def test_missing_unknown_or_malformed_authorization_is_401(api: Api) -> None:
    for header in BAD_AUTHORIZATION:
        headers = {} if header is None else {"Authorization": header}
        response = api.get(agent_url(ALICE), auth=None, headers=headers)
        assert_error(response, 401, "unauthorized", field="Authorization")


def test_401_writes_nothing(api: Api) -> None:
    response = api.write("/memories/new.md", "x", agent_id=ALICE, auth="bad-key-bad-key-bad")
    assert_error(response, 401, "unauthorized")
    assert api.get(memory_url("/memories/new.md", ALICE)).status_code == 404


def test_admin_key_can_do_everything(api: Api) -> None:
    assert api.put(agent_url("org/new"), json={"name": "New"}).status_code == 201
    assert api.write("/memories/a.md", "a", agent_id="org/new").status_code == 201
    assert api.get(memory_url("/memories/a.md", "org/new")).status_code == 200
    assert api.get(agent_url("org/new", "/memory")).status_code == 200
    assert api.get(agent_url("org/new", "/versions"), params={"path": "a.md"}).status_code == 200
    command = {"command": "view", "path": "/memories"}
    assert api.post(agent_url("org/new", "/memory:command"), json=command).status_code == 200
    assert api.delete(memory_url("/memories/a.md", "org/new")).status_code == 204
    assert api.make_key("k1", ["memories:read", "agents:*"])
    assert api.get("/v1/tenant/keys").status_code == 200
    assert api.get("/v1/tenant/keys/k1").status_code == 200
    assert api.delete("/v1/tenant/keys/k1").status_code == 204
    assert api.delete(agent_url("org/new")).status_code == 204


# ---- key management -----------------------------------------------------------------


def test_put_key_shows_the_secret_once_and_stores_only_a_hash(api: Api) -> None:
    response = api.put(
        "/v1/tenant/keys/reader-1",
        json={"scopes": ["memories:read", f"agents:{ALICE}"], "description": "for the bot"},
    )
    assert response.status_code == 201, response.text
    created = response.json()
    secret = created["secret"]
    assert {"keyId", "secret", "scopes", "createdAt"} <= set(created)
    assert created["keyId"] == "reader-1"
    assert created["scopes"] == ["memories:read", f"agents:{ALICE}"]
    assert created["createdAt"].endswith("Z")
    assert len(secret) >= 32

    # The secret works ...
    assert api.get(agent_url(ALICE), auth=secret).status_code == 200
    # ... and is never shown again.
    listing = api.get("/v1/tenant/keys")
    one = api.get("/v1/tenant/keys/reader-1")
    for response in (listing, one):
        assert response.status_code == 200
        assert secret not in response.text
        assert "secret" not in response.text.lower()
    assert [k["keyId"] for k in listing.json()["keys"]] == ["reader-1"]
    assert listing.json()["nextCursor"] is None
    assert one.json()["description"] == "for the bot"

    # On disk: a hash of the secret, never the secret.
    files = list((api.data / "keys").iterdir())
    assert [f.name for f in files] == ["reader-1.json"]
    stored = files[0].read_text()
    assert secret not in stored
    assert secret.split("~", 1)[-1] not in stored
    assert sha(secret) in stored
    assert json.loads(stored)["keyId"] == "reader-1"


def test_put_key_on_an_existing_id_is_409_and_keeps_the_old_secret(api: Api) -> None:
    secret = api.make_key("dup", ["memories:read", "agents:*"])
    response = api.put("/v1/tenant/keys/dup", json={"scopes": ["memories:write", "agents:*"]})
    assert_error(response, 409, "conflict", field="keyId")
    assert api.get(agent_url(ALICE), auth=secret).status_code == 200


def test_put_key_refuses_bad_input(api: Api) -> None:
    cases: list[tuple[str, object, str]] = [
        ("bad%20key", {"scopes": ["memories:read"]}, "keyId"),
        ("k", {"scopes": "memories:read"}, "scopes"),
        ("k", {"scopes": ["memories:delete"]}, "scopes"),
        ("k", {"scopes": ["agents:users//x"]}, "scopes"),
        ("k", {"scopes": ["memories:read"], "admin": True}, "admin"),
        ("k", {}, "scopes"),
        ("k", {"scopes": ["memories:read"], "description": 5}, "description"),
    ]
    for key_id, doc, field in cases:
        response = api.put(f"/v1/tenant/keys/{key_id}", json=doc)
        assert_error(response, 400, "invalid_request", field=field)
    assert not (api.data / "keys").exists() or not list((api.data / "keys").iterdir())


def test_key_listing_pages_with_limit_and_cursor(api: Api) -> None:
    for key_id in ("k-c", "k-a", "k-b"):
        api.make_key(key_id, ["memories:read", "agents:*"])
    pages = api.walk("/v1/tenant/keys", "keys", {"limit": "2"})
    assert [[k["keyId"] for k in p["keys"]] for p in pages] == [["k-a", "k-b"], ["k-c"]]
    assert pages[-1]["nextCursor"] is None
    exact = api.get("/v1/tenant/keys", params={"limit": "3"}).json()
    assert len(exact["keys"]) == 3 and exact["nextCursor"] is None
    body, mac = pages[0]["nextCursor"].rsplit(".", 1)
    # The MAC's first character carries six whole bits (the last also holds padding, and
    # could already be the replacement).
    altered = f"{body}.{'A' if mac[0] != 'A' else 'B'}{mac[1:]}"
    assert_error(
        api.get("/v1/tenant/keys", params={"cursor": altered}),
        400,
        "invalid_request",
        field="cursor",
    )
    foreign = api.get("/v1/agents", params={"limit": "1"}).json()["nextCursor"]
    assert_error(
        api.get("/v1/tenant/keys", params={"cursor": foreign}), 400, "invalid_request", "cursor"
    )
    assert_error(api.get("/v1/tenant/keys", params={"limit": "0"}), 400, "invalid_request")


def test_revoked_key_is_401(api: Api) -> None:
    secret = api.make_key("temp", ["memories:read", "agents:*"])
    assert api.get(agent_url(ALICE), auth=secret).status_code == 200
    assert api.delete("/v1/tenant/keys/temp").status_code == 204
    assert_error(api.get(agent_url(ALICE), auth=secret), 401, "unauthorized")
    assert_error(api.get("/v1/tenant/keys/temp"), 404, "not_found")
    assert_error(api.delete("/v1/tenant/keys/temp"), 404, "not_found")
    # A new key under the same id has a new secret; the old one stays dead.
    fresh = api.make_key("temp", ["memories:read", "agents:*"])
    assert fresh != secret
    assert_error(api.get(agent_url(ALICE), auth=secret), 401, "unauthorized")
    assert api.get(agent_url(ALICE), auth=fresh).status_code == 200


def test_non_admin_cannot_manage_keys_or_delete_agents(api: Api) -> None:
    everything = [
        "memories:read",
        "memories:write",
        "inspect",
        "triggers:write",
        "runs:read",
        "agents:*",
    ]
    secret = api.make_key("power", everything)
    assert_error(api.get("/v1/tenant/keys", auth=secret), 403, "forbidden")
    assert_error(api.get("/v1/tenant/keys/power", auth=secret), 403, "forbidden")
    made = api.put("/v1/tenant/keys/mine", auth=secret, json={"scopes": ["memories:read"]})
    assert_error(made, 403, "forbidden")
    assert_error(api.delete("/v1/tenant/keys/power", auth=secret), 403, "forbidden")
    assert_error(api.delete(agent_url(BOB), auth=secret), 403, "forbidden")
    assert api.get(agent_url(BOB)).status_code == 200
    assert [k["keyId"] for k in api.get("/v1/tenant/keys").json()["keys"]] == ["power"]
    assert api.get(agent_url(ALICE), auth=secret).status_code == 200


# ---- scopes ----------------------------------------------------------------------------


def test_read_key_covers_its_scope_on_segment_boundaries(api: Api) -> None:
    _write_notes(api)
    secret = api.make_key("alice-reader", ["memories:read", f"agents:{ALICE}"])
    for agent_id in (ALICE, ALICE_X):
        assert api.get(agent_url(agent_id), auth=secret).status_code == 200
        read = api.get(memory_url("/memories/note.md", agent_id), auth=secret)
        assert read.status_code == 200
        assert read.json()["content"] == f"# {agent_id}\n"
        assert api.get(agent_url(agent_id, "/memories"), auth=secret).status_code == 200
    for agent_id in (ALICEX, BOB):
        for url in (
            agent_url(agent_id),
            agent_url(agent_id, "/memories"),
            memory_url("/memories/note.md", agent_id),
            agent_url(agent_id, "/memory"),
        ):
            response = api.get(url, auth=secret)
            assert_error(response, 403, "forbidden")
            assert f"# {agent_id}" not in response.text
    # An agent outside the scope is 403 whether or not it exists (no probing).
    assert_error(api.get(agent_url("users/bobby"), auth=secret), 403, "forbidden")


def test_read_key_cannot_write_and_nothing_is_written(api: Api) -> None:
    _write_notes(api)
    secret = api.make_key("alice-reader", ["memories:read", f"agents:{ALICE}"])
    assert_error(api.write("/memories/new.md", "x", agent_id=ALICE, auth=secret), 403, "forbidden")
    assert_error(
        api.write("/memories/note.md", "changed", agent_id=ALICE, auth=secret), 403, "forbidden"
    )
    assert_error(api.delete(memory_url("/memories/note.md", ALICE), auth=secret), 403, "forbidden")
    create = {"command": "create", "path": "/memories/tool.md", "file_text": "x"}
    response = api.post(agent_url(ALICE, "/memory:command"), auth=secret, json=create)
    assert_error(response, 403, "forbidden")
    assert_error(api.put(agent_url(ALICE), auth=secret, json={"name": "renamed"}), 403, "forbidden")
    assert_error(api.put(agent_url("users/alice/new"), auth=secret, json={}), 403, "forbidden")

    assert _memory_count(api, ALICE) == 1
    assert api.get(memory_url("/memories/note.md", ALICE)).json()["version"] == 1
    assert api.get(agent_url(ALICE)).json()["name"] == ALICE
    assert api.get(agent_url("users/alice/new")).status_code == 404


def test_write_key_without_read_cannot_read(api: Api) -> None:
    secret = api.make_key("writer", ["memories:write", f"agents:{ALICE}"])
    assert api.write("/memories/w.md", "w", agent_id=ALICE, auth=secret).status_code == 201
    assert_error(
        api.get(memory_url("/memories/w.md", ALICE), auth=secret), 403, "forbidden", "scopes"
    )
    assert_error(api.write("/memories/w.md", "w", agent_id=BOB, auth=secret), 403, "forbidden")
    assert api.get(memory_url("/memories/w.md", BOB)).status_code == 404


def test_key_writes_are_recorded_with_the_key_as_actor(api: Api) -> None:
    secret = api.make_key("bot-7", ["memories:write", f"agents:{ALICE}"])
    assert api.write("/memories/k.md", "k", agent_id=ALICE, auth=secret).status_code == 201
    assert api.versions("/memories/k.md", ALICE)[0]["actor"] == "key:bot-7"


def test_scoped_agent_listing_shows_only_covered_agents(api: Api) -> None:
    secret = api.make_key("alice-reader", ["memories:read", f"agents:{ALICE}"])
    response = api.get("/v1/agents", auth=secret)
    assert response.status_code == 200
    assert [a["agentId"] for a in response.json()["agents"]] == [ALICE, ALICE_X]
    assert response.json()["nextCursor"] is None


def test_scoped_agent_listing_pages_over_covered_agents_only(api: Api) -> None:
    secret = api.make_key("alice-reader", ["memories:read", f"agents:{ALICE}"])
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params = {"limit": "1", **({"cursor": cursor} if cursor else {})}
        page = api.get("/v1/agents", auth=secret, params=params).json()
        pages += 1
        assert page["agents"], "a page before the end must not be empty"
        seen += [a["agentId"] for a in page["agents"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == [ALICE, ALICE_X]
    assert pages == 2


# ---- narrowing: Memfs-Subject + Memfs-Scopes ------------------------------------------


@pytest.mark.parametrize(
    ("headers", "field"),
    [
        ({"Memfs-Subject": "alice"}, "Memfs-Scopes"),
        ({"Memfs-Scopes": "memories:read agents:users/alice"}, "Memfs-Subject"),
    ],
)
def test_subject_and_scopes_go_together(api: Api, headers: dict[str, str], field: str) -> None:
    response = api.get(agent_url(ALICE), headers=headers)
    assert_error(response, 400, "invalid_request", field=field)
    write = api.write("/memories/s.md", "s", agent_id=ALICE, headers=headers)
    assert_error(write, 400, "invalid_request")
    assert api.get(memory_url("/memories/s.md", ALICE)).status_code == 404


def test_narrowing_to_more_than_the_key_holds_is_403(api: Api) -> None:
    secret = api.make_key("alice-reader", ["memories:read", f"agents:{ALICE}"])
    for scopes in (
        "memories:write agents:users/alice",  # an action the key lacks
        "memories:read agents:users",  # a wider agent scope
        "memories:read agents:*",  # every agent
        "memories:read agents:users/bob",  # another person
    ):
        headers = {"Memfs-Subject": "alice", "Memfs-Scopes": scopes}
        response = api.get(agent_url(ALICE), auth=secret, headers=headers)
        assert_error(response, 403, "forbidden", field="Memfs-Scopes")
        write = api.write("/memories/w.md", "w", agent_id=ALICE, auth=secret, headers=headers)
        assert_error(write, 403, "forbidden")
    assert api.get(memory_url("/memories/w.md", ALICE)).status_code == 404


def test_malformed_subject_or_scopes_is_400(api: Api) -> None:
    for subject, scopes, field in (
        ("alice", "", "Memfs-Scopes"),
        ("alice", "   ", "Memfs-Scopes"),
        ("alice", "memories:delete", "Memfs-Scopes"),
        ("alice", "agents:users//a", "Memfs-Scopes"),
        ("", "memories:read", "Memfs-Subject"),
        ("x" * 257, "memories:read", "Memfs-Subject"),
    ):
        headers = {"Memfs-Subject": subject, "Memfs-Scopes": scopes}
        response = api.get(agent_url(ALICE), headers=headers)
        assert_error(response, 400, "invalid_request", field=field)


def test_narrowing_to_a_subset_limits_the_request(api: Api) -> None:
    secret = api.make_key("team", ["memories:read", "memories:write", "agents:users"])
    narrowed = {"Memfs-Subject": "alice", "Memfs-Scopes": f"memories:read agents:{ALICE}"}
    assert api.get(agent_url(ALICE_X), auth=secret, headers=narrowed).status_code == 200
    assert_error(api.get(agent_url(BOB), auth=secret, headers=narrowed), 403, "forbidden")
    assert api.get(agent_url(BOB), auth=secret).status_code == 200  # the key itself can
    response = api.write("/memories/n.md", "n", agent_id=ALICE, auth=secret, headers=narrowed)
    assert_error(response, 403, "forbidden")
    assert api.get(memory_url("/memories/n.md", ALICE)).status_code == 404


def test_narrowed_writes_record_the_subject_as_actor(api: Api) -> None:
    secret = api.make_key("team", ["memories:read", "memories:write", "agents:users"])
    narrowed = {"Memfs-Subject": "alice", "Memfs-Scopes": f"memories:write agents:{ALICE}"}
    created = api.write("/memories/s.md", "v1", agent_id=ALICE, auth=secret, headers=narrowed)
    assert created.status_code == 201
    updated = api.write("/memories/s.md", "v2", agent_id=ALICE, auth=secret, headers=narrowed)
    assert updated.status_code == 200
    deleted = api.delete(memory_url("/memories/s.md", ALICE), auth=secret, headers=narrowed)
    assert deleted.status_code == 204
    actors = [v["actor"] for v in api.versions("/memories/s.md", ALICE)]
    assert actors == ["subject:alice"] * 3


def test_admin_can_narrow_too(api: Api) -> None:
    narrowed = {"Memfs-Subject": "carol", "Memfs-Scopes": f"memories:write agents:{ALICE}"}
    assert api.write("/memories/c.md", "c", agent_id=ALICE, headers=narrowed).status_code == 201
    assert api.versions("/memories/c.md", ALICE)[0]["actor"] == "subject:carol"
    assert_error(api.get(agent_url(ALICE), headers=narrowed), 403, "forbidden")
    assert_error(api.get("/v1/tenant/keys", headers=narrowed), 403, "forbidden")
    assert_error(api.delete(agent_url(BOB), headers=narrowed), 403, "forbidden")
    assert api.get(agent_url(BOB)).status_code == 200
