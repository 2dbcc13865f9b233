"""Signing in to the console from a test: a client (TestClient or httpx) and a key."""

from __future__ import annotations

import re
from typing import Any

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    match = CSRF.search(html)
    assert match, "the page has no CSRF field"
    return match.group(1)


def sign_in(client: Any, key: str) -> Any:
    """Load the sign-in form, post ``key`` with its CSRF token; the (redirect) answer."""
    form = client.get("/console/login")
    assert form.status_code == 200, form.text
    return client.post(
        "/console/login",
        data={"csrf": csrf_of(form.text), "key": key},
        follow_redirects=False,
    )
