#!/usr/bin/env python3
"""Benchmark ``memory:inspect``: page latency must not grow with history, and a pinned
walk must stream the whole history at a fair fraction of a plain table scan.

Run from the repository root:

    .venv/bin/python scripts/bench_inspect.py            # 10k vs 1M versions (~10 minutes)
    .venv/bin/python scripts/bench_inspect.py --quick    # 10k vs 100k versions, ~60 s

Each size is one agent, grown with multi-change commits (``Store.apply``, ``--batch``
Puts each) over ``versions / 10`` paths: every path has ten versions (nine of them
superseded), each version two heading chunks and one wiki link. The small agent is
measured before the big one is built. At each size, inspect (called in-process, as the HTTP route does) is timed for one
page of each listing — chunks (50), graph nodes (100), graph edges (100), log (50) —
at the start, the middle and the end of the walk, pinned at the store's
``readTimestamp``; each edges page also with the old edges walk (every version's
content read, tests/inspect_oracle.py), interleaved, for a before/after in one run. Then the
whole agent is walked pinned (chunks, pages of 200; at both sizes, or only the small
one with ``--quick``) and compared with a plain ``SELECT`` of the same agent's
versions in the same run.

The working tree is switched off while building: it is derived, inspect never reads
it, and on ext4 every rewrite of an existing file (a new version) costs a forced
flush (``auto_da_alloc``), which would make a 1M-version build take hours. Nothing
here asserts: a MISS is a finding to explain (see docs/benchmarks.md, "Inspect").
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import benchkit
from benchkit import Report, ms, say

from memfs.core import inspect as inspect_mod
from memfs.core.store import Put, Store
from memfs.core.tokens import Signer
from memfs.derived.worktree import WorkTree
from memfs.domain.commits import parse_ts

sys.path.insert(0, str(benchkit.REPO / "tests"))
# the old edges walk, for the before/after of the edges pages
from inspect_oracle import patched

AGENTS = {"small": "bench/small", "big": "bench/big"}
ACTOR = "bench"
VERSIONS_PER_PATH = 10
# listing → page size measured (the contract's defaults)
PAGES = {"chunks": 50, "nodes": 100, "edges": 100, "log": 50}
WALK_PAGE = 200


def machine_facts(folder: Path) -> list[tuple[str, str]]:
    found = benchkit.mount_of(folder)
    mount = f"{found.kind} at {found.point}" if found else "?"
    return [*benchkit.machine_facts(), ("bench dir", f"{folder} ({mount})")]


# ---- building the history ----------------------------------------------------------


def content(i: int, paths: int) -> bytes:
    """Version ``i // paths + 1`` of path ``i % paths``: two heading chunks, one link."""
    p, v = i % paths, i // paths + 1
    return (
        f"# Note {p}\n\nVersion {v}: the user prefers short answers; see [[f{(p + 1) % 100:02d}/"
        f"n{(p + 1) % paths:07d}]].\n\n## Details\n\nEdited in step {i}.\n"
    ).encode()


def path_of(i: int, paths: int) -> str:
    p = i % paths
    return f"/memories/f{p % 100:02d}/n{p:07d}.md"


