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
    if "%" not in segment:
        return segment  # most segments: nothing to decode
    if _BAD_ESCAPE.search(segment):
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
    """Resolves a request to its route without trying every route in turn.

    A route can only match a path whose segments equal its literal segments at their
    positions (``v1``, ``agents``, ``triggers``…; those before a ``{name*}``) and, unless
    it ends in ``{name*}``, its number of segments; so routes are grouped by those: a
    request looks up its candidates in one dict per group (a handful) and tries only those, in the order of
    ``routes``, with the same :meth:`Route.match`. The matches, the 405's methods and
    the 400s are those of trying every route, in less CPU. Resolutions are also kept
    for recently seen (method, path) pairs: a webhook sender posts to one URL.
    """

    def __init__(self, routes: list[Route]) -> None:
        self.routes = routes
        # {(positions, segment count or None for a {name*} route): {literals at those
        # positions: [route indexes]}}
        self._groups: dict[
            tuple[tuple[int, ...], int | None], dict[tuple[str, ...], list[int]]
        ] = {}
        for index, route in enumerate(routes):
            positions, literals = _literals(route.parts)
            count = None if route.parts[-1].endswith("*}") else len(route.parts)
            group = self._groups.setdefault((positions, count), {})
            group.setdefault(literals, []).append(index)
        self._cached = functools.lru_cache(maxsize=RESOLVED)(self._resolve)

    def resolve(self, method: str, raw_path: str) -> tuple[Route, dict[str, str]]:
        if len(raw_path) > CACHED_PATH_CHARS:
            return self._resolve(method, raw_path)
        route, params = self._cached(method, raw_path)
        return route, dict(params)  # a copy: the cached one is never handed out

    def candidates(self, segments: list[str]) -> list[Route]:
        """The routes whose literal segments ``segments`` has, in the routes' order."""
        count = len(segments)
        found: list[int] = []
        for (positions, length), by_literals in self._groups.items():
            if length is not None and length != count:
                continue  # a route without {name*} matches its own number of segments
            if positions and positions[-1] >= count:
                continue
            hit = by_literals.get(tuple(segments[i] for i in positions))
            if hit is not None:
                found.extend(hit)
        if len(self._groups) > 1:
            found.sort()
        return [self.routes[i] for i in found]

    def _resolve(self, method: str, raw_path: str) -> tuple[Route, dict[str, str]]:
        stripped = raw_path.strip("/")
        segments = [_decode(s) for s in stripped.split("/")] if stripped else []
        trailing = len(raw_path) > 1 and raw_path.endswith("/")
        candidates = self.candidates(segments)
        # The request's method first: GET, PUT and DELETE of a memory share a pattern,
        # and a PUT used to match the GET route (and be set aside) before its own.
        # Routes that raise on a path (``{name*}``: a trailing '/', an encoded '/')
        # share their pattern with those of the other methods, so the 400 is the same.
        others: list[Route] = []
        for route in candidates:
            if route.method == method or (method == "HEAD" and route.method == "GET"):
                params = route.match(segments, trailing=trailing)
                if params is not None:
                    return route, params
            else:
                others.append(route)
        allowed = [r.method for r in others if r.match(segments, trailing=trailing) is not None]
        if allowed:
            raise MethodNotAllowed(
                f"{method} is not allowed here; use {', '.join(sorted(set(allowed)))}",
                sorted(set(allowed)),
            )
        raise NotFound(f"no route for {method} {raw_path}; see GET /openapi.json", field="path")


# Resolutions kept (successful ones; an error is worked out again each time), bounded
# in number and in path length as clients choose the paths: at most a few MB.
RESOLVED = 4096
CACHED_PATH_CHARS = 512


def _literals(parts: list[str]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """The positions and values of a pattern's literal segments, up to a ``{name*}``."""
    positions: list[int] = []
    literals: list[str] = []
    for i, part in enumerate(parts):
        if part.endswith("*}"):
            break
        if not part.startswith("{"):
            positions.append(i)
            literals.append(part)
    return tuple(positions), tuple(literals)
