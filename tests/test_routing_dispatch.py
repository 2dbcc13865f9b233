"""The router looks up its candidate routes instead of trying every route: it must give
exactly the answers of trying every route in turn (the route, its parameters, the
404/405/400 and its message), for every documented route and for paths no route has."""

from __future__ import annotations

import itertools

import pytest

from memfs.errors import MemfsError, NotFound
from memfs.http.app import HOT_ROUTES, ROUTES
from memfs.http.envelope import MethodNotAllowed
from memfs.http.routing import CACHED_PATH_CHARS, Route, Router, _decode

METHODS = ("GET", "HEAD", "PUT", "POST", "DELETE", "PATCH", "OPTIONS")
ORDERED = sorted(ROUTES, key=lambda r: r.name not in HOT_ROUTES)  # as MemfsApp does


def try_every_route(routes: list[Route], method: str, raw_path: str) -> object:
    """The router before this change: every route tried in order."""
    stripped = raw_path.strip("/")
    try:
        segments = [_decode(s) for s in stripped.split("/")] if stripped else []
        trailing = len(raw_path) > 1 and raw_path.endswith("/")
        allowed: list[str] = []
        for route in routes:
            params = route.match(segments, trailing=trailing)
            if params is None:
                continue
            if route.method == method or (method == "HEAD" and route.method == "GET"):
                return route.name, params
            allowed.append(route.method)
        if allowed:
            return ("405", sorted(set(allowed)))
        return ("404", f"no route for {method} {raw_path}; see GET /openapi.json")
    except MemfsError as exc:
        return (exc.code, exc.message, exc.field)


def answer(router: Router, method: str, raw_path: str) -> object:
    try:
        route, params = router.resolve(method, raw_path)
    except MethodNotAllowed as exc:
        return ("405", exc.allowed)
    except NotFound as exc:
        return ("404", exc.message)
    except MemfsError as exc:
        return (exc.code, exc.message, exc.field)
    return route.name, params


def sample_paths() -> list[str]:
    """Each documented route's pattern filled in several ways (values that are other
    routes' literals, encoded slashes and colons, actions), plus near misses."""
    values = ["x", "v1", "agents", "memories", "memory", "runs", "a%2Fb", "x%3Adeliver", ""]
    out: set[str] = {"/", "", "/v1", "/v1/", "/nope", "/v1/nope/x", "/healthz/", "/metrics/x"}
    for route in ROUTES:
        choices: list[list[str]] = []
        for part in route.parts:
            if part.endswith("*}"):
                choices.append(["a.md", "d/b.md", "d/", "a%2Fb.md", "%zz", "%C3%A9.md"])
            elif part.startswith("{"):
                action = part.partition("}")[2]
                choices.append([v + action for v in values] + ([action] if action else []))
            else:
                choices.append([part, part.upper(), part.replace(":", "%3A")])
        for combo in itertools.product(*choices):
            path = "/" + "/".join(combo)
            out.update({path, path + "/", path + "/extra"})
    return sorted(out)


PATHS = sample_paths()


def test_every_documented_route_resolves_as_when_every_route_was_tried() -> None:
    router = Router(ORDERED)
    assert len(PATHS) > 2000
    for raw_path in PATHS:
        for method in METHODS:
            expected = try_every_route(ORDERED, method, raw_path)
            assert answer(router, method, raw_path) == expected, (method, raw_path)
            # Asked again (the second answer may come from the router's cache).
            assert answer(router, method, raw_path) == expected, (method, raw_path)


def test_each_route_is_reached_by_its_own_method_and_others_get_405() -> None:
    router = Router(ORDERED)
    for route in ROUTES:
        path = "/" + "/".join(
            "a.md" if p.endswith("*}") else ("x" + p.partition("}")[2] if p.startswith("{") else p)
            for p in route.parts
        )
        assert router.resolve(route.method, path)[0] is route
        wrong = "PATCH"  # no route uses it
        with pytest.raises(MethodNotAllowed) as refused:
            router.resolve(wrong, path)
        assert route.method in refused.value.allowed


def test_unknown_paths_give_the_same_404() -> None:
    router = Router(ORDERED)
    for path in ("/v2/agents", "/v1/agents/x/nothing", "/v1/agentsx", "/x" * 400):
        with pytest.raises(NotFound) as missing:
            router.resolve("GET", path)
        assert missing.value.message == f"no route for GET {path}; see GET /openapi.json"


def test_a_resolved_route_hands_out_its_own_parameters() -> None:
    """A handler that changes its params must not change the next request's."""
    router = Router(ORDERED)
    path = "/v1/agents/a/triggers/gh:deliver"
    _route, params = router.resolve("POST", path)
    params["agentId"] = "someone-else"
    assert router.resolve("POST", path)[1] == {"agentId": "a", "triggerId": "gh"}


def test_long_paths_resolve_the_same_without_being_kept() -> None:
    router = Router(ORDERED)
    long = "/v1/agents/a/memories/" + "d/" * CACHED_PATH_CHARS + "x.md"
    assert answer(router, "GET", long) == try_every_route(ORDERED, "GET", long)
    assert router.resolve("GET", long)[1]["path"].endswith("/x.md")


def test_a_request_tries_only_the_routes_its_literals_allow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A webhook delivery tried all ~30 routes in turn (a tenth of a duplicate's CPU in
    the app); now only those with its literal segments (v1, agents, triggers)."""
    tried: list[str] = []
    original = Route.match

    def counting(self: Route, segments: list[str], *, trailing: bool = False) -> object:
        tried.append(self.name)
        return original(self, segments, trailing=trailing)

    monkeypatch.setattr(Route, "match", counting)
    router = Router(ORDERED)
    route, _params = router.resolve("POST", "/v1/agents/a/triggers/gh:deliver")
    assert route.name == "deliverWebhook"
    assert set(tried) <= {
        "putTrigger",
        "getTrigger",
        "deleteTrigger",
        "rotateTriggerSecret",
        "deliverWebhook",
    }, tried
    tried.clear()
    router.resolve("GET", "/healthz")
    assert tried == ["getHealth"]
