"""Routing on the raw (still percent-encoded) path, as agent ids hold encoded slashes.

A pattern is a ``/``-separated string: literal segments, ``{name}`` (one segment,
percent-decoded), ``{name}:action`` (a segment ending in a literal action), and a final
``{name*}`` that takes the remaining segments, each decoded on its own.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from memfs.errors import InvalidRequest, NotFound
from memfs.http.envelope import MethodNotAllowed

Handler = Callable[..., Awaitable[Any]]


@dataclass(frozen=True)
class Route:
    method: str
    pattern: str
    handler: Handler
    name: str
    protocol: bool = True  # False for webhook deliveries: no Memfs-Protocol needed

    def match(self, segments: list[str], *, trailing: bool = False) -> dict[str, str] | None:
        """Params if ``segments`` (each already percent-decoded) fit this route;
        ``trailing``: the URL path ended with '/'."""
        parts = self.parts
        params: dict[str, str] = {}
        for i, part in enumerate(parts):
            if part.endswith("*}"):
                rest = segments[i:]
                if not rest:
                    return None
                if trailing:
                    # '…/memories/notes/' names a folder, never the file 'notes'.
                    raise InvalidRequest(
                        "a memory path must not end with '/'; name a file", field="path"
                    )
                if any("/" in s for s in rest):
                    raise InvalidRequest(
                        "a memory path segment must not contain an encoded '/'", field="path"
                    )
                params[part[1:-2]] = "/".join(rest)
                return params
            if i >= len(segments):
                return None
            # Clients may send ':' as %3A: actions and literals compare decoded.
            segment = segments[i]
            if part.startswith("{"):
                name, _, action = part[1:].partition("}")
                if action:
                    if not segment.endswith(action) or len(segment) == len(action):
                        return None
                    segment = segment[: -len(action)]
                elif ":" in segment:
                    # No id holds ':' — 'x:deliver' is an action, for the route that has it
                    # (so PUT on ':deliver' is 405, not a trigger named 'x:deliver').
                    return None
                params[name] = segment
            elif segment != part:
                return None
        return params if len(parts) == len(segments) else None

    @property
    def parts(self) -> list[str]:
        return _parts(self.pattern)


@functools.cache
def _parts(pattern: str) -> list[str]:
    return pattern.strip("/").split("/")


_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _decode(segment: str) -> str:
    if "%" in segment and _BAD_ESCAPE.search(segment):
        raise InvalidRequest(
            "the URL path holds a '%' that is not a percent escape (%XX); send '%' as %25",
            field="path",
        )
    try:
        return unquote(segment, errors="strict")
    except UnicodeDecodeError:
        raise InvalidRequest(
            "the URL path is not valid percent-encoded UTF-8", field="path"
        ) from None


class Router:
    def __init__(self, routes: list[Route]) -> None:
        self.routes = routes

    def resolve(self, method: str, raw_path: str) -> tuple[Route, dict[str, str]]:
        stripped = raw_path.strip("/")
        segments = [_decode(s) for s in stripped.split("/")] if stripped else []
        trailing = len(raw_path) > 1 and raw_path.endswith("/")
        allowed: list[str] = []
        for route in self.routes:
            params = route.match(segments, trailing=trailing)
            if params is None:
                continue
            if route.method == method or (method == "HEAD" and route.method == "GET"):
                return route, params
            allowed.append(route.method)
        if allowed:
            raise MethodNotAllowed(
                f"{method} is not allowed here; use {', '.join(sorted(set(allowed)))}",
                sorted(set(allowed)),
            )
        raise NotFound(f"no route for {method} {raw_path}; see GET /openapi.json", field="path")
