#!/usr/bin/env python3
"""What the index's COMMIT costs a writer, with the WAL checkpointed in the commit
(SQLite's auto-checkpoint at 10,000 pages, as before the checkpointer thread) and by
the checkpointer thread (``derived/index/checkpointer.py``), alternated in one run.

Run from the repository root:

    .venv/bin/python scripts/commit_stalls.py            # 2 rounds of 2,000 creates each
    .venv/bin/python scripts/commit_stalls.py -n 1000 --rounds 3

Sequential 2 KiB creates (``index_cost.doc``) to one agent of a ``Store`` on a
``LocalBackend`` in a temporary folder under ``data/``. Every ``COMMIT`` statement of
the index is timed (a connection subclass); printed: its p50, mean, max and the sum of
the 10 slowest, the wall and process CPU per create (the thread's CPU included), and the
largest the WAL file grew. Ratios within a round are the figures to read: this machine
is shared.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import benchkit
from index_cost import doc

from memfs.canonical.backend import LocalBackend
from memfs.core.store import Store
from memfs.derived.index import connection

COMMITS: list[float] = []


class Timed(sqlite3.Connection):
    """Times every COMMIT statement it runs."""

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql == "COMMIT":
            t0 = time.perf_counter()
            cursor = super().execute(sql, *args)
            COMMITS.append(time.perf_counter() - t0)
            return cursor
        return super().execute(sql, *args)


def run(n: int, where: Path, *, thread: bool) -> dict[str, float]:
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        kwargs.setdefault("factory", Timed)
        return real_connect(*args, **kwargs)

    connection.sqlite3.connect = connect  # type: ignore[assignment]
    connection.WAL_AUTOCHECKPOINT = saved if thread else 10_000
    agent = "bench/stalls"
    with tempfile.TemporaryDirectory(prefix="commit-stalls-", dir=where) as tmp:
        root = Path(tmp)
        store = Store(root, backend=LocalBackend(root))
        index: Any = store.index
        if not thread:
            index._checkpoints.close()
        store.create_agent(agent)
        wal = Path(str(index.path) + "-wal")
        COMMITS.clear()
        biggest = 0
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(n):
            store.write(agent, f"/memories/docs/d{i:07d}.md", doc(i), actor="bench")
            if i % 50 == 0:
                biggest = max(biggest, os.stat(wal).st_size)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        biggest = max(biggest, os.stat(wal).st_size)
        runs = index._checkpoints.runs
        store.close()
    connection.sqlite3.connect = real_connect
    times = sorted(COMMITS)
    return {
        "p50": statistics.median(times) * 1e6,
        "mean": statistics.fmean(times) * 1e6,
        "max": times[-1] * 1e3,
        "top10": sum(times[-10:]) * 1e3,
        "wall": wall / n * 1e3,
        "cpu": cpu / n * 1e3,
        "wal": biggest / 2**20,
        "runs": runs,
    }


saved = connection.WAL_AUTOCHECKPOINT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=2000, help="creates per round and mode")
    parser.add_argument("--rounds", type=int, default=2, help="alternated rounds (default 2)")
    parser.add_argument(
        "--dir", type=Path, default=benchkit.REPO / "data",
        help="parent folder of the data (a real disk; default ./data)",
    )
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    print(f"{args.n} creates of 2 KiB per round and mode ({benchkit.machine()})")
    print(
        f"{'round':6} {'checkpoint':11} {'COMMIT p50 µs':>14} {'mean µs':>8} {'max ms':>7}"
        f" {'top10 ms':>9} {'wall ms':>8} {'CPU ms':>7} {'WAL MiB':>8} {'thread runs':>12}"
    )
    for r in range(args.rounds):
        results = {}
        for mode in ("commit", "thread") if r % 2 == 0 else ("thread", "commit"):
            results[mode] = res = run(args.n, args.dir, thread=mode == "thread")
            print(
                f"{r:<6} {mode:11} {res['p50']:14.0f} {res['mean']:8.0f} {res['max']:7.1f}"
                f" {res['top10']:9.1f} {res['wall']:8.3f} {res['cpu']:7.3f} {res['wal']:8.1f}"
                f" {res['runs']:12.0f}"
            )
        a, b = results["thread"], results["commit"]
        print(
            f"{'':6} {'thread/commit':11} {a['p50'] / b['p50']:13.2f}x {a['mean'] / b['mean']:7.2f}x"
            f" {'':7} {a['top10'] / b['top10']:8.2f}x {a['wall'] / b['wall']:7.2f}x"
            f" {a['cpu'] / b['cpu']:6.2f}x"
        )
    print(f"load average: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