def grow(store: Store, agent: str, want: int, batch: int) -> float:
    """Give ``agent`` ``want`` versions of ``want / 10`` paths; seconds taken.

    A commit never changes a path twice."""
    store.create_agent(agent)
    paths = max(1, want // VERSIONS_PER_PATH)
    began = last = time.perf_counter()
    done = 0
    while done < want:
        upto = min(want, done + batch, (done // paths + 1) * paths)
        ops = [Put(path_of(i, paths), content(i, paths)) for i in range(done, upto)]
        store.apply(agent, ops, actor=ACTOR, message=f"bulk {done}-{upto - 1}")
        done = upto
        now = time.perf_counter()
        if now - last > 20:
            last = now
            say(f"    {done:,} versions ({done / (now - began):,.0f} versions/s)")
    return time.perf_counter() - began


# ---- measuring -----------------------------------------------------------------------


def call(
    store: Store,
    signer: Signer,
    agent: str,
    listing: str,
    limit: int,
    token: str | None,
    pin: int | None,
) -> dict[str, Any]:
    pages = {listing: inspect_mod.Page(limit, token)}
    target = inspect_mod.Target("agent", agent)
    return inspect_mod.inspect(store, target, pages, pin, signer)


def positions(store: Store, agent: str, listing: str, pin: int, limit: int) -> dict[str, Any]:
    """Where a full page starts: at the start (``None``), the middle and the end (the
    last full page) of the walk, as the position a previous page's token carries."""
    with store.index.read() as conn:
        if listing == "log":
            total = conn.execute(
                "SELECT COUNT(*) FROM commits WHERE agent_id=? AND visible_at<=?", (agent, pin)
            ).fetchone()[0]

            def after(offset: int) -> Any:
                row = conn.execute(
                    "SELECT visible_at, agent_id, revision FROM commits WHERE agent_id=?"
                    " AND visible_at<=? ORDER BY visible_at, revision LIMIT 1 OFFSET ?",
                    (agent, pin, offset),
                ).fetchone()
                return [row[0], row[1], 0, "", row[2]]
        else:
            total = conn.execute(
                "SELECT COUNT(*) FROM versions WHERE agent_id=? AND sha256 IS NOT NULL"
                " AND visible_from<=?",
                (agent, pin),
            ).fetchone()[0]

            def after(offset: int) -> Any:
                row = conn.execute(
                    "SELECT agent_id, path, version FROM versions WHERE agent_id=?"
                    " AND sha256 IS NOT NULL AND visible_from<=? ORDER BY path, version"
                    " LIMIT 1 OFFSET ?",
                    (agent, pin, offset),
                ).fetchone()
                # chunks: after chunk 1 (the last) of that version; edges: after its one
                # link; nodes: after it
                if listing in ("chunks", "edges"):
                    return [*row, 1 if listing == "chunks" else 0]
                return list(row)

        span = limit // (2 if listing == "chunks" else 1)  # versions (commits) in a page
        if total < 2 * span:
            raise SystemExit(f"{listing}: {total} rows is too few for pages of {limit}")
        return {
            "start": None,
            "middle": after(min(total // 2, total - span) - 1),
            "end": after(total - span - 1),
        }


def page_latency(
    store: Store, signer: Signer, agent: str, pin: int, repeat: int
) -> dict[tuple[str, str], list[float]]:
    """Latencies of one page of each listing at the start, middle and end of the walk."""
    out: dict[tuple[str, str], list[float]] = {}
    for listing, limit in PAGES.items():
        for where, position in positions(store, agent, listing, pin, limit).items():
            token = (
                None
                if position is None
                # the bench builds the position a previous page's token would carry
                else inspect_mod._encode(
                    signer, listing, inspect_mod.Target("agent", agent), pin, position
                )
            )
            body = call(store, signer, agent, listing, limit, token, pin)
            got = body["vectors"]["chunks"] if listing == "chunks" else None
            got = got if got is not None else body.get("graph", {}).get(listing)
            got = got if got is not None else body["log"]["steps"]
            if len(got) != limit:  # like is compared with like: full pages only
                raise SystemExit(f"{listing} page at {where} has {len(got)} items, not {limit}")
            samples: list[float] = []
            before: list[float] = []
            for _ in range(repeat):
                began = time.perf_counter()
                call(store, signer, agent, listing, limit, token, pin)
                samples.append(time.perf_counter() - began)
                if listing == "edges":  # the old walk, interleaved (tests/inspect_oracle.py)
                    with patched(True):
                        began = time.perf_counter()
                        old = call(store, signer, agent, listing, limit, token, pin)
                        before.append(time.perf_counter() - began)
                    assert old["graph"] == body["graph"], "the old walk answers the same page"
            out[(listing, where)] = samples
            if before:
                out[("edges, old walk", where)] = before
    return out


def walk(store: Store, signer: Signer, agent: str, pin: int) -> tuple[int, float]:
    """Chunks of the whole agent, walked pinned in pages of WALK_PAGE; (count, seconds)."""
    count, token = 0, None
    began = time.perf_counter()
    while True:
        body = call(store, signer, agent, "chunks", WALK_PAGE, token, pin)
        count += len(body["vectors"]["chunks"])
        token = body["nextChunkToken"] or None
        if token is None:
            return count, time.perf_counter() - began


def scan(store: Store, agent: str) -> tuple[int, float]:
    """The baseline: one plain SELECT of the agent's stored versions; (rows, seconds)."""
    began = time.perf_counter()
    with store.index.read() as conn:
        rows = conn.execute(
            "SELECT agent_id, path, version, sha256, bytes, description, valid_from, valid_to,"
            " visible_to, revision FROM versions WHERE agent_id=? AND sha256 IS NOT NULL"
            " ORDER BY path, version",
            (agent,),
        ).fetchall()
    return len(rows), time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="10k vs 100k versions, < ~60 s")
    parser.add_argument("--small", type=int, help="versions of the small store (default 10k)")
    parser.add_argument("--big", type=int, help="versions of the big store (1M; quick 100k)")
    parser.add_argument("--batch", type=int, default=50, help="Puts per commit (default 50)")
    parser.add_argument("--repeat", type=int, help="timed calls per page (default 30; quick 20)")
    parser.add_argument(
        "--dir", type=Path, default=benchkit.REPO / "data", help="parent of the temp dir"
    )
    parser.add_argument("--keep", action="store_true", help="leave the temp data in place")
    args = parser.parse_args(argv)
    small = args.small or 10_000
    big = args.big or (100_000 if args.quick else 1_000_000)
    repeat = args.repeat or (20 if args.quick else 30)
    if not 0 < small < big or args.batch < 1:
        parser.error("need 0 < --small < --big and --batch >= 1")

    args.dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="bench-inspect-", dir=args.dir))
    say(
        f"memfs inspect benchmark ({'quick' if args.quick else 'full'}): {small:,} vs "
        f"{big:,} versions (one agent each), {args.batch} Puts per commit"
    )
    facts = machine_facts(root)
    for key, value in facts:
        say(f"  {key}: {value}")
    # Derived and unread by inspect; see the module docstring.
    WorkTree.update = lambda *a, **k: None  # type: ignore[method-assign]
    report = Report()
    began = time.perf_counter()
    store = Store(root / "data")
    try:
        signer = Signer.for_data_dir(root / "data")
        latency: dict[int, dict[tuple[str, str], list[float]]] = {}
        walks: dict[int, tuple[int, float, int, float]] = {}
        building = 0.0
        for size, agent in ((small, AGENTS["small"]), (big, AGENTS["big"])):
            say(f"\n  building {agent}: {size:,} versions")
            took = grow(store, agent, size, args.batch)
            building += took if size == big else 0.0
            gc.collect()
            # Pinned as a client pins a walk: at the first response's readTimestamp.
            pin = parse_ts(call(store, signer, agent, "log", 1, None, None)["readTimestamp"])
            latency[size] = page_latency(store, signer, agent, pin, repeat)
            for (listing, where), samples in latency[size].items():
                say(f"    {listing:<6} page at {where:<6}: p50 {ms(benchkit.median(samples), 2)}")
            if args.quick and size == big:
                continue  # a whole walk of the big store takes minutes; full mode does it
            chunks, walked = walk(store, signer, agent, pin)
            rows, scanned = scan(store, agent)
            walks[size] = (chunks, walked, rows, scanned)
            say(
                f"    pinned walk: {chunks:,} chunks in {walked:.2f} s "
                f"({chunks / walked:,.0f} chunks/s); SELECT scan: {rows:,} rows in "
                f"{scanned:.3f} s ({rows / scanned:,.0f} rows/s)"
            )
        say("")
        report.add(
            "build (Store.apply, tree off)",
            f"{big:,} versions in {building:.0f} s ({big / building:,.0f} versions/s)",
        )
        for where in ("start", "middle", "end"):
            for size in (small, big):
                old = benchkit.median(latency[size][("edges, old walk", where)])
                new = benchkit.median(latency[size][("edges", where)])
                report.add(
                    f"edges page of 100 at {where}, {size:,}: old walk / links table",
                    f"{ms(old, 2)} / {ms(new, 2)} = {old / new:.1f}x",
                )
        for listing, limit in PAGES.items():
            for where in ("start", "middle", "end"):
                a = benchkit.median(latency[small][(listing, where)])
                b = benchkit.median(latency[big][(listing, where)])
                report.add(
                    f"{listing} page of {limit} at {where}, {big:,} / {small:,}",
                    f"{ms(b, 2)} / {ms(a, 2)} = {b / a:.2f}x",
                    "<= 1.5x",
                    b / a <= 1.5,
                )
        for size, (chunks, walked, rows, scanned) in walks.items():
            report.add(
                f"pinned walk at {size:,} versions",
                f"{chunks / walked:,.0f} chunks/s ({chunks:,} chunks in {walked:.1f} s); "
                f"SELECT scan {rows / scanned:,.0f} rows/s; scan/walk "
                f"{(rows / scanned) / (chunks / walked):.1f}x",
            )
        say(f"\nfinished in {time.perf_counter() - began:.0f} s\n")
        say("| fact | value |\n|---|---|")
        for key, value in facts:
            say(f"| {key} | {value} |")
        say("")
        say(report.table())
    finally:
        store.close()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
