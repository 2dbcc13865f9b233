#!/usr/bin/env python3
"""The floor of a durable commit in CPython: the least a commit with memfs's guarantees
must do, in plain Python (no memfs layer), each part timed apart, against memfs's own
``Store.write`` in the same run. It prints ratios (memfs / floor), never bare claims.

Run from the repository root:

    .venv/bin/python scripts/commit_floor.py                  # CPU per commit, by part
    .venv/bin/python scripts/commit_floor.py --instructions   # and instructions (valgrind)

What one floor commit does, in order (each a "part"):

- ``sha256``: the content's address (``hashlib``);
- ``derive``: the UTF-8 check and the frontmatter's plain ``key: value`` lines split
  out (the description and the filterable metadata memfs derives);
- ``plan``: the planning read, one SQLite statement: the agent's revision and the
  path's live version (the precondition a commit checks, and its next revision);
- ``entry``: the log entry's JSON, ``json.dumps`` of the change with the content
  inline, as memfs's entry holds it;
- ``append``: the entry framed (the header memfs's segments use: magic, length, crc32,
  revision) and written with one ``pwrite`` into a preallocated zero tail, then one
  ``fdatasync`` (no size change), under an exclusive ``flock`` of a lock file (the
  create-if-absent between processes);
- ``index``: one write transaction (``BEGIN IMMEDIATE`` … ``COMMIT``, WAL,
  ``synchronous=NORMAL`` as memfs's index: the index is rebuilt from the log, so its
  commit is not fsynced) with the rows memfs's schema needs for a create: the commits,
  versions, memories, memory_meta, blobs and search_pending rows and the agent's
  counters, in memfs's own tables (its schema text);
- ``tree``: the working-tree file: a temp file created in the (kept open) folder,
  written, renamed into place (not fsynced: the tree is derived, as memfs's is).

Times: thread CPU time around each part (``time.thread_time_ns``, its own cost
measured on empty sections and taken off), and process CPU (user + system) per commit
for the whole floor and for memfs, alternated ``--rounds`` times. ``--instructions``
counts each part under valgrind's cachegrind: runs of the parts' prefixes (``sha256``,
then ``sha256`` and ``derive``, …) at two write counts, so a part's instructions are
the difference its addition makes, per write; memfs's by ``commit_instructions.py``.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import resource
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import benchkit
import commit_instructions

PARTS = ("sha256", "derive", "plan", "entry", "append", "index", "tree")
AGENT = "bench/floor"
HEADER = struct.Struct("<4sIIQ")  # as canonical/segments.py frames an entry
TAIL = 64 * 1024 * 1024  # the preallocated zeros the appends overwrite
# One encoder made once (``json.dumps`` with options builds a new one per call).
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def doc(i: int) -> bytes:
    return commit_instructions.doc(i)


def _schema() -> str:
    """memfs's index schema text (its tables and indexes: the pages a commit writes)."""
    from memfs.derived.index.schema import _SCHEMA

    return _SCHEMA


