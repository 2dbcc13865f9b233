#!/usr/bin/env python3
"""Screenshots of the console's main pages at 375 px and 1440 px, into docs/console/.

Run from the repository root (needs a Chromium, found as the browser tests find it):

    .venv/bin/python scripts/console_screenshots.py

It starts ``memfs serve`` on a temporary data folder, fills it with a small demo
(agents, folders, a memory with versions, a diff, hostile content, a trigger with one
signed delivery so the runs page has a run), signs in with the admin key and saves one PNG per page and width, plus the
memory page in the dark scheme. Stopped by its pid when done.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import benchkit
from playwright.sync_api import Page, sync_playwright
from standardwebhooks import Webhook

OUT = benchkit.REPO / "docs" / "console"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
AGENT = "users/alice/assistant"
SCOPE = "users/alice"
TRIGGER = "issues"
SECRET = "whsec_" + "c2NyZWVuc2hvdHMtd2ViaG9vay1zZWNyZXQta2V5LTAx"
WIDTHS = {"375": (375, 812), "1440": (1440, 900)}


def chromium(own: str) -> str:
    for candidate in (
        os.environ.get("MEMFS_CHROMIUM"),
        own,
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit("no Chromium: apt-get install chromium, or set MEMFS_CHROMIUM")


def put(port: int, agent: str, path: str, text: str, message: str = "") -> None:
    url = f"/v1/agents/{quote(agent, safe='')}/memories/" + "/".join(
        quote(s, safe="") for s in path.split("/")
    )
    headers = {**benchkit.admin_headers(), "Content-Type": "text/markdown"}
    if message:
        headers["Memfs-Message"] = message
    status, body = benchkit.call(port, "PUT", url, text.encode(), headers)
    assert status in (200, 201), body


def seed(port: int) -> None:
    for agent in (AGENT, "users/alice/researcher", "users/bob/assistant", "teams/support/triage"):
        status, body = benchkit.call(
            port,
            "PUT",
            f"/v1/agents/{quote(agent, safe='')}",
            b'{"name": "demo"}',
            {**benchkit.admin_headers(), "Content-Type": "application/json"},
        )
        assert status in (200, 201), body
    put(
        port,
        AGENT,
        "conventions/naming.md",
        "---\ndescription: naming rules\nkind: rule\n---\n# Naming\n\nUse snake_case.\n",
        "first rule",
    )
    put(
        port,
        AGENT,
        "conventions/naming.md",
        "---\ndescription: naming rules\nkind: rule\n---\n# Naming\n\nUse snake_case for"
        " functions and **PascalCase** for classes.\n\n- no abbreviations\n- no Hungarian"
        " notation\n\n```python\nclass MemoryStore:\n    def read_page(self): ...\n```\n"
        "\nSee [[conventions/tests.md]] and [the guide](https://example.com/guide).\n",
        "classes too",
    )
    put(port, AGENT, "conventions/tests.md", "# Tests\n\nOne behaviour per test.\n")
    put(port, AGENT, "projects/memfs/status.md", "# Status\n\nThe console ships.\n")
    put(port, AGENT, "evil.md", "<script>alert(1)</script>\n[x](javascript:alert(1))\n")
    put(port, AGENT, "profile.md", "---\ndescription: who Alice is\n---\n# Alice\n")


def deliver(port: int) -> None:
    """A trigger (the memory action: the delivery is filed as a memory) and one signed
    delivery, so the runs page shows a run; waits until it has run (bounded)."""
    agent = quote(AGENT, safe="")
    headers = {**benchkit.admin_headers(), "Content-Type": "application/json"}
    doc = {"prompt": "file the issue", "secret": SECRET}
    status, body = benchkit.call(
        port, "PUT", f"/v1/agents/{agent}/triggers/{TRIGGER}", json.dumps(doc).encode(), headers
    )
    assert status in (200, 201), body
    payload = json.dumps({"title": "Login page is slow", "labels": ["bug"]})
    now = dt.datetime.now(dt.UTC)
    signed = {
        "Content-Type": "application/json",
        "webhook-id": "msg_screenshots_1",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(SECRET).sign("msg_screenshots_1", now, payload),
    }
    path = f"/v1/agents/{agent}/triggers/{TRIGGER}:deliver"
    status, body = benchkit.call(port, "POST", path, payload.encode(), signed)
    assert status == 202, body
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status, body = benchkit.call(
            port, "GET", f"/v1/agents/{agent}/memory", b"", benchkit.admin_headers()
        )
        if status == 200 and not json.loads(body)["pendingRunCount"]:
            return
        time.sleep(0.3)
    raise SystemExit("the demo delivery's run did not finish within 60 s")


def shoot(page: Page, url: str, name: str) -> None:
    page.goto(url)
    page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)


def main() -> None:
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="memfs-shots-") as root:
        server = benchkit.start_memfs(Path(root) / "data", 1, Path(root))
        try:
            seed(server.port)
            deliver(server.port)
            base = f"http://127.0.0.1:{server.port}/console"
            agent = f"{base}/agents/{quote(AGENT, safe='')}"
            pages = {
                "login": f"{base}/login",
                "agents": f"{base}/agents",
                "agent": agent,
                "memory": f"{agent}/memories/conventions/naming.md",
                "diff": f"{agent}/memories/conventions/naming.md?from=1&to=2",
                "history": f"{agent}/history",
                "inspect": f"{agent}/inspect",
                "runs": f"{agent}/runs",
                "scope": f"{base}/scopes/{quote(SCOPE, safe='')}",
            }
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=chromium(playwright.chromium.executable_path), args=ARGS
                )
                for width, (w, h) in WIDTHS.items():
                    for scheme in ("light", "dark"):
                        context = browser.new_context(
                            viewport={"width": w, "height": h}, color_scheme=scheme
                        )
                        page = context.new_page()
                        shoot(page, pages["login"], f"login-{width}") if scheme == "light" else None
                        page.goto(pages["login"])
                        page.get_by_label("API key").fill(benchkit.ADMIN_KEY)
                        page.get_by_role("button", name="Sign in").click()
                        page.wait_for_url(pages["agents"])
                        for name, url in pages.items():
                            if name == "login":
                                continue
                            if scheme == "dark" and name != "memory":
                                continue
                            suffix = "-dark" if scheme == "dark" else ""
                            shoot(page, url, f"{name}-{width}{suffix}")
                        context.close()
                browser.close()
        finally:
            server.stop()
    for png in sorted(OUT.glob("*.png")):
        benchkit.say(f"  {png.relative_to(benchkit.REPO)}")


if __name__ == "__main__":
    main()
