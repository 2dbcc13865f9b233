"""The console in a real Chromium against a real ``memfs serve`` (Playwright).

One server for the module, its pages 4 items long so paging shows with few memories;
each test gets a fresh browser context (no cookies), signs in through the form, and
reads the pages as a person would: links clicked, forms filled.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect

from browser import browser  # noqa: F401 - the fixture
from servers_real import ADMIN_KEY, RealServer, headers

ALICE = "users/alice/assistant"
BOB = "users/bob/assistant"
PINNED = "users/carol/pinned"
EVIL = "users/mallory/evil"
NOTES = [f"note-{i:02d}.md" for i in range(11)]
TIMEOUT_MS = 30_000


def enc(value: str) -> str:
    return quote(value, safe="")


def put(api: httpx.Client, agent: str, path: str, content: bytes | str) -> None:
    url = f"/v1/agents/{enc(agent)}/memories/" + "/".join(
        quote(s, safe="") for s in path.removeprefix("/memories/").split("/")
    )
    data = content.encode() if isinstance(content, str) else content
    answer = api.put(url, content=data, headers={**headers(), "Content-Type": "text/markdown"})
    assert answer.status_code in (200, 201), answer.text


def make_agent(api: httpx.Client, agent: str) -> None:
    answer = api.put(f"/v1/agents/{enc(agent)}", json={}, headers=headers())
    assert answer.status_code in (200, 201), answer.text


def make_key(api: httpx.Client, key_id: str, scopes: list[str]) -> str:
    answer = api.put(f"/v1/tenant/keys/{key_id}", json={"scopes": scopes}, headers=headers())
    assert answer.status_code == 201, answer.text
    secret: str = answer.json()["secret"]
    return secret


XSS = {
    "/memories/script.md": "<script>alert('script')</script>\n\n# Title <script>alert(1)</script>",
    "/memories/links.md": "[js](javascript:alert('link')) [JS](JaVaScRiPt:alert(1))\n"
    "[tab](java\tscript:alert(1)) <javascript:alert(2)> [data](data:text/html,<script>alert(3)</script>)\n"
    "[vb](vbscript:msgbox(1))",
    "/memories/html.md": '<img src=x onerror="alert(\'img\')">\n<iframe src="javascript:alert(4)"></iframe>\n'
    '<svg onload="alert(5)"></svg>\n<a href="#" onclick="alert(6)">x</a>\n<style>body{display:none}</style>',
    "/memories/attrs.md": '[x](http://example.invalid/" onmouseover="alert(7))\n'
    '![img](http://example.invalid/x.png" onerror="alert(8))\n![pixel](http://example.invalid/p.png)',
    "/memories/huge.md": "<b>big</b> " * 9000,
    "/memories/binary.md": bytes(range(1, 32)).decode("latin-1") * 40
    + "\ufffd\u202e<script>alert(9)</script>",
    "/memories/<script>alert('path')<\u2215script>.md": "a hostile name",
    "/memories/<svg onload=alert(13)>/inside.md": "a hostile folder",
    '/memories/"><img src=x onerror=alert(10)>.md': "another hostile name",
    "/memories/frontmatter.md": '---\ndescription: "<script>alert(11)</script>"\n'
    'owner: "<img src=x onerror=alert(12)>"\n---\nbody',
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealServer]:
    data = tmp_path_factory.mktemp("console") / "data"
    with (
        RealServer(data, env={"MEMFS_PAGE_ITEMS": "4"}) as running,
        httpx.Client(base_url=running.url, timeout=30) as api,
    ):
        for agent in (ALICE, BOB, PINNED, EVIL):
            make_agent(api, agent)
        for name in NOTES:
            put(api, ALICE, f"/memories/notes/{name}", f"# {name}\n")
        put(api, ALICE, "/memories/top.md", "# Top\n\nfirst version\n")
        put(api, ALICE, "/memories/top.md", "# Top\n\nsecond version\n")
        put(api, BOB, "/memories/bob.md", "bob-only secret")
        for i in range(7):
            put(api, PINNED, f"/memories/m{i}.md", f"# m{i}\n")
        for path, content in XSS.items():
            put(api, EVIL, path, content)
        yield running


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:  # noqa: F811
    opened = browser.new_context(viewport={"width": 1440, "height": 900})
    opened.set_default_timeout(TIMEOUT_MS)
    try:
        yield opened
    finally:
        opened.close()


def sign_in(page: Page, server: RealServer, key: str = ADMIN_KEY) -> None:
    page.goto(f"{server.url}/console/agents")
    expect(page).to_have_url(f"{server.url}/console/login")  # no session: the form
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{server.url}/console/agents")


def follow(page: Page, link: Locator) -> None:
    """Click a link and wait for the page it leads to (reading before it loads would
    read the old page)."""
    with page.expect_navigation():
        link.click()


def test_sign_in_and_browse_folders_to_the_end(context: BrowserContext, server: RealServer) -> None:
    page = context.new_page()
    sign_in(page, server)
    expect(page.get_by_role("heading", name="Agents")).to_be_visible()
    # Four agents on pages of four: one page, no next link.
    page.get_by_role("link", name=ALICE).click()
    expect(page.locator("h1")).to_have_text(ALICE)
    expect(page.locator(".summary")).to_contain_text("Memories")
    page.get_by_role("link", name="notes/").click()
    seen: list[str] = []
    while True:
        seen += page.locator("a.memory").all_inner_texts()
        following = page.get_by_role("link", name="Next page")
        if following.count() == 0:
            break
        follow(page, following)
        assert len(seen) < 100
    assert seen == NOTES
    page.locator(".crumbs").get_by_role("link", name="memories").click()  # back up
    expect(page.locator("a.memory")).to_have_text(["top.md"])


def test_open_a_memory_and_a_diff(context: BrowserContext, server: RealServer) -> None:
    page = context.new_page()
    sign_in(page, server)
    page.goto(f"{server.url}/console/agents/{enc(ALICE)}")
    page.get_by_role("link", name="top.md").click()
    expect(page.locator("article.rendered h1")).to_have_text("Top")
    expect(page.locator("article.rendered")).to_contain_text("second version")
    page.get_by_role("link", name="v1", exact=True).click()
    expect(page.locator("article.rendered")).to_contain_text("first version")
    expect(page.locator(".banner")).to_contain_text("version 1")
    page.get_by_role("link", name="v1→v2").click()
    expect(page.locator("pre.diff .del")).to_have_text(["-first version"])
    expect(page.locator("pre.diff .add")).to_have_text(["+second version"])


def _walk(page: Page, url: str) -> list[str]:
    """Every chunk of an inspect walk from ``url``, following 'Next chunks' to the end."""
    page.goto(url)
    chunks: list[str] = []
    while True:
        chunks += page.locator("ol.chunks .meta .id").all_inner_texts()
        following = page.locator("a.next-chunks")
        if following.count() == 0:
            return chunks
        follow(page, following)
        assert len(chunks) < 10_000


def test_inspect_pinned_while_commits_land(context: BrowserContext, server: RealServer) -> None:
    page = context.new_page()
    sign_in(page, server)
    page.goto(f"{server.url}/console/agents/{enc(PINNED)}/inspect")
    expect(page.locator(".banner")).to_contain_text("Read at")
    page.get_by_role("link", name="Pin this instant").click()
    expect(page.locator(".banner.pinned")).to_contain_text("Pinned at")
    pinned_url = page.url
    assert "asOf=" in pinned_url  # the pin is in the link, so it can be shared
    before = _walk(page, pinned_url)
    assert len(before) == 7
    # Walk again from the shared link while commits land between its pages.
    with httpx.Client(base_url=server.url, timeout=30) as api:
        page.goto(pinned_url)
        during: list[str] = []
        n = 0
        while True:
            during += page.locator("ol.chunks .meta .id").all_inner_texts()
            for _ in range(60):  # more than a page of chunks, each a commit
                put(api, PINNED, f"/memories/a-new-{n:03d}.md", f"# new {n}\n")
                n += 1
            following = page.locator("a.next-chunks")
            if following.count() == 0:
                break
            expect(page.locator(".banner.pinned")).to_be_visible()
            follow(page, following)
    assert during == before
    # Unpinned, the new memories are there.
    page.goto(pinned_url)
    page.get_by_role("link", name="Unpin (show the latest)").click()
    after = _walk(page, page.url)
    assert len(after) == len(before) + n
    assert f"{PINNED}:/memories/a-new-000.md@1" in after


def test_hostile_content_fires_nothing_and_loads_nothing(
    context: BrowserContext, server: RealServer
) -> None:
    dialogs: list[str] = []
    foreign: list[str] = []
    scripts: list[str] = []
    violations: list[str] = []
    page = context.new_page()
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on(
        "request",
        lambda r: (
            foreign.append(r.url) if not r.url.startswith(server.url) else None,
            scripts.append(r.url) if r.resource_type == "script" else None,
        ),
    )
    page.on(
        "console",
        lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None,
    )
    sign_in(page, server)
    base = f"{server.url}/console/agents/{enc(EVIL)}"
    page.goto(base)
    names = page.locator("a.memory").all_inner_texts()
    while page.get_by_role("link", name="Next page").count():
        follow(page, page.get_by_role("link", name="Next page"))
        names += page.locator("a.memory").all_inner_texts()
    top = [p.removeprefix("/memories/") for p in XSS if p.count("/") == 2]
    assert sorted(names) == sorted(top)
    folder = page.get_by_role("link", name="<svg onload=alert(13)>/")
    if folder.count() == 0:
        page.goto(base)
    follow(page, page.get_by_role("link", name="<svg onload=alert(13)>/"))
    expect(page.locator("a.memory")).to_have_text(["inside.md"])
    for path in XSS:
        page.goto(f"{base}/memories/" + "/".join(quote(s, safe="") for s in path.split("/")[2:]))
        expect(page.locator("main > h1")).to_have_text(path)
        # Hover and click everything that looks like a link inside the rendered memory.
        for link in page.locator("article.rendered a").all():
            link.hover()
        assert (
            page.locator(
                "article.rendered script, article.rendered img, article.rendered iframe"
            ).count()
            == 0
        )
        assert page.locator("[onerror], [onload], [onclick], [onmouseover]").count() == 0
        hrefs = page.locator("a").evaluate_all("els => els.map(e => e.getAttribute('href') || '')")
        assert not [
            h for h in hrefs if h.strip().lower().startswith(("javascript:", "data:", "vbscript:"))
        ]
    for extra in ("/history", "/inspect"):
        page.goto(base + extra)
        expect(page.locator("main > h1")).to_be_visible()
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert dialogs == []
    assert foreign == []
    assert scripts == []
    assert violations == []
    page.goto(f"{base}/memories/links.md")
    expect(page.locator("article.rendered")).to_contain_text("[js](javascript:alert('link'))")
    page.goto(f"{base}/memories/binary.md")
    expect(page.locator(".banner").first).to_be_visible()


def test_a_narrow_read_only_key_sees_only_its_scope(
    context: BrowserContext, server: RealServer
) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as api:
        secret = make_key(api, "alice-reader", ["memories:read", "agents:users/alice"])
    page = context.new_page()
    sign_in(page, server, secret)
    expect(page.locator("a.agent")).to_have_text([ALICE])
    expect(page.locator(".who")).to_contain_text("key alice-reader")
    for url in (
        f"/console/agents/{enc(BOB)}",
        f"/console/agents/{enc(BOB)}/memories/bob.md",
        f"/console/agents/{enc(ALICE)}/inspect",
        "/console/scopes/users",
    ):
        answer = page.goto(server.url + url)
        assert answer is not None and answer.status == 403, url
        assert "bob-only secret" not in page.content()
    page.goto(f"{server.url}/console/agents/{enc(ALICE)}")
    page.get_by_role("link", name="top.md").click()
    expect(page.locator("article.rendered")).to_contain_text("second version")


def test_logout_ends_the_session(context: BrowserContext, server: RealServer) -> None:
    page = context.new_page()
    sign_in(page, server)
    cookies = context.cookies()
    session = [c for c in cookies if c["name"] == "memfs_console"]
    assert session and session[0]["httpOnly"] and session[0]["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""  # nothing for scripts to read
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(f"{server.url}/console/login")
    page.goto(f"{server.url}/console/agents")
    expect(page).to_have_url(f"{server.url}/console/login")
    # Replaying the old cookie after sign-out gets the sign-in form again.
    context.add_cookies(session)  # type: ignore[arg-type]
    page.goto(f"{server.url}/console/agents/{enc(ALICE)}")
    expect(page).to_have_url(f"{server.url}/console/login")


def test_keyboard_alone_signs_in_and_reaches_a_memory(
    context: BrowserContext, server: RealServer
) -> None:
    page = context.new_page()
    page.goto(f"{server.url}/console/login")
    # The key field has the focus on arrival; wait for it (autofocus can land after the
    # load event on a loaded machine, and keys typed before it are lost).
    expect(page.locator("input[name=key]")).to_be_focused()
    page.keyboard.type(ADMIN_KEY)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page).to_have_url(f"{server.url}/console/agents")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    # Tab through the page to the first agent's link and follow it with Enter.
    for _ in range(20):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.className") == "agent":
            break
    else:
        raise AssertionError("no agent link is reachable with Tab")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.locator("main > h1")).to_be_visible()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_readable_at_375_px_in_both_schemes(
    browser: Browser,  # noqa: F811
    server: RealServer,
    scheme: str,
) -> None:
    context = browser.new_context(
        viewport={"width": 375, "height": 812},
        color_scheme=scheme,  # type: ignore[arg-type]
    )
    try:
        page = context.new_page()
        sign_in(page, server)
        agent = f"{server.url}/console/agents/{enc(ALICE)}"
        for url in (
            f"{server.url}/console/agents",
            agent,
            f"{agent}/memories/top.md?from=1&to=2",
            f"{agent}/history",
            f"{agent}/inspect",
        ):
            page.goto(url)
            # Nothing makes the page itself wider than the screen (wide tables and
            # code scroll inside their own box).
            assert page.evaluate("document.documentElement.scrollWidth") <= 375, url
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == ("rgb(13, 17, 23)" if scheme == "dark" else "rgb(255, 255, 255)")
    finally:
        context.close()


def test_no_console_flag_serves_no_console(tmp_path: Path) -> None:
    with RealServer(tmp_path / "data", extra_args=("--no-console",)) as running:
        answer = httpx.get(f"{running.url}/console/login", timeout=30)
        assert answer.status_code == 404
        assert answer.headers["content-type"].startswith("application/json")


def test_a_session_holds_across_worker_processes(tmp_path: Path) -> None:
    """Sessions live in the data folder, so whichever worker takes a request knows it:
    fresh connections (each may reach either worker) all stay signed in."""
    from console_helpers import sign_in as sign_in_form

    with RealServer(tmp_path / "data", workers=2) as running:
        with httpx.Client(base_url=running.url, timeout=30) as first:
            answer = sign_in_form(first, ADMIN_KEY)
            assert answer.status_code == 303
            cookie = first.cookies.get("memfs_console")
        assert cookie
        for _ in range(20):
            with httpx.Client(
                base_url=running.url, timeout=30, cookies={"memfs_console": cookie}
            ) as fresh:
                page = fresh.get("/console/agents")
                assert page.status_code == 200, page.text
                assert "Sign out" in page.text