class Floor:
    """One agent's floor store in ``root``: a segment, an index, a tree folder."""

    def __init__(self, root: Path, parts: tuple[str, ...] = PARTS) -> None:
        self.parts = parts
        self.seg = os.open(root / "log.seg", os.O_RDWR | os.O_CREAT, 0o600)
        os.pwrite(self.seg, bytes(TAIL), 0)  # the zero tail, written (not a sparse hole)
        os.fsync(self.seg)
        self.lock = os.open(root / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        self.offset = 0
        (root / "tree" / "docs").mkdir(parents=True)
        self.dir_fd = os.open(root / "tree" / "docs", os.O_RDONLY | os.O_DIRECTORY)
        self.db = sqlite3.connect(root / "index.db", isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_schema())
        self.db.execute(
            "INSERT INTO agents(agent_id, name, store_id, created_at) VALUES(?,?,?,0)",
            (AGENT, AGENT, "store"),
        )
        self.revision = 0

    def close(self) -> None:
        self.db.close()
        for fd in (self.seg, self.lock, self.dir_fd):
            os.close(fd)

    def commit(self, i: int, data: bytes, clock: Callable[[str], None] | None = None) -> None:
        """One create of ``data`` at docs/d<i>.md; ``clock(part)`` after each part."""
        parts = self.parts
        tick = clock or (lambda _part: None)
        if "sha256" not in parts:
            return
        sha = hashlib.sha256(data).hexdigest()
        tick("sha256")
        if "derive" not in parts:
            return
        text = data.decode()
        meta: dict[str, str] = {}
        if text.startswith("---\n"):
            end = text.index("\n---\n", 3)
            for line in text[4:end].split("\n"):
                key, _, value = line.partition(": ")
                meta[key] = value
        description = meta.pop("description", None)
        tick("derive")
        if "plan" not in parts:
            return
        path = f"/memories/docs/d{i:07d}.md"
        head = self.db.execute(
            "SELECT a.revision, m.version FROM agents a"
            " LEFT JOIN memories m ON m.agent_id=a.agent_id AND m.path=?2 WHERE a.agent_id=?1",
            (AGENT, path),
        ).fetchone()
        revision = head[0] + 1
        ts = time.time_ns() // 1000
        tick("plan")
        if "entry" not in parts:
            return
        meta_text = _encode(meta)
        change = {
            "path": path, "operation": "created", "version": 1, "before": None,
            "after": sha, "bytes": len(data), "content": text,
            "description": description, "metadata": meta,
        }
        entry = _encode(
            {"format": 1, "agentId": AGENT, "revision": revision, "ts": ts, "actor": "bench",
             "message": "", "changes": [change]}
        ).encode() + b"\n"
        tick("entry")
        if "append" not in parts:
            return
        crc = zlib.crc32(entry, zlib.crc32(revision.to_bytes(8, "little")))
        frame = HEADER.pack(b"MFS1", len(entry), crc, revision) + entry
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        try:
            os.pwrite(self.seg, frame, self.offset)
            os.fdatasync(self.seg)
        finally:
            fcntl.flock(self.lock, fcntl.LOCK_UN)
        self.offset += len(frame)
        tick("append")
        if "index" not in parts:
            return
        listing = _encode(
            {"path": path, "bytes": len(data), "sha256": sha, "description": description}
        )
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "INSERT INTO commits VALUES(?,?,?,?,?,?,?,?,?)",
            (AGENT, revision, ts, ts, "bench", "", 1, "[]", "[]"),
        )
        db.execute(
            "INSERT INTO versions VALUES(?,?,?,?,?,?,?,?,?,?,NULL,?,NULL)",
            (AGENT, path, 1, revision, "created", sha, len(data), description, meta_text,
             ts, ts),
        )
        db.execute(
            "INSERT INTO memories VALUES(?,?,?,?,?,?,?,?,?,?)",
            (AGENT, path, 1, sha, len(data), description, meta_text, ts, ts, listing),
        )
        for key, value in meta.items():
            db.execute("INSERT INTO memory_meta VALUES(?,?,?,?)", (AGENT, path, key, value))
        db.execute("INSERT OR IGNORE INTO blobs VALUES(?,?,?)", (AGENT, sha, data))
        db.execute("INSERT OR IGNORE INTO search_pending VALUES(?,?)", (AGENT, path))
        db.execute(
            "UPDATE agents SET revision=?, last_ts=?, memory_count=memory_count+1,"
            " memory_bytes=memory_bytes+? WHERE agent_id=?",
            (revision, ts, len(data), AGENT),
        )
        db.execute("COMMIT")
        tick("index")
        if "tree" not in parts:
            return
        name = f"d{i:07d}.md"
        tmp = f".memfs-tmp-{name}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=self.dir_fd)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
        tick("tree")


