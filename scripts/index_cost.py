#!/usr/bin/env python3
"""What a commit costs the SQLite index: WAL frames (pages) and SQL statements per
commit, both deterministic, and the process CPU per commit beside them (noisy).

Run from the repository root:

    .venv/bin/python scripts/index_cost.py              # 400 creates, then 400 updates
    .venv/bin/python scripts/index_cost.py -n 200 --show   # and one commit's statements

Sequential 2 KiB writes (the documents of ``profile_commit.py``) to one agent of a
``Store`` on a ``LocalBackend`` in a temporary folder under ``data/``. Frames: a
monitoring connection truncates the WAL (``wal_checkpoint(TRUNCATE)``), the store
makes a block of commits, and ``wal_checkpoint(PASSIVE)`` reports how many frames the
WAL holds: the pages those commits wrote. The full-text rows deferred out of the commit
are then flushed (a search), and that flush's frames are counted apart, per document.
Statements: every connection of the index gets a trace callback (transaction control
included). For instruction counts, run it with ``--untraced`` under ``valgrind
--tool=cachegrind --cache-sim=no`` at two ``-n`` and divide the difference by the
writes between them (see docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import benchkit

from memfs.canonical.backend import LocalBackend
from memfs.core import search
from memfs.core.store import Store
from memfs.core.tokens import Signer
from memfs.derived.index import connection

BLOCK = 20  # commits per frame count: well under the 1,000-frame autocheckpoint


def doc(i: int, salt: str = "") -> bytes:
    head = f"---\ndescription: profile note {i}{salt}\nkind: bench\n---\n".encode()
    body = (f"# Note {i}\n\n" + f"line {i}{salt} of a note the agent keeps. " * 60).encode()
    return (head + body)[:2048]


class Traced:
    """Counts the statements every index connection runs."""

    def __init__(self, *, enabled: bool = True) -> None:
        self.statements: list[str] = []
        self._connect = sqlite3.connect
        if not enabled:
            return

        def connect(*args: object, **kwargs: object) -> sqlite3.Connection:
            conn = self._connect(*args, **kwargs)  # type: ignore[arg-type]
            conn.set_trace_callback(self.statements.append)
            return conn

        connection.sqlite3.connect = connect  # type: ignore[assignment]


def flush(store: Store, agent: str) -> None:
    """A search: it indexes every deferred full-text row first."""
    search.search(store, Signer(b"0" * 32), agent_id=agent, query="note")


def measure(
    store: Store,
    traced: Traced,
    monitor: sqlite3.Connection,
    writes: list[tuple[str, bytes]],
    agent: str,
) -> dict[str, float]:
    frames = 0
    statements = 0
    nested = 0
    cpu = 0.0
    for start in range(0, len(writes), BLOCK):
        monitor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        before = len(traced.statements)
        t0 = time.process_time()
        for path, data in writes[start : start + BLOCK]:
            store.write(agent, path, data, actor="bench")
        cpu += time.process_time() - t0
        done = traced.statements[before:]
        statements += len(done)
        nested += sum(1 for sql in done if sql.startswith("--"))
        frames += monitor.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    n = len(writes)
    monitor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    before = len(traced.statements)
    t0 = time.process_time()
    flush(store, agent)
    flush_cpu = time.process_time() - t0
    flush_frames = monitor.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    return {
        "frames": frames / n,
        "statements": (statements - nested) / n,
        "nested": nested / n,
        "cpu_ms": cpu / n * 1e3,
        "flush_frames": flush_frames / n,
        "flush_statements": (len(traced.statements) - before) / n,
        "flush_cpu_ms": flush_cpu / n * 1e3,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=400, help="creates, then as many updates")
    parser.add_argument("--show", action="store_true", help="print one commit's statements")
    parser.add_argument(
        "--untraced",
        action="store_true",
        help="no statement trace (for instruction counts: tracing expands every statement)",
    )
    parser.add_argument(
        "--dir", type=Path, default=benchkit.REPO / "data",
        help="parent folder of the data (default ./data)",
    )
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    traced = Traced(enabled=not args.untraced)
    agent = "bench/cost"
    with tempfile.TemporaryDirectory(prefix="index-cost-", dir=args.dir) as tmp:
        root = Path(tmp)
        store = Store(root, backend=LocalBackend(root))
        if hasattr(store.index, "_idle"):  # the commits' own frames: no idle flush between
            store.index._checkpoints.close()  # nor a checkpoint restarting the WAL mid-block
            store.index._idle.close()
        store.create_agent(agent)
        for i in range(50):  # warm up: imports, schema pages, first folders
            store.write(agent, f"/memories/warm/w{i}.md", doc(i), actor="bench")
        flush(store, agent)
        monitor = sqlite3.connect(store.index.path, isolation_level=None)
        paths = [f"/memories/docs/d{i:07d}.md" for i in range(args.n)]
        creates = measure(store, traced, monitor, [(p, doc(i)) for i, p in enumerate(paths)], agent)
        updates = measure(
            store, traced, monitor, [(p, doc(i, " v2")) for i, p in enumerate(paths)], agent
        )
        if args.show:
            before = len(traced.statements)
            store.write(agent, "/memories/shown.md", doc(0), actor="bench")
            shown = traced.statements[before:]
        monitor.close()
        store.close()
    print(f"{args.n} creates, then {args.n} updates, of 2 KiB ({benchkit.machine()})")
    print(
        f"{'':10} {'frames/commit':>14} {'statements':>11} {'FTS5 inner':>11} {'CPU ms':>8}"
        f" {'flush frames/doc':>17} {'flush stmts/doc':>16} {'flush CPU ms/doc':>17}"
    )
    for name, r in (("creates", creates), ("updates", updates)):
        print(
            f"{name:10} {r['frames']:14.2f} {r['statements']:11.2f} {r['nested']:11.2f} {r['cpu_ms']:8.3f}"
            f" {r['flush_frames']:17.2f} {r['flush_statements']:16.2f} {r['flush_cpu_ms']:17.3f}"
        )
    if args.show:
        print("\none create's statements:")
        counts = Counter(s.split("(")[0][:110] for s in shown)
        for s in shown:
            print("  " + " ".join(s.split())[:150])
        del counts
    return 0


if __name__ == "__main__":
    sys.exit(main())
