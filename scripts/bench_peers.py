#!/usr/bin/env python3
"""memfs against its peers, in one run on one disk: LangGraph's SqliteStore and plain files.

Run from the repository root (the peer is a bench-only extra):

    .venv/bin/pip install -e '.[bench]'          # langgraph-checkpoint-sqlite
    .venv/bin/python scripts/bench_peers.py      # ~3-6 min (longer on a loaded machine)
    .venv/bin/python scripts/bench_peers.py --quick     # ~1-2 min: fewer writes and reads
    .venv/bin/python scripts/bench_peers.py --million   # also a page at 1M (~15+ min more)

Four in-process stores, each in its own folder under one temp folder on the same
filesystem, all storing the same 2 KiB Markdown documents:

- **memfs**: ``Store`` on a ``LocalBackend`` (a commit is a durable log entry plus the
  index transaction and the working-tree file);
- **sqlite-shipped**: ``langgraph.store.sqlite.SqliteStore`` on the connection its
  ``from_conn_string`` opens (SQLite's defaults: rollback journal, ``synchronous=FULL``);
- **sqlite-wal-full**: the same store after ``PRAGMA journal_mode=WAL`` and
  ``PRAGMA synchronous=FULL`` (every commit fsyncs the WAL: durable);
- **files**: the plain-file floor, one file per document: temp file, ``fsync``,
  ``rename``, directory ``fsync``.

Each store's durability settings are printed beside its numbers. Measured, in 3 rounds
(the median counts) with the stores interleaved so they share the machine's mood:
durable creates and updates (single writer, blocks of 25 alternating between stores),
16 concurrent writers (memfs: 16 threads on 16 agents; SqliteStore: 16 threads on one
store; files: 16 threads on 16 folders), CPU per write (process CPU time / writes),
read p50 of a random existing document, and a 200-item page from the middle of a
folder of 1k and 20k documents (SqliteStore: ``search`` with ``offset``, its paging;
files: ``listdir``, sort, ``stat`` of the 200). The targets of issue 17 (creates and
updates >= 1.0x SqliteStore WAL+FULL and >= 1.2x the plain-file floor; 16 writers >= 2x
SqliteStore WAL+FULL with 16 threads; CPU per commit <= 0.5 ms; read p50 <= 2x a raw
file read; the page at 20k (and 1M) <= 1.5x the page at 1k) end the run as PASS/MISS
lines and a Markdown table. Nothing asserts: this machine is shared, so read the
ratios, not the rates.
"""

from __future__ import annotations

import argparse
import bisect
import os
import random
import secrets
import sqlite3
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import benchkit
from benchkit import Report, say

from memfs.core.store import Put, Store

ACTOR = "bench"
PAGE = 200
BLOCK = 25  # single-writer writes alternate between stores every BLOCK writes
THREADS = 16
INSTALL = "pip install -e '.[bench]'   (langgraph-checkpoint-sqlite, a bench-only extra)"


def doc(i: int, salt: str = "") -> bytes:
    """A 2 KiB Markdown document with plain frontmatter, as an agent writes them."""
    head = f"---\ndescription: peer bench note {i}{salt}\nkind: bench\n---\n".encode()
    body = (f"# Note {i}\n\n" + f"line {i}{salt} of a note the agent keeps. " * 60).encode()
    return (head + body)[:2048]


def name(i: int) -> str:
    return f"d{i:07d}.md"


class Peer(Protocol):
    label: str

    def durability(self) -> str: ...
    def put(self, ns: str, i: int, data: bytes) -> None: ...
    def read(self, ns: str, i: int) -> object: ...
    def load(self, ns: str, start: int, stop: int) -> None: ...
    def page(self, ns: str, n: int) -> int: ...
    def prepare(self, ns: str) -> None: ...
    def close(self) -> None: ...


# ---- memfs ---------------------------------------------------------------------------


class Memfs:
    label = "memfs"

    def __init__(self, root: Path) -> None:
        self.store = Store(root)
        self.agents: set[str] = set()

    def durability(self) -> str:
        return (
            "log entry: temp + fsync + link + dir fsync (LocalBackend), before the answer; "
            "index: SQLite WAL synchronous=NORMAL (derived, replayed from the log)"
        )

    def _agent(self, ns: str) -> str:
        agent = f"bench/{ns}"
        if agent not in self.agents:
            self.store.create_agent(agent)
            self.agents.add(agent)
        return agent

    def put(self, ns: str, i: int, data: bytes) -> None:
        self.store.write(self._agent(ns), f"/memories/docs/{name(i)}", data, actor=ACTOR)

    def read(self, ns: str, i: int) -> object:
        return self.store.read(f"bench/{ns}", f"/memories/docs/{name(i)}").content

    def load(self, ns: str, start: int, stop: int) -> None:
        agent = self._agent(ns)
        for first in range(start, stop, 1000):
            keys = range(first, min(stop, first + 1000))
            ops = [Put(f"/memories/docs/{name(i)}", doc(i)) for i in keys]
            self.store.apply(agent, ops, actor=ACTOR, message="bulk load")

    def page(self, ns: str, n: int) -> int:
        items, _ = self.store.list_memories(
            f"bench/{ns}", "docs", after=f"/memories/docs/{name(n // 2)}", limit=PAGE
        )
        return len(items)

    def prepare(self, ns: str) -> None:
        """The agent, made before the timed part (a namespace costs the others nothing)."""
        self._agent(ns)

    def close(self) -> None:
        self.store.close()