def floor_run(where: Path, n: int, *, by_part: bool) -> tuple[float, dict[str, float]]:
    """(process CPU per commit, thread CPU per commit by part) of ``n`` floor creates."""
    with tempfile.TemporaryDirectory(prefix="commit-floor-", dir=where) as tmp:
        floor = Floor(Path(tmp))
        for i in range(20):  # warm: the schema's pages, the first frames
            floor.commit(-1 - i, doc(i))
        spent = dict.fromkeys(PARTS, 0)
        clock: Callable[[str], None] | None = None
        if by_part:
            last = [0]

            def clock(part: str) -> None:
                now = time.thread_time_ns()
                spent[part] += now - last[0]
                last[0] = time.thread_time_ns()

        docs = [doc(i) for i in range(n)]  # made before: not a part of the commit
        before = resource.getrusage(resource.RUSAGE_SELF)
        for i in range(n):
            data = docs[i]
            if by_part:
                last[0] = time.thread_time_ns()
            floor.commit(i, data, clock)
        after = resource.getrusage(resource.RUSAGE_SELF)
        floor.close()
    _split(before, after, n)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / n
    return cpu, {part: ns / n / 1e9 for part, ns in spent.items()}


SPLIT: list[tuple[float, float]] = []  # (user, system) per commit of each run, in order


def _split(before: resource.struct_rusage, after: resource.struct_rusage, n: int) -> None:
    user = (after.ru_utime - before.ru_utime) / n
    SPLIT.append((user, (after.ru_stime - before.ru_stime) / n))


def clock_cost(n: int = 20000) -> float:
    """Thread CPU one empty timed section reads (taken off each part's figure)."""
    total, last = 0, time.thread_time_ns()
    for _ in range(n):
        now = time.thread_time_ns()
        total += now - last
        last = time.thread_time_ns()
    return total / n / 1e9


def memfs_run(where: Path, n: int) -> float:
    """Process CPU per create of memfs's ``Store.write`` (LocalBackend, working tree)."""
    from memfs.canonical.backend import LocalBackend
    from memfs.core.store import Store

    with tempfile.TemporaryDirectory(prefix="commit-floor-memfs-", dir=where) as tmp:
        root = Path(tmp)
        store = Store(root, backend=LocalBackend(root))
        store.create_agent(AGENT)
        for i in range(20):
            store.write(AGENT, f"/memories/warm/w{i}.md", doc(i), actor="bench")
        docs = [doc(i) for i in range(n)]
        before = resource.getrusage(resource.RUSAGE_SELF)
        for i in range(n):
            store.write(AGENT, f"/memories/docs/d{i:07d}.md", docs[i], actor="bench")
        after = resource.getrusage(resource.RUSAGE_SELF)
        store.close()
    _split(before, after, n)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / n


def child(n: int, parts: tuple[str, ...], where: Path) -> None:
    """The counted process of ``--instructions``: ``n`` creates doing only ``parts``."""
    with tempfile.TemporaryDirectory(prefix="commit-floor-cg-", dir=where) as tmp:
        floor = Floor(Path(tmp), parts)
        for i in range(n):
            floor.commit(i, doc(i))
        floor.close()


