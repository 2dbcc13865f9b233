"""The console without a browser: headers, sessions, CSRF, cookies, scopes, refusals.

The browser tests (tests/test_console_browser.py) drive the same pages in Chromium;
these are the fast checks of what each response must carry and what it must refuse.
"""

from __future__ import annotations

import json
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from console_helpers import csrf_of, sign_in
from http_fixtures import ADMIN_KEY, AGENT, Api, agent_url, enc, open_api
from memfs.config import load
from memfs.console import pages, render
from memfs.core.store import Put
from memfs.domain.commits import LOG_HEAD
from memfs.domain.webhook_verify import sign
from memfs.http.app import build

BOB = "users/bob/assistant"
PAGE = f"/console/agents/{enc(AGENT)}"


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with open_api(tmp_path) as opened:
        opened.create_agent()
        opened.create_agent(BOB)
        opened.must_write("/memories/notes/alice.md", "# Alice\nalice's secret plan\n")
        opened.must_write("/memories/notes/alice.md", "# Alice\nalice's second plan\n")
        opened.must_write("/memories/bob.md", "bob's secret plan", agent_id=BOB)
        yield opened


def signed_in(api: Api, key: str = ADMIN_KEY) -> TestClient:
    answer = sign_in(api.client, key)
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/console/agents"
    return api.client


def session_files(api: Api) -> list[Path]:
    folder = api.data / "console" / "sessions"
    return sorted(folder.iterdir()) if folder.exists() else []


def assert_strict_headers(response: object) -> None:
    headers = response.headers  # type: ignore[attr-defined]
    csp = headers["content-security-policy"]
    assert "default-src 'self'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "no-referrer"


def test_every_console_response_sends_the_strict_headers(api: Api) -> None:
    client = api.client
    answers = [
        client.get("/console/agents", follow_redirects=False),  # redirect to sign in
        client.get("/console/login"),
        client.get("/console/static/console.css"),
        client.get("/console/no-such-page"),
        client.post("/console/login", data={"key": "x"}),  # CSRF refusal
    ]
    signed_in(api)
    answers += [
        client.get("/console/agents"),
        client.get(PAGE),
        client.get(f"{PAGE}/memories/notes/alice.md"),
        client.get(f"{PAGE}/inspect"),
        client.get(f"{PAGE}/runs"),
        client.get(f"{PAGE}/memories/notes/missing.md"),  # 404 page
    ]
    for answer in answers:
        assert_strict_headers(answer)
    assert [a.status_code for a in answers] == [
        303,
        200,
        200,
        404,
        403,
        200,
        200,
        200,
        200,
        200,
        404,
    ]
    assert "<script" not in "".join(
        a.text for a in answers if "html" in a.headers.get("content-type", "")
    )


