"""A real Chromium for the console's browser tests, driven by Playwright.

Playwright cannot download its own browser where only package registries are reachable
(CI here), so the browser is found, in order: ``$MEMFS_CHROMIUM``, Playwright's own
download, then the system's ``chromium`` / ``chromium-browser``. Without one the tests
FAIL with how to get it; they never skip.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Playwright, sync_playwright

HOW_TO_GET_ONE = (
    "no Chromium for the console's browser tests. Install one: "
    "`sudo apt-get install -y chromium` (Debian/Ubuntu; .ci/run does this), or "
    "`.venv/bin/playwright install chromium` where downloads are allowed, or point "
    "MEMFS_CHROMIUM at a Chromium/Chrome binary."
)
# Headless, and quiet on a closed network: without the background-networking flags
# Chromium keeps trying to reach Google's services.
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


SYSTEM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser")  # when not on PATH


def find_chromium(playwright: Playwright) -> str:
    configured = os.environ.get("MEMFS_CHROMIUM")
    if configured:
        if not os.access(configured, os.X_OK):
            pytest.fail(f"MEMFS_CHROMIUM={configured!r} is not an executable file")
        return configured
    try:
        own = playwright.chromium.executable_path
    except Exception:
        own = ""
    if own and os.access(own, os.X_OK):
        return own
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    for path in SYSTEM_PATHS:
        if os.access(path, os.X_OK):
            return path
    pytest.fail(HOW_TO_GET_ONE)


# Module scope, not session: while Playwright's sync API runs it keeps an asyncio loop
# running in the main thread, so every later test that calls asyncio.run() (the MCP
# client tests, Starlette's TestClient) failed with "cannot be called from a running
# event loop" when the browser outlived the console's module.
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        executable = find_chromium(playwright)
        launched = playwright.chromium.launch(executable_path=executable, args=ARGS)
        try:
            yield launched
        finally:
            launched.close()