def instructions(where: Path, low: int, high: int) -> tuple[dict[str, float], float]:
    """Instructions per write of each part (and of making the document and the loop:
    ``setup``), and memfs's create, each the difference between ``high`` and ``low``."""

    def count(parts: tuple[str, ...], n: int) -> int:
        with tempfile.TemporaryDirectory(prefix="cg-", dir=where) as out:
            outfile = os.path.join(out, "cg.out")
            cmd = [
                "valgrind", "--tool=cachegrind", "--cache-sim=no",
                f"--cachegrind-out-file={outfile}", sys.executable, os.path.abspath(__file__),
                "--child", str(n), "--parts", ",".join(parts) or "-", "--where", str(where),
            ]
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                raise SystemExit(f"valgrind failed ({run.returncode}):\n{run.stderr[-2000:]}")
            with open(outfile) as f:
                for line in f:
                    if line.startswith("summary:"):
                        return int(line.split()[1])
        raise SystemExit("no instruction count in valgrind's output")

    per: dict[str, float] = {}
    previous = 0.0
    for k in range(len(PARTS) + 1):
        parts = PARTS[:k]
        cost = (count(parts, high) - count(parts, low)) / (high - low)
        per[PARTS[k - 1] if k else "setup"] = cost - previous
        previous = cost
    memfs_low = commit_instructions.count(low, False, where)
    memfs_high = commit_instructions.count(high, False, where)
    return per, (memfs_high - memfs_low) / (high - low)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=1000, help="creates per run")
    parser.add_argument("--rounds", type=int, default=3, help="floor and memfs, alternated")
    parser.add_argument("--dir", type=Path, default=benchkit.REPO / "data",
                        help="where the timed runs write (a real disk: the fdatasyncs count)")
    parser.add_argument("--instructions", action="store_true", help="and count by part")
    parser.add_argument(
        "--low", type=int, default=40, help="writes of the smaller counted run (default 40)"
    )
    parser.add_argument(
        "--high", type=int, default=240, help="writes of the larger counted run (default 240)"
    )
    parser.add_argument("--where", type=Path, default=commit_instructions.SHM,
                        help="where the counted runs write (tmpfs: no disk wait)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--parts", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        parts = tuple(p for p in args.parts.split(",") if p and p != "-")
        child(args.child, parts, args.where)
        return 0
    args.dir.mkdir(parents=True, exist_ok=True)
    print(f"{args.n} sequential 2 KiB creates per run, in {args.dir} "
          f"({benchkit.fs_type(args.dir)}), {benchkit.machine()}")
    tick = clock_cost()
    floors: list[float] = []
    memfs: list[float] = []
    parts: list[dict[str, float]] = []
    for r in range(args.rounds):
        cpu, _ = floor_run(args.dir, args.n, by_part=False)
        floors.append(cpu)
        memfs.append(memfs_run(args.dir, args.n))
        _, by = floor_run(args.dir, args.n, by_part=True)
        parts.append({p: max(0.0, s - tick) for p, s in by.items()})
        (fu, fs), (mu, ms) = SPLIT[-3], SPLIT[-2]
        print(f"  round {r + 1}: floor {floors[-1] * 1e3:.3f} ms CPU per create "
              f"(user {fu * 1e3:.3f}, system {fs * 1e3:.3f}), memfs {memfs[-1] * 1e3:.3f} ms "
              f"(user {mu * 1e3:.3f}, system {ms * 1e3:.3f}): "
              f"memfs / floor {memfs[-1] / floors[-1]:.2f}x")
    if args.rounds:
        timed(floors, memfs, parts, tick)
    if args.instructions:
        counted(args.where, args.low, args.high)
    return 0


def timed(
    floors: list[float], memfs: list[float], parts: list[dict[str, float]], tick: float
) -> None:
    """The timed rounds' medians: CPU per create, and the floor's by part."""
    floor_cpu = benchkit.median(floors)
    memfs_cpu = benchkit.median(memfs)
    print(f"\nmedian CPU per create (user + system): floor {floor_cpu * 1e3:.3f} ms, "
          f"memfs {memfs_cpu * 1e3:.3f} ms, memfs / floor {memfs_cpu / floor_cpu:.2f}x; "
          f"issue 17's target 0.5 ms is {0.0005 / floor_cpu:.2f}x the floor")
    print("\nthe floor's thread CPU by part (median of the rounds; share of the parts' sum):")
    medians = {p: benchkit.median([by[p] for by in parts]) for p in PARTS}
    total = sum(medians.values())
    for p in PARTS:
        print(f"  {p:8} {medians[p] * 1e6:8.1f} µs  {medians[p] / total:6.1%}")
    print(f"  {'sum':8} {total * 1e6:8.1f} µs (the clock's own {tick * 1e9:.0f} ns a part "
          "taken off)")


def counted(where: Path, low: int, high: int) -> None:
    """Instructions per create by part, the floor's sum and memfs's, and their ratio."""
    print(f"\ninstructions per create (cachegrind, {high} minus {low} writes, in {where}):")
    per, memfs_per = instructions(where, low, high)
    setup = per.pop("setup")
    floor_total = sum(per.values())
    for part, cost in per.items():
        print(f"  {part:8} {cost:12,.0f}  {cost / floor_total:6.1%}")
    print(f"  {'floor':8} {floor_total:12,.0f}  (the loop and the document made: "
          f"{setup:,.0f} more, not counted)")
    # memfs's count runs the same documents through Store.write: its loop and document
    # are counted in it, so they are taken off it too.
    own = memfs_per - setup
    print(f"  {'memfs':8} {own:12,.0f}  memfs / floor {own / floor_total:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
