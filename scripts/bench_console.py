#!/usr/bin/env python3
"""Server time of the console's pages, as ratios to the JSON API's time for the same data.

Run from the repository root:

    .venv/bin/python scripts/bench_console.py             # 100k memories in one agent
    .venv/bin/python scripts/bench_console.py --memories 20000 --rounds 20   # quicker

One agent gets ``--memories`` memories in 100 folders (a few with two versions), built
with multi-change commits (``Store.apply``; the working tree is switched off, as in
bench_inspect.py: it is derived and no page reads it). Then each console page and the
``/v1`` request(s) that return the same data are called in-process on the ASGI app (no
network, no client: the app's own time), ``--rounds`` times each, interleaved, and the
medians compared. The issue's target is 50 ms per page at 100k memories; on a shared,
loaded machine the ratio is the figure to trust, the absolute time a guide. The agent
page is measured twice: read again and as the first view after a commit (the summary's
counts are kept in the agent's index row by each commit; they used to be a scan of every
memory on the first view after one). Last, the inspect page and memory:inspect's graph
page are timed before and after the links table in the same run: the old edges walk
(tests/inspect_oracle.py, every stored version's content read) swapped in for
``--old-rounds`` rounds, interleaved with the shipped one (0 leaves that out). Then the
inspect page with its log read as before commits rows kept their first changes (every
change decoded, then cut: ``full_log``) against the shipped one, interleaved, and the
page's sections one at a time through core.inspect as the console asks for them. Last,
the inspect page rendered by the template's loops with 20 changes a log step (as before
console/inspect_html.py) against the shipped one, interleaved, alone and each request
after the API's inspect call. Nothing here asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import benchkit
from benchkit import Report, ms, say

from memfs.config import Settings
from memfs.console import pages, render
from memfs.core import inspect as inspecting
from memfs.core.store import Put, Store
from memfs.derived.worktree import WorkTree
from memfs.domain.commits import LOG_HEAD
from memfs.http.app import MemfsApp, build

AGENT = "bench/console"
FOLDERS = 100


def grow(data: Path, memories: int, batch: int = 2000) -> None:
    store = Store(data)
    try:
        store.create_agent(AGENT)
        for start in range(0, memories, batch):
            ops = [
                Put(
                    f"/memories/f{i % FOLDERS:02d}/n{i:07d}.md",
                    f"# note {i}\n\nbody {i}\n".encode(),
                )
                for i in range(start, min(memories, start + batch))
            ]
            store.apply(AGENT, ops, actor="bench", message=f"bulk {start}")
        store.apply(
            AGENT, [Put("/memories/f00/n0000000.md", b"# note 0\n\nchanged\n")], actor="bench"
        )
    finally:
        store.close()


async def call(
    app: MemfsApp,
    method: str,
    target: str,
    headers: dict[str, str],
    body: bytes = b"",
    answer_headers: list[tuple[bytes, bytes]] | None = None,
) -> tuple[int, bytes]:
    """One request straight into the ASGI app; the answer's headers go to
    ``answer_headers`` when given."""
    path, _, query = target.partition("?")
    scope: dict[str, Any] = {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "root_path": "",
    }
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            await asyncio.sleep(3600)
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    status = 0
    chunks: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            if answer_headers is not None:
                answer_headers.extend(message["headers"])
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)  # type: ignore[arg-type]
    return status, b"".join(chunks)


async def timed(app: MemfsApp, requests: list[tuple[str, str, dict[str, str], bytes]]) -> float:
    began = time.perf_counter()
    for method, target, headers, body in requests:
        status, answer = await call(app, method, target, headers, body)
        assert status == 200, (target, status, answer[:300])
    return time.perf_counter() - began


async def run(args: argparse.Namespace, root: Path) -> Report:
    data = root / "data"
    say(f"building {args.memories:,} memories ...")
    began = time.perf_counter()
    grow(data, args.memories)
    say(f"  built in {time.perf_counter() - began:.1f} s")
    app = build(Settings(data=data, admin_key=benchkit.ADMIN_KEY))
    app.run_runs = False
    api = benchkit.admin_headers()
    json_body = {**api, "Content-Type": "application/json"}
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    _status, page = await call(app, "GET", "/console/login", {})
    token = page.decode().split('name="csrf" value="', 1)[1].split('"', 1)[0]
    cookie = f"memfs_console_login={token}"
    body = f"csrf={token}&key={benchkit.ADMIN_KEY}".encode()
    answer: list[tuple[bytes, bytes]] = []

    async def login() -> str:
        headers = {"Cookie": cookie, "Content-Type": form["Content-Type"]}
        await call(app, "POST", "/console/login", headers, body, answer)
        for name, value in answer:
            if name == b"set-cookie" and value.startswith(b"memfs_console="):
                return value.decode().split(";", 1)[0]
        raise RuntimeError("sign-in failed")

    session = {"Cookie": await login()}
    agent = quote(AGENT, safe="")
    v1 = f"/v1/agents/{agent}"
    page_items = 200
    inspect_all = json.dumps({"vectors": {}, "graph": {}, "log": {}}).encode()
    cases = {
        "agents list": (
            [("GET", "/console/agents", session, b"")],
            [("GET", "/v1/agents", api, b"")],
        ),
        "agent page (summary + folder of 1000)": (
            [("GET", f"/console/agents/{agent}?folder=%2Fmemories%2Ff07", session, b"")],
            [
                ("GET", f"{v1}/memory", api, b""),
                ("GET", f"{v1}/memories?pathPrefix=f07&depth=1&limit={page_items}", api, b""),
            ],
        ),
        "agent page (root, 100 folders)": (
            [("GET", f"/console/agents/{agent}", session, b"")],
            [
                ("GET", f"{v1}/memory", api, b""),
                ("GET", f"{v1}/memories?depth=1&limit={page_items}", api, b""),
            ],
        ),
        "memory page (rendered, raw, versions)": (
            [("GET", f"/console/agents/{agent}/memories/f00/n0000000.md", session, b"")],
            [
                ("GET", f"{v1}/memories/f00/n0000000.md", api, b""),
                ("GET", f"{v1}/versions?path=/memories/f00/n0000000.md", api, b""),
            ],
        ),
        "diff page": (
            [
                (
                    "GET",
                    f"/console/agents/{agent}/memories/f00/n0000000.md?from=1&to=2",
                    session,
                    b"",
                )
            ],
            [
                ("GET", f"{v1}/memories/f00/n0000000.md?version=1", api, b""),
                ("GET", f"{v1}/memories/f00/n0000000.md?version=2", api, b""),
                ("GET", f"{v1}/versions?path=/memories/f00/n0000000.md", api, b""),
            ],
        ),
        "inspect page (all three sections)": (
            [("GET", f"/console/agents/{agent}/inspect", session, b"")],
            [("POST", f"{v1}/memory:inspect", json_body, inspect_all)],
        ),
        # The API has no history route: its closest JSON view is inspect's log section.
        "history page": (
            [("GET", f"/console/agents/{agent}/history", session, b"")],
            [("POST", f"{v1}/memory:inspect", json_body, json.dumps({"log": {}}).encode())],
        ),
        "runs page": (
            [("GET", f"/console/agents/{agent}/runs", session, b"")],
            [("GET", f"{v1}/runs", api, b"")],
        ),
    }
    report = Report()
    # The first view after a commit: the summary's counts must come from the agent's
    # index row, kept by the commit, not from a scan. Measured with a one-memory commit
    # (untimed) before each request.
    first_view = cases["agent page (summary + folder of 1000)"]
    cases["agent page, first view after a commit"] = first_view
    store = app.services.store
    writes = iter(range(10**9))

    def commit() -> None:
        path = f"/memories/f07/z{next(writes):07d}.md"
        store.apply(AGENT, [Put(path, b"# new\n")], actor="bench")

    if args.no_inspect:
        del cases["inspect page (all three sections)"]
    for name, (console, reference) in cases.items():
        after_commit = name == "agent page, first view after a commit"
        await timed(app, console)  # warm up both
        await timed(app, reference)
        mine: list[float] = []
        theirs: list[float] = []
        for _ in range(args.rounds):
            if after_commit:
                commit()
            mine.append(await timed(app, console))
            if after_commit:
                commit()
            theirs.append(await timed(app, reference))
        c, r = benchkit.median(mine), benchkit.median(theirs)
        report.add(
            f"{name}: console / JSON API",
            f"{c / r:.2f}x ({ms(c, 1)} vs {ms(r, 1)})",
            "≤ 50 ms",
            c <= 0.050,
        )
    if args.old_rounds:
        await before_after(app, args, session, api, agent, report)
    await log_before_after(app, args, session, api, agent, report)
    await render_before_after(app, args, session, api, agent, report)
    app.services.store.close()
    return report


async def before_after(
    app: MemfsApp,
    args: argparse.Namespace,
    session: dict[str, str],
    api: dict[str, str],
    agent: str,
    report: Report,
) -> None:
    """The inspect page and memory:inspect's graph page (nodes and edges), with the
    edges walk as it was (every stored version's content read, tests/inspect_oracle.py)
    and as shipped (the index's links table), interleaved in this run."""
    sys.path.insert(0, str(benchkit.REPO / "tests"))
    from inspect_oracle import patched

    graph = json.dumps({"graph": {}}).encode()
    json_body = {**api, "Content-Type": "application/json"}
    cases = {
        "inspect page (console)": [("GET", f"/console/agents/{agent}/inspect", session, b"")],
        "memory:inspect graph page (API)": [
            ("POST", f"/v1/agents/{agent}/memory:inspect", json_body, graph)
        ],
    }
    for name, requests in cases.items():
        await timed(app, requests)  # warm up
        old: list[float] = []
        new: list[float] = []
        for i in range(args.rounds):
            if i < args.old_rounds:
                with patched(True):
                    old.append(await timed(app, requests))
            new.append(await timed(app, requests))
        o, n = benchkit.median(old), benchkit.median(new)
        say(f"  {name}: before {ms(o, 1)}, after {ms(n, 1)}")
        report.add(
            f"{name}: before (edges from contents) / after (links table)",
            f"{o / n:,.0f}x ({ms(o, 1)} vs {ms(n, 1)})",
            "after ≤ 50 ms",
            n <= 0.050,
        )


@contextlib.contextmanager
def full_log() -> Iterator[None]:
    """The console's log as it was before commits rows kept their first changes: every
    change of every commit decoded (the API's log), then cut to the first LOG_HEAD."""

    def old_log(*a: Any, heads: bool = False) -> Iterator[tuple[Any, dict[str, Any]]]:
        for position, step in original(*a, heads=False):
            if heads and step["type"] == "commit":
                step["changeCount"] = len(step["changes"])
                step["changes"] = step["changes"][:LOG_HEAD]
            yield position, step

    original = inspecting._log
    inspecting._log = old_log  # type: ignore[assignment]
    try:
        yield
    finally:
        inspecting._log = original


async def log_before_after(
    app: MemfsApp,
    args: argparse.Namespace,
    session: dict[str, str],
    api: dict[str, str],
    agent: str,
    report: Report,
) -> None:
    """The inspect page with its log as it was (every change of every commit on the page
    decoded, then cut: ``full_log``) and as shipped (each commit row's change count and
    first changes), interleaved in this run; then the page's sections one at a time,
    as core.inspect reads them for the console (``heads``)."""
    page = [("GET", f"/console/agents/{agent}/inspect", session, b"")]
    await timed(app, page)  # warm up
    old: list[float] = []
    new: list[float] = []
    for _ in range(args.rounds):
        with full_log():
            old.append(await timed(app, page))
        new.append(await timed(app, page))
    o, n = benchkit.median(old), benchkit.median(new)
    report.add(
        "inspect page: before (every change decoded) / after (commit heads)",
        f"{o / n:,.1f}x ({ms(o, 1)} vs {ms(n, 1)})",
        "after ≤ 50 ms",
        n <= 0.050,
    )
    store = app.services.store
    signer = app.services.signer
    target = inspecting.Target("agent", AGENT)
    sections = {
        "vectors": ["chunks"],
        "graph": ["nodes", "edges"],
        "log (console: heads)": ["log"],
    }
    for name, listings in sections.items():
        pages = {x: inspecting.Page(inspecting.LIMITS[x][0], None) for x in listings}
        times = []
        for _ in range(max(3, args.rounds // 2)):
            began = time.perf_counter()
            inspecting.inspect(store, target, pages, None, signer, heads=True)
            times.append(time.perf_counter() - began)
        report.add(f"core inspect, {name} section alone", ms(benchkit.median(times), 1))
    json_body = {**api, "Content-Type": "application/json"}
    one = json.dumps({"log": {}}).encode()
    request = [("POST", f"/v1/agents/{agent}/memory:inspect", json_body, one)]
    times = [await timed(app, request) for _ in range(3)]
    report.add("memory:inspect (API), log section alone", ms(benchkit.median(times), 1))


_OLD_TEMPLATE: dict[int, Any] = {}  # compiled once: compiling is not rendering


@contextlib.contextmanager
def template_loops(app: MemfsApp) -> Iterator[None]:
    """The inspect page as it was rendered before console/inspect_html.py: the
    template's own loops (tests/test_console_inspect_html.py keeps them), each log step
    listing its first LOG_HEAD changes, the field boxes without the encoder made once."""
    sys.path.insert(0, str(benchkit.REPO / "tests"))
    import test_console_inspect_html as loops

    assert app.console is not None
    env = app.console.templates
    env.filters["change_items"] = loops.change_items
    source = (benchkit.REPO / "src/memfs/console/templates/inspect.html").read_text()
    for listing, loop in loops.OLD.items():
        source = source.replace(
            f"{{{{ items.{listing} }}}}", loop.replace(" in items %}", f" in sections.{listing} %}}")
        )
    old = _OLD_TEMPLATE.get(id(env)) or _OLD_TEMPLATE.setdefault(id(env), env.from_string(source))
    shipped = env.get_template
    saved = (pages.LOG_SHOWN, render._C_ENCODER, render._C_FLAT)

    def get_template(name: str, *a: Any, **k: Any) -> Any:
        return old if name == "inspect.html" else shipped(name, *a, **k)

    env.get_template = get_template  # type: ignore[method-assign]
    pages.LOG_SHOWN, render._C_ENCODER, render._C_FLAT = LOG_HEAD, None, None
    try:
        yield
    finally:
        env.get_template = shipped  # type: ignore[method-assign]
        pages.LOG_SHOWN, render._C_ENCODER, render._C_FLAT = saved


async def render_before_after(
    app: MemfsApp,
    args: argparse.Namespace,
    session: dict[str, str],
    api: dict[str, str],
    agent: str,
    report: Report,
) -> None:
    """The inspect page rendered by the template's loops with 20 changes a log step
    (``template_loops``) and as shipped (inspect_html.py, 5 changes a step), interleaved
    in this run: alone, then each request after the API's inspect call for all three
    sections (whose garbage and cache misses land in the next request's time)."""
    page = [("GET", f"/console/agents/{agent}/inspect", session, b"")]
    json_body = {**api, "Content-Type": "application/json"}
    inspect_all = json.dumps({"vectors": {}, "graph": {}, "log": {}}).encode()
    bulk = [("POST", f"/v1/agents/{agent}/memory:inspect", json_body, inspect_all)]
    with template_loops(app):
        await timed(app, page)  # warm up both
    await timed(app, page)
    for label, before_each in (("alone", None), ("after the API's inspect call", bulk)):
        old: list[float] = []
        new: list[float] = []
        old_cpu: list[float] = []
        new_cpu: list[float] = []
        for _ in range(args.rounds):
            for times, cpus, loops in ((old, old_cpu, True), (new, new_cpu, False)):
                if before_each:
                    await timed(app, before_each)
                # The process's CPU time too (both threads: the page's core read runs
                # in a worker): on a machine shared with other work it swings less
                # than the wall clock.
                cpu = time.process_time()
                with template_loops(app) if loops else contextlib.nullcontext():
                    times.append(await timed(app, page))
                cpus.append(time.process_time() - cpu)
        o, n = benchkit.median(old), benchkit.median(new)
        oc, nc = benchkit.median(old_cpu), benchkit.median(new_cpu)
        report.add(
            f"inspect page {label}: before (template loops, 20 changes) / after",
            f"{o / n:,.2f}x ({ms(o, 1)} vs {ms(n, 1)}; CPU {ms(oc, 1)} vs {ms(nc, 1)})",
            "after ≤ 50 ms",
            n <= 0.050,
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--memories", type=int, default=100_000, help="memories in the agent (default 100000)"
    )
    parser.add_argument("--rounds", type=int, default=30, help="timed requests per page (default 30)")
    parser.add_argument(
        "--no-inspect",
        action="store_true",
        help="leave out the inspect page's console / API comparison",
    )
    parser.add_argument(
        "--old-rounds",
        type=int,
        default=3,
        help="rounds of the old edges walk (20 s a call at 100k memories; default 3;"
        " 0 leaves that comparison out)",
    )
    args = parser.parse_args()
    WorkTree.update = lambda *a, **k: None  # type: ignore[method-assign]
    for fact, value in benchkit.machine_facts():
        say(f"{fact}: {value}")
    with tempfile.TemporaryDirectory(prefix="memfs-bench-console-") as root:
        report = asyncio.run(run(args, Path(root)))
    say("")
    say(report.table())


if __name__ == "__main__":
    main()