def test_pages_without_a_session_redirect_to_sign_in(api: Api) -> None:
    for url in ("/console/agents", PAGE, f"{PAGE}/inspect", "/console/scopes/users"):
        answer = api.client.get(url, follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"] == "/console/login"
        assert "alice" not in answer.text


def test_the_session_cookie_is_httponly_strict_expiring_and_holds_no_key(api: Api) -> None:
    answer = sign_in(api.client, ADMIN_KEY)
    cookie = next(
        c for c in answer.headers.get_list("set-cookie") if c.startswith("memfs_console=")
    )
    flags = {part.strip().split("=")[0].lower() for part in cookie.split(";")}
    assert {"httponly", "max-age", "path"} <= flags
    assert "samesite=strict" in cookie.lower()
    assert "secure" not in flags  # plain http here; the https test below
    assert ADMIN_KEY not in cookie
    # The server keeps the session: one private file, without the key's secret.
    [file] = session_files(api)
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert ADMIN_KEY not in file.read_text()
    assert set(json.loads(file.read_text())) == {"keyId", "fingerprint", "csrf", "expiresAt"}


def test_the_cookie_is_secure_over_https(tmp_path: Path) -> None:
    app = build(load({}, {"data": str(tmp_path / "data"), "admin_key": ADMIN_KEY}))
    app.run_runs = False
    with TestClient(app, base_url="https://testserver") as client:
        answer = sign_in(client, ADMIN_KEY)
        cookie = next(
            c for c in answer.headers.get_list("set-cookie") if c.startswith("memfs_console=")
        )
        assert "secure" in {p.strip().lower() for p in cookie.split(";")}


def test_sign_in_without_the_csrf_token_is_refused_and_makes_no_session(api: Api) -> None:
    api.client.get("/console/login")  # the CSRF cookie is set, but the field is missing
    for data in ({"key": ADMIN_KEY}, {"key": ADMIN_KEY, "csrf": "forged"}):
        answer = api.client.post("/console/login", data=data, follow_redirects=False)
        assert answer.status_code == 403
        assert "memfs_console=" not in answer.headers.get("set-cookie", "")
    assert session_files(api) == []


def test_a_wrong_key_is_a_401_form_again(api: Api) -> None:
    answer = sign_in(api.client, "mk_nobody~nothing")
    assert answer.status_code == 401
    assert "unknown or revoked" in answer.text and 'name="key"' in answer.text
    assert session_files(api) == []


def test_sign_out_needs_the_csrf_token_and_then_ends_the_session(api: Api) -> None:
    client = signed_in(api)
    page = client.get("/console/agents")
    cookie = client.cookies.get("memfs_console")
    refused = client.post("/console/logout", data={"csrf": "forged"}, follow_redirects=False)
    assert refused.status_code == 403
    assert client.get("/console/agents", follow_redirects=False).status_code == 200
    done = client.post("/console/logout", data={"csrf": csrf_of(page.text)}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/console/login"
    assert session_files(api) == []
    # Replaying the old cookie gets the sign-in page, not the agents.
    client.cookies.set("memfs_console", cookie or "", path="/console")
    replay = client.get("/console/agents", follow_redirects=False)
    assert replay.status_code == 303 and replay.headers["location"] == "/console/login"


def test_revoking_the_key_ends_its_sessions(api: Api) -> None:
    secret = api.make_key("reader", ["memories:read", "agents:users/alice"])
    client = signed_in(api, secret)
    assert client.get(PAGE).status_code == 200
    assert api.delete("/v1/tenant/keys/reader").status_code == 204
    answer = client.get(PAGE, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/console/login"
    assert session_files(api) == []
    # A key made again under the same id is another key: the old session stays ended.
    client.cookies.clear()
    signed_in(api, secret := api.make_key("reader2", ["memories:read", "agents:*"]))
    assert secret not in "".join(p.read_text() for p in session_files(api))


def test_a_narrow_key_sees_only_its_scope(api: Api) -> None:
    secret = api.make_key("alice", ["memories:read", "agents:users/alice"])
    client = signed_in(api, secret)
    listing = client.get("/console/agents")
    assert AGENT in listing.text and BOB not in listing.text
    bob = f"/console/agents/{enc(BOB)}"
    for url in (
        bob,
        f"{bob}/memories/bob.md",
        f"{bob}/history",
        f"{bob}/inspect",
        f"{bob}/runs",
        "/console/scopes/users",
        "/console/scopes/users/inspect",
    ):
        answer = client.get(url)
        assert answer.status_code == 403, url
        assert "bob&#39;s secret" not in answer.text and "bob's secret" not in answer.text
    # Its own agent: memories yes; inspect and runs need their own scopes.
    assert client.get(f"{PAGE}/memories/notes/alice.md").status_code == 200
    assert client.get(f"{PAGE}/inspect").status_code == 403
    assert client.get(f"{PAGE}/runs").status_code == 403
    assert client.get("/console/scopes/users%2Falice").status_code == 200


def test_hostile_requests_get_a_4xx_and_change_nothing(api: Api) -> None:
    client = signed_in(api)
    before = api.get(f"/v1/agents/{enc(AGENT)}").json()["revision"]
    cases = {
        "/console/agents/bad%ZZ": 400,
        "/console/agents/%2E%2E": 400,
        f"{PAGE}/memories/%2E%2E/%2E%2E/etc/passwd": 400,
        f"{PAGE}/memories/notes/alice.md?version=0": 400,
        f"{PAGE}/memories/notes/alice.md?version=99": 404,
        f"{PAGE}/memories/notes/alice.md?from=1": 400,
        f"{PAGE}/memories/notes/alice.md?nope=1": 400,
        f"{PAGE}?cursor=forged": 400,
        f"{PAGE}/inspect?asOf=yesterday": 400,
        f"{PAGE}/inspect?chunkToken=forged": 400,
        f"{PAGE}/runs?status=weird": 400,
        "/console/agents?cursor=x&cursor=y": 400,
        "/console/static/..%2Fapp.py": 404,
        "/console/static/app.py": 404,
        "/console/agents/users%2Fnobody": 404,
    }
    for url, status in cases.items():
        assert client.get(url).status_code == status, url
    for method in ("PUT", "DELETE", "PATCH"):
        assert client.request(method, PAGE).status_code == 405
    assert client.post(PAGE).status_code == 405
    too_big = client.post(
        "/console/login",
        content=b"key=" + b"x" * 20000,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert too_big.status_code == 400
    assert api.get(f"/v1/agents/{enc(AGENT)}").json()["revision"] == before


def test_hostile_content_is_shown_as_text(api: Api) -> None:
    api.must_write(
        "/memories/evil.md",
        '<script>alert(1)</script>\n<img src=x onerror="alert(2)">\n'
        "[click](javascript:alert(3)) [data](data:text/html;base64,PHNjcmlwdD4=)\n"
        "![pixel](http://example.invalid/p.png)\n",
    )
    client = signed_in(api)
    page = client.get(f"{PAGE}/memories/evil.md").text
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)" in page
    assert "<img" not in page and "onerror=" not in page.replace("onerror=&#34;", "").replace(
        "onerror=&quot;", ""
    )
    assert 'href="javascript:' not in page and 'href="data:' not in page
    assert 'src="http' not in page


def test_the_origin_rule_of_v1_is_unchanged(api: Api) -> None:
    refused = api.get("/v1/agents", headers={"Origin": "http://127.0.0.1"})
    assert refused.status_code == 403
    # The console's forms come from a browser, which sends Origin on a POST.
    form = api.client.get("/console/login")
    answer = api.client.post(
        "/console/login",
        data={"csrf": csrf_of(form.text), "key": ADMIN_KEY},
        headers={"Origin": "http://testserver"},
        follow_redirects=False,
    )
    assert answer.status_code == 303


def test_no_console_answers_404(tmp_path: Path) -> None:
    with open_api(tmp_path, console=False) as api:
        for url in ("/console/login", "/console/agents", "/console/static/console.css"):
            answer = api.client.get(url)
            assert answer.status_code == 404
            assert answer.headers["content-type"].startswith("application/json")


def test_memfs_console_0_and_no_console_turn_it_off() -> None:
    assert load({}, {}).console is True
    assert load({"MEMFS_CONSOLE": "0"}, {}).console is False
    assert load({"MEMFS_CONSOLE": "1"}, {"console": False}).console is False
    with pytest.raises(Exception, match="MEMFS_CONSOLE"):
        load({"MEMFS_CONSOLE": "maybe"}, {})


def test_without_a_chromium_the_browser_tests_fail_saying_how_to_get_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import browser

    class NoOwnBrowser:
        class chromium:
            executable_path = str(tmp_path / "not-downloaded")

    monkeypatch.delenv("MEMFS_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(browser, "SYSTEM_PATHS", (str(tmp_path / "chromium"),))
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y chromium"):
        browser.find_chromium(NoOwnBrowser())  # type: ignore[arg-type]
    monkeypatch.setenv("MEMFS_CHROMIUM", str(tmp_path / "missing"))
    with pytest.raises(pytest.fail.Exception, match="MEMFS_CHROMIUM"):
        browser.find_chromium(NoOwnBrowser())  # type: ignore[arg-type]


def test_an_expired_session_ends_and_is_swept(api: Api) -> None:
    client = signed_in(api)
    [file] = session_files(api)
    record = json.loads(file.read_text())
    file.write_text(json.dumps({**record, "expiresAt": 1.0}))
    answer = client.get("/console/agents", follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/console/login"
    assert session_files(api) == []
    # The periodic sweep removes expired sessions nobody comes back to.
    signed_in(api)
    [file] = session_files(api)
    file.write_text(json.dumps({**json.loads(file.read_text()), "expiresAt": 1.0}))
    assert api.app.console is not None
    assert api.app.console.sessions.sweep() == 1
    assert session_files(api) == []


def test_the_folder_listing_escapes_what_senders_wrote_and_links_each_row(api: Api) -> None:
    """The listing's rows are written without the template (render.listing_rows): names
    and descriptions are still text, and every row links where the template linked."""
    api.must_write(
        '/memories/x"&<b>/a <i>b.md',
        '---\ndescription: "<script>alert(1)</script> & <b>"\n---\nbody\n',
    )
    client = signed_in(api)
    root = client.get(PAGE).text
    assert '<b>' not in root and "<i>" not in root
    assert f'href="{PAGE}?folder=%2Fmemories%2Fx%22%26%3Cb%3E">x&#34;&amp;&lt;b&gt;/</a>' in root
    folder = client.get(PAGE, params={"folder": '/memories/x"&<b>'}).text
    assert "<script>alert" not in folder and "<b>" not in folder
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;" in folder
    href = f"{PAGE}/memories/x%22%26%3Cb%3E/a%20%3Ci%3Eb.md"
    assert f'<a class="memory" href="{href}">a &lt;i&gt;b.md</a>' in folder
    assert client.get(href).status_code == 200


def _log_section(html: str) -> str:
    return html[html.index('<h2 id="log-h">') :]


def test_the_inspect_log_shows_a_bulk_commits_first_changes_its_count_and_a_link(
    api: Api,
) -> None:
    """A commit of more changes than its index row keeps apart shows those first ones,
    "… and K more changes" and a link to the commit on the history page, which lists
    every change; the API's inspect still gives every change (the full audit view)."""
    total = LOG_HEAD + 7
    ops = [Put(f"/memories/bulk/{i:03}.md", f"bulk {i}\n".encode()) for i in range(total)]
    revision = api.app.services.store.apply(AGENT, ops, actor="t", message="bulk").revision
    # A commit of fewer changes than the index row keeps is cut on the page too.
    few = pages.LOG_SHOWN + 2
    small = [Put(f"/memories/few/{i:03}.md", f"few {i}\n".encode()) for i in range(few)]
    small_revision = api.app.services.store.apply(AGENT, small, actor="t").revision
    client = signed_in(api)
    history = f"{PAGE}/history?before={revision + 1}#revision-{revision}"
    # From the agent's inspect and from its scope's: the link names the commit's agent.
    for url in (f"{PAGE}/inspect", "/console/scopes/users/inspect"):
        log = _log_section(client.get(url).text)
        shown = [i for i in range(total) if f"/memories/bulk/{i:03}.md v1" in log]
        assert shown == list(range(pages.LOG_SHOWN)), url
        assert f"… and {total - pages.LOG_SHOWN} more changes" in log
        assert f'<a href="{history.replace("&", "&amp;")}">revision {revision} in the' in log
        # The step's fields, as the page read them, one a line.
        assert f"\n  &#34;changeCount&#34;: {total},\n" in log
        shown = [i for i in range(few) if f"/memories/few/{i:03}.md v1" in log]
        assert shown == list(range(pages.LOG_SHOWN)), url
        assert f"… and 2 more changes: <a href=\"{PAGE}/history?before={small_revision + 1}" in log
    listed = client.get(history).text
    assert f'id="revision-{revision}"' in listed
    assert all(f"/memories/bulk/{i:03}.md" in listed for i in range(total))
    # The API's log step carries every change and no count of its own.
    answer = api.post(f"/v1/agents/{enc(AGENT)}/memory:inspect", json={"log": {}})
    assert answer.status_code == 200, answer.text
    [bulk] = [s for s in answer.json()["log"]["steps"] if s.get("revision") == revision]
    assert [c["path"] for c in bulk["changes"]] == [op.path for op in ops]
    assert "changeCount" not in bulk
    # A narrow key without the inspect scope still sees none of it.
    narrow = api.make_key("reader", ["memories:read", "agents:users/alice"])
    client.cookies.clear()
    reader = signed_in(api, narrow)
    assert reader.get(f"{PAGE}/inspect").status_code == 403
    assert reader.get("/console/scopes/users/inspect").status_code == 403


def test_the_inspect_items_fields_are_text(api: Api) -> None:
    """Each item's "All fields" box (render.fields, no longer tojson) escapes what a
    sender wrote in a description or a path: nothing in it becomes markup."""
    api.must_write(
        "/memories/<b>x.md",
        '---\ndescription: "</pre><script>alert(1)</script>"\n---\nsee [[</pre><i>]]\n',
    )
    page = signed_in(api).get(f"{PAGE}/inspect").text
    assert "<script>alert" not in page and "<b>" not in page and "<i>" not in page
    assert "&#34;description&#34;: &#34;&lt;/pre&gt;&lt;script&gt;alert(1)" in page
    assert "&#34;path&#34;: &#34;/memories/&lt;b&gt;x.md&#34;" in page


def test_the_history_page_stops_at_its_change_budget_and_caps_a_bulk_commit(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bulk commits make a history page list one commit (never none) and the next page
    go on from it; a commit past the per-commit cap lists its first changes and names
    the command that prints them all. Walking the pages gives every commit once."""
    monkeypatch.setattr(pages, "HISTORY_CHANGES", 12)
    monkeypatch.setattr(pages, "COMMIT_CHANGES", 15)
    store = api.app.services.store
    sizes = [20, 8, 3, 2, 9]  # oldest first
    revisions = []
    for n, size in enumerate(sizes):
        ops = [Put(f"/memories/b{n}/{i:02}.md", f"{n} {i}\n".encode()) for i in range(size)]
        revisions.append(store.apply(AGENT, ops, actor="t", message=f"bulk {n}").revision)
    client = signed_in(api)
    seen: list[list[int]] = []
    url: str | None = f"{PAGE}/history"
    while url is not None:
        html = client.get(url).text
        seen.append([int(r) for r in re.findall(r'id="revision-(\d+)"', html)])
        older = re.search(r'<a rel="next" href="([^"]+)"', html)
        url = older.group(1).replace("&amp;", "&") if older else None
    # Newest first (9, 2, 3, 8, 20 changes) with a budget of 12: 9 + 2, then 3 + 8, then
    # the 20-change commit alone (a page always lists one).
    # (The fixture's own earlier commits follow on pages of their own.)
    r = revisions
    mine = [[x for x in page if x in r] for page in seen]
    assert [page for page in mine if page] == [[r[4], r[3]], [r[2], r[1]], [r[0]]]
    bulk = client.get(f"{PAGE}/history?before={revisions[0] + 1}").text
    assert len(re.findall(r">/memories/b0/\d+\.md</a>", bulk)) == 15
    assert f"… and 5 more changes (<code>memfs show {AGENT} {revisions[0]}</code>" in bulk


def test_the_field_boxes_encode_each_value_as_the_json_encoder_does() -> None:
    """The fast path of the "All fields" boxes writes exactly what the JSON encoder
    writes for every kind of value an item holds."""
    encoder = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))
    values: list[object] = [
        "", "plain", 'q"uote\\', "tab\tnl\ncr\r\x00\x1f\x7f", "é ü 日本 \u2028 \ud83d\ude00",
        "<script>", 0, -1, 10**30, True, False, None, 1.5, -0.0, [1, "a", None],
        {"k": [True]}, [],
    ]
    for value in values:
        assert render.encode_value(value) == encoder.encode(value), repr(value)


def test_the_runs_page_lists_runs_and_filters_by_trigger_and_status(api: Api) -> None:
    """Runs with their status and attempts, filtered by trigger and by status (the
    filters are the form's fields and stay filled in); a filter that matches nothing
    says so. (Runs are not executed here: they stay queued.)"""
    agent = agent_url(AGENT)
    ids: dict[str, str] = {}
    for trigger in ("gh", "ci"):
        made = api.put(f"{agent}/triggers/{trigger}", json={"maxAttempts": 4})
        assert made.status_code == 201, made.text
        secret, stamp, body = made.json()["secret"], int(time.time()), b"{}"
        answer = api.post(
            f"{agent}/triggers/{trigger}:deliver",
            content=body,
            headers={
                "webhook-id": f"evt-{trigger}",
                "webhook-timestamp": str(stamp),
                "webhook-signature": sign(secret, f"evt-{trigger}", stamp, body),
            },
            auth=None,
        )
        assert answer.status_code == 202, answer.text
        ids[trigger] = answer.json()["id"]
    client = signed_in(api)

    def listed(**query: str) -> tuple[list[str], str]:
        html = client.get(f"{PAGE}/runs", params=query).text
        return [r for r in ids.values() if f'<td class="id">{r}</td>' in html], html

    shown, html = listed()
    assert sorted(shown) == sorted(ids.values())
    assert '<span class="state state-queued">queued</span>' in html
    assert '<td class="num">0/4</td>' in html
    shown, html = listed(triggerId="ci")
    assert shown == [ids["ci"]]
    assert 'name="triggerId" value="ci"' in html
    shown, html = listed(status="queued", triggerId="gh")
    assert shown == [ids["gh"]]
    assert '<option value="queued" selected>' in html
    shown, html = listed(status="succeeded")
    assert shown == [] and "No runs match this filter." in html


def test_a_pinned_inspect_page_leaves_out_later_commits_in_every_section(api: Api) -> None:
    """Pinned (``asOf`` in the URL), the log, the nodes and the chunks stay as they were
    at the pin while commits land; the banner names the instant; unpinned, the new
    commit shows in each section."""
    client = signed_in(api)
    first = client.get(f"{PAGE}/inspect").text
    pin = re.search(r'class="pin" href="([^"]+)"', first)
    assert pin is not None
    pinned_url = pin.group(1).replace("&amp;", "&")
    assert "asOf=" in pinned_url
    before = client.get(pinned_url).text
    revision = api.must_write("/memories/later.md", "# Later\nwritten after the pin\n")
    pinned = client.get(pinned_url).text
    read_at = re.search(r'Pinned at <time datetime="([^"]+)"', pinned)
    assert read_at is not None and read_at.group(1) in pinned_url.replace("%3A", ":")
    latest = client.get(f"{PAGE}/inspect").text

    def items(html: str, section: str) -> str:
        # The section's items (its Next link's token carries an expiry: not compared).
        part = html[html.index(f'<h2 id="{section}">') :].split("</section>", 1)[0]
        return part.split('<nav class="pager"', 1)[0]

    for section in ("chunks-h", "nodes-h", "log-h"):
        assert "later.md" not in items(pinned, section), section
        assert items(pinned, section) == items(before, section), section
        assert "later.md" in items(latest, section), section
    assert f"revision {revision['revision']} · " in items(latest, "log-h")


def test_the_agents_list_filters_by_prefix_and_pages_to_the_end(tmp_path: Path) -> None:
    """``prefix`` keeps the agents whose id starts with it (the field keeps it); the
    Next links walk every one once, in order, keeping the filter; none matching says
    so, the prefix shown as text."""
    with open_api(tmp_path, page_items=2) as small:
        team = [f"team/a/{n}" for n in ("one", "two", "three", "four", "five")]
        for agent_id in [*team, "users/z/other"]:
            small.create_agent(agent_id)
        client = signed_in(small)
        seen: list[str] = []
        url: str | None = "/console/agents?prefix=team%2F"
        pages_walked = 0
        while url is not None:
            html = client.get(url).text
            pages_walked += 1
            assert 'name="prefix" value="team/"' in html
            seen += re.findall(r'<a class="agent" href="/console/agents/([^"]+)"', html)
            following = re.search(r'<a rel="next" href="([^"]+)"', html)
            url = following.group(1).replace("&amp;", "&") if following else None
        assert seen == [enc(a) for a in sorted(team)]
        assert pages_walked == 3
        none = client.get("/console/agents", params={"prefix": "<b>nobody"}).text
        assert "No agents start with “&lt;b&gt;nobody”." in none