# ---- LangGraph SqliteStore -----------------------------------------------------------


def sqlite_store_class() -> Any:
    try:
        from langgraph.store.sqlite import SqliteStore
    except ImportError:
        raise SystemExit(
            "bench_peers needs LangGraph's SqliteStore, which is not installed here.\n"
            f"Install it with:  .venv/bin/{INSTALL}"
        ) from None
    return SqliteStore


class Sqlite:
    def __init__(self, path: Path, *, wal_full: bool) -> None:
        cls = sqlite_store_class()
        # The connection SqliteStore.from_conn_string opens (kept open for the run).
        self._cm = cls.from_conn_string(str(path))
        self.store = self._cm.__enter__()
        self.conn: sqlite3.Connection = self.store.conn
        if wal_full:
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
        self.store.setup()
        self.label = "sqlite-wal-full" if wal_full else "sqlite-shipped"

    def durability(self) -> str:
        with self.store.lock:
            journal = self.conn.execute("PRAGMA journal_mode").fetchone()[0]
            sync = self.conn.execute("PRAGMA synchronous").fetchone()[0]
        level = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(sync, str(sync))
        return f"SQLite journal_mode={journal} synchronous={level}, autocommit per put"

    def put(self, ns: str, i: int, data: bytes) -> None:
        self.store.put(("bench", ns), name(i), {"text": data.decode()})

    def read(self, ns: str, i: int) -> object:
        item = self.store.get(("bench", ns), name(i))
        assert item is not None
        return item.value["text"]

    def load(self, ns: str, start: int, stop: int) -> None:
        from langgraph.store.base import PutOp

        for first in range(start, stop, 1000):
            keys = range(first, min(stop, first + 1000))
            self.store.batch(
                [PutOp(("bench", ns), name(i), {"text": doc(i).decode()}) for i in keys]
            )

    def page(self, ns: str, n: int) -> int:
        return len(self.store.search(("bench", ns), limit=PAGE, offset=n // 2))

    def prepare(self, ns: str) -> None:
        return None

    def close(self) -> None:
        self._cm.__exit__(None, None, None)


# ---- plain files ---------------------------------------------------------------------


def fsync_dir(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Files:
    label = "files"

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir()

    def durability(self) -> str:
        return "temp + fsync + rename + dir fsync per file"

    def _folder(self, ns: str) -> str:
        folder = f"{self.root}/{ns}"
        if not os.path.isdir(folder):
            os.makedirs(folder, exist_ok=True)
            fsync_dir(str(self.root))
        return folder

    def put(self, ns: str, i: int, data: bytes) -> None:
        folder = self._folder(ns)
        tmp = f"{folder}/.tmp-{secrets.token_hex(8)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, f"{folder}/{name(i)}")
        fsync_dir(folder)

    def read(self, ns: str, i: int) -> object:
        with open(f"{self.root}/{ns}/{name(i)}", "rb") as f:
            return f.read()

    def load(self, ns: str, start: int, stop: int) -> None:
        folder = self._folder(ns)
        for i in range(start, stop):
            with open(f"{folder}/{name(i)}", "wb") as f:
                f.write(doc(i))

    def page(self, ns: str, n: int) -> int:
        folder = f"{self.root}/{ns}"
        names = sorted(e for e in os.listdir(folder) if not e.startswith("."))
        start = bisect.bisect_right(names, name(n // 2))
        for entry in names[start : start + PAGE]:
            os.stat(f"{folder}/{entry}")
        return len(names[start : start + PAGE])

    def prepare(self, ns: str) -> None:
        return None

    def close(self) -> None:
        pass


# ---- measurements --------------------------------------------------------------------


class Tally:
    """Wall and process-CPU seconds spent by one store on one kind of write."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self.ops = 0

    def timed(self, fn: Callable[[], None], ops: int) -> None:
        cpu, began = time.process_time(), time.perf_counter()
        fn()
        self.wall += time.perf_counter() - began
        self.cpu += time.process_time() - cpu
        self.ops += ops


def single_writer(peers: list[Peer], ns: str, n: int, first: int, salt: str) -> dict[str, Tally]:
    """``n`` sequential durable puts of keys ``first``.. per store, in interleaved blocks."""
    tallies = {p.label: Tally() for p in peers}
    for b, start in enumerate(range(first, first + n, BLOCK)):
        order = peers if b % 2 == 0 else peers[::-1]
        for peer in order:
            keys = range(start, min(first + n, start + BLOCK))

            def run(peer: Peer = peer, keys: range = keys) -> None:
                for i in keys:
                    peer.put(ns, i, doc(i, salt))

            tallies[peer.label].timed(run, len(keys))
    return tallies


def concurrent_writers(peer: Peer, ns: str, per_thread: int, salt: str) -> Tally:
    """THREADS threads, each putting ``per_thread`` new keys into its own namespace."""
    tally = Tally()
    barrier = threading.Barrier(THREADS + 1)
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        peer.prepare(f"{ns}-{t}")  # memfs: its agent, made before the clock starts
        barrier.wait()
        try:
            for i in range(per_thread):
                peer.put(f"{ns}-{t}", i, doc(i, salt))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()

    def run() -> None:
        barrier.wait()
        for thread in threads:
            thread.join()

    tally.timed(run, THREADS * per_thread)
    if errors:
        raise errors[0]
    return tally


def read_p50s(peers: list[Peer], ns: str, n: int, reads: int, seed: int) -> dict[str, float]:
    """p50 latency of reading a random existing key, the stores taking turns per read."""
    rng = random.Random(seed)
    samples: dict[str, list[float]] = {p.label: [] for p in peers}
    for k in range(reads):
        i = rng.randrange(n)
        for peer in peers if k % 2 == 0 else peers[::-1]:
            began = time.perf_counter()
            peer.read(ns, i)
            samples[peer.label].append(time.perf_counter() - began)
    return {label: statistics.median(s) for label, s in samples.items()}


def page_latency(
    peers: list[Peer], ns: str, n: int, repeat: int, budget_s: float
) -> dict[str, float]:
    """Median latency of a 200-item page from the middle of a folder of ``n`` documents:
    ``repeat`` pages per store, the stores taking turns, fewer (at least 5) for a store
    that has spent ``budget_s`` on them (SqliteStore's offset page is slow at 20k)."""
    samples: dict[str, list[float]] = {p.label: [] for p in peers}
    spent = dict.fromkeys(samples, 0.0)
    for peer in peers:
        got = peer.page(ns, n)  # warm, and check
        if got != PAGE:
            raise SystemExit(f"{peer.label}: a page at {n:,} held {got} entries, not {PAGE}")
    for k in range(repeat):
        for peer in peers if k % 2 == 0 else peers[::-1]:
            if k >= 5 and spent[peer.label] > budget_s:
                continue
            began = time.perf_counter()
            peer.page(ns, n)
            took = time.perf_counter() - began
            samples[peer.label].append(took)
            spent[peer.label] += took
    return {label: statistics.median(s) for label, s in samples.items()}


# ---- the run -------------------------------------------------------------------------


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}/s"


def table(rows: list[tuple[str, dict[str, str]]], labels: list[str]) -> str:
    out = ["| op | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
    out += [
        f"| {op} | " + " | ".join(cells[label] for label in labels) + " |" for op, cells in rows
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer writes and reads per round")
    parser.add_argument("--million", action="store_true", help="also a page at 1M documents")
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds; the median counts (default 3)"
    )
    parser.add_argument("--dir", type=Path, default=benchkit.REPO / "data", help="parent folder")
    parser.add_argument("--keep", action="store_true", help="keep the data folder")
    args = parser.parse_args(argv)
    sqlite_store_class()  # fail early, with the install hint
    writes = 100 if args.quick else 300
    per_thread = 10 if args.quick else 25
    reads = 500 if args.quick else 2000
    sizes = [1000, 20_000] + ([1_000_000] if args.million else [])

    with benchkit.temp_root(args.dir, "bench-peers-", args.keep) as root:
        peers: list[Peer] = [
            Memfs(root / "memfs"),
            Sqlite(root / "sqlite-shipped.db", wal_full=False),
            Sqlite(root / "sqlite-wal-full.db", wal_full=True),
            Files(root / "files"),
        ]
        labels = [p.label for p in peers]
        say("bench_peers: memfs vs LangGraph SqliteStore vs plain files, one run, one disk")
        facts = [
            *benchkit.machine_facts(),
            ("filesystem", benchkit.fs_type(root)),
            ("load average", f"{os.getloadavg()[0]:.2f} at the start"),
        ]
        for fact, value in facts:
            say(f"  {fact}: {value}")
        say("  durability:")
        for peer in peers:
            say(f"    {peer.label:16} {peer.durability()}")

        creates: dict[str, list[float]] = {p: [] for p in labels}
        updates: dict[str, list[float]] = {p: [] for p in labels}
        cpu: dict[str, list[float]] = {p: [] for p in labels}
        conc: dict[str, list[float]] = {p: [] for p in labels}
        conc_cpu: dict[str, list[float]] = {p: [] for p in labels}
        read50: dict[str, list[float]] = {p: [] for p in labels}
        single_writer(peers, "warm", BLOCK, 0, "")  # imports, schemas, first folders
        for r in range(args.rounds):
            say(f"\nround {r + 1}/{args.rounds}")
            ns = f"w{r}"
            made = single_writer(peers, ns, writes, 0, "")
            changed = single_writer(peers, ns, writes, 0, f" v{r}")
            for label in labels:
                creates[label].append(made[label].ops / made[label].wall)
                updates[label].append(changed[label].ops / changed[label].wall)
                both = made[label].cpu + changed[label].cpu
                cpu[label].append(both / (made[label].ops + changed[label].ops))
            order = peers if r % 2 == 0 else peers[::-1]
            for peer in order:
                t = concurrent_writers(peer, f"c{r}", per_thread, "")
                conc[peer.label].append(t.ops / t.wall)
                conc_cpu[peer.label].append(t.cpu / t.ops)
            for label, p50 in read_p50s(peers, ns, writes, reads, r).items():
                read50[label].append(p50)
            for label in labels:
                say(
                    f"  {label:16} create {creates[label][-1]:7,.0f}/s  "
                    f"update {updates[label][-1]:7,.0f}/s  "
                    f"cpu/write {cpu[label][-1] * 1e3:.3f} ms  "
                    f"16 writers {conc[label][-1]:7,.0f}/s  read p50 {read50[label][-1] * 1e6:.1f} µs"
                )

        pages: dict[int, dict[str, float]] = {}
        have = 0
        for n in sizes:
            say(f"\nloading {n:,} documents into each store (not timed)")
            for peer in peers:
                began = time.perf_counter()
                peer.load("big", have, n)
                say(f"  {peer.label:16} {time.perf_counter() - began:.1f} s")
            have = n
            pages[n] = page_latency(peers, "big", n, 60, 2.0)
            for label in labels:
                say(f"  page of {PAGE} at {n:,}: {label:16} {pages[n][label] * 1e3:.3f} ms")

        med = statistics.median
        rows: list[tuple[str, dict[str, str]]] = [
            ("durable create, ops/s", {p: fmt_rate(med(creates[p])) for p in labels}),
            ("update, ops/s", {p: fmt_rate(med(updates[p])) for p in labels}),
            ("CPU per write (single writer)", {p: f"{med(cpu[p]) * 1e3:.2f} ms" for p in labels}),
            ("16 concurrent writers, ops/s", {p: fmt_rate(med(conc[p])) for p in labels}),
            ("CPU per write (16 writers)", {p: f"{med(conc_cpu[p]) * 1e3:.2f} ms" for p in labels}),
            ("read p50", {p: f"{med(read50[p]) * 1e6:.1f} µs" for p in labels}),
            (
                "page of 200 at " + " / ".join(f"{n // 1000}k" for n in sizes),
                {p: " / ".join(f"{pages[n][p] * 1e3:.2f}" for n in sizes) + " ms" for p in labels},
            ),
        ]
        say("\n" + table(rows, labels))

        say("\ntargets of issue 17 (ratios within this run):")
        report = Report()
        m, wal, files = "memfs", "sqlite-wal-full", "files"
        report.ratio("creates / SqliteStore WAL+FULL", med(creates[m]) / med(creates[wal]), 1.0)
        report.ratio("updates / SqliteStore WAL+FULL", med(updates[m]) / med(updates[wal]), 1.0)
        report.ratio("creates / plain-file floor", med(creates[m]) / med(creates[files]), 1.2)
        report.ratio("updates / plain-file floor", med(updates[m]) / med(updates[files]), 1.2)
        report.ratio(
            "16 writers on 16 agents / SqliteStore WAL+FULL 16 threads",
            med(conc[m]) / med(conc[wal]),
            2.0,
        )
        report.add(
            "CPU per commit (single writer)",
            f"{med(cpu[m]) * 1e3:.2f} ms",
            "<= 0.5 ms",
            med(cpu[m]) <= 0.0005,
        )
        report.ratio(
            "read p50 / raw file read", med(read50[m]) / med(read50[files]), 2.0, at_most=True
        )
        for n in sizes[1:]:
            report.ratio(
                f"page at {n // 1000:,}k / at 1k", pages[n][m] / pages[1000][m], 1.5, at_most=True
            )
        say("\n" + report.table())
        say(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
        for peer in peers:
            peer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
