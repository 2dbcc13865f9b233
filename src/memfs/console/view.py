"""What a console page handler gets (``View``) and how a page is routed (``Page``).

Its own module so that the pages and the app both import it and neither imports the
other's module at import time (no import cycle).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from markdown_it import MarkdownIt
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from memfs.core.auth import Principal
from memfs.core.sessions import Session
from memfs.core.store import Store
from memfs.core.tokens import Signer

Render = Callable[..., HTMLResponse]


@dataclass
class View:
    """The request, its path parameters, the session and what the pages read with."""

    request: Request
    params: dict[str, str]
    session: Session
    who: Principal
    store: Store
    signer: Signer
    markdown: MarkdownIt
    page_items: int
    render: Render
    query: dict[str, str] = field(default_factory=dict)

    def page(self, template: str, **values: Any) -> HTMLResponse:
        return self.render(template, 200, self.session, self.who, **values)

    def arg(self, name: str) -> str | None:
        value = self.query.get(name)
        return value if value else None

    def limit(self) -> int:
        return self.page_items


Handler = Callable[[View], Awaitable[Response]]


@dataclass(frozen=True)
class Page:
    pattern: tuple[str, ...]  # literal segments, "{name}" and a last "{name*}"
    handler: Handler
    queries: tuple[str, ...] = ()

    def match(self, segments: list[str]) -> dict[str, str] | None:
        params: dict[str, str] = {}
        for i, part in enumerate(self.pattern):
            if part.endswith("*}"):
                rest = segments[i:]
                if not rest or any(s == "" or "/" in s for s in rest):
                    return None
                params[part[1:-2]] = "/".join(rest)
                return params
            if i >= len(segments):
                return None
            if part.startswith("{"):
                if not segments[i]:
                    return None
                params[part[1:-1]] = segments[i]
            elif segments[i] != part:
                return None
        return params if len(segments) == len(self.pattern) else None
