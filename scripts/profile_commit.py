#!/usr/bin/env python3
"""Where a commit's CPU goes: cProfile of sequential ``Store.write`` calls.

Run from the repository root:

    .venv/bin/python scripts/profile_commit.py                 # 2 KiB creates, LocalBackend
    .venv/bin/python scripts/profile_commit.py --updates       # overwrite existing memories
    .venv/bin/python scripts/profile_commit.py --backend memory  # no disk: Python CPU only

Prints process CPU time per write (all threads: the publisher thread's fsyncs count)
and the committing thread's profile, grouped by the folder of the code that spent it
(``memfs/domain``, ``memfs/derived/index``, ``sqlite3``, ``yaml``, ``json`` …), then the
top functions by own time. The publisher thread is not profiled (cProfile follows one
thread): its CPU is the difference between process CPU and the profiled thread's.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import benchkit

from memfs.canonical.backend import Backend, LocalBackend, MemoryBackend
from memfs.core.store import Store


def doc(i: int, salt: str = "") -> bytes:
    head = f"---\ndescription: profile note {i}{salt}\nkind: bench\n---\n".encode()
    body = (f"# Note {i}\n\n" + f"line {i}{salt} of a note the agent keeps. " * 60).encode()
    return (head + body)[:2048]


def bucket(filename: str, func: str) -> str:
    """A coarse owner of a profiled function: memfs folder, or the library."""
    if filename == "~":  # C functions: SQLite's, system calls, the rest
        if "sqlite3" in func:
            return "sqlite3 (C: SQL and the WAL write)"
        if "posix." in func:
            return "system calls (os.*)"
        if "_hashlib" in func or "sha256" in func:
            return "hashlib (C)"
        if "lock" in func or "queue" in func.lower():
            return "locks and queues (C)"
        return "other builtins (C)"
    if "/memfs/" in filename:
        rest = filename.split("/memfs/", 1)[1]
        parts = rest.split("/")
        if parts[0] in ("src", "memfs"):
            parts = parts[1:]
        return "memfs/" + "/".join([*parts[:-1], parts[-1].removesuffix(".py")])
    for lib in ("yaml", "frontmatter", "json", "sqlite3", "concurrent", "threading", "hashlib"):
        if f"/{lib}/" in filename or filename.endswith(f"/{lib}.py"):
            return lib
    return "other: " + Path(filename).name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=1000, help="writes to profile")
    parser.add_argument("--updates", action="store_true", help="overwrite, not create")
    parser.add_argument(
        "--backend", choices=("local", "memory"), default="local",
        help="the log on disk (local, default) or in memory (no fdatasync)",
    )
    parser.add_argument("--top", type=int, default=25, help="functions listed per order (default 25)")
    parser.add_argument(
        "--dir", type=Path, default=benchkit.REPO / "data",
        help="parent folder of the data (default ./data)",
    )
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="profile-commit-", dir=args.dir) as tmp:
        root = Path(tmp)
        backend: Backend = LocalBackend(root) if args.backend == "local" else MemoryBackend()
        store = Store(root, backend=backend)
        store.create_agent("bench/profile")
        paths = [f"/memories/docs/d{i:07d}.md" for i in range(args.n)]
        for i in range(50):  # warm up: imports, schema pages, first folders
            store.write("bench/profile", f"/memories/warm/w{i}.md", doc(i), actor="bench")
        if args.updates:
            for i, path in enumerate(paths):
                store.write("bench/profile", path, doc(i), actor="bench")
        # First unprofiled, for the true CPU split (user = Python and SQLite, system =
        # the kernel: inode creation, fsync, rename), then profiled.
        usage = resource.getrusage(resource.RUSAGE_SELF)
        plain = time.perf_counter()
        for i, path in enumerate(paths):
            store.write("bench/profile", path.replace("docs", "plain"), doc(i), actor="bench")
        plain = time.perf_counter() - plain
        after = resource.getrusage(resource.RUSAGE_SELF)
        user, system = after.ru_utime - usage.ru_utime, after.ru_stime - usage.ru_stime
        profiler = cProfile.Profile(time.thread_time)  # CPU, not waits
        cpu, wall = time.process_time(), time.perf_counter()
        thread_cpu = time.thread_time()
        profiler.enable()
        for i, path in enumerate(paths):
            store.write("bench/profile", path, doc(i, " v2" if args.updates else ""), actor="bench")
        profiler.disable()
        thread_cpu = time.thread_time() - thread_cpu
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        store.close()
    n = args.n
    kind = "updates" if args.updates else "creates"
    print(f"{n} {kind} of 2 KiB on the {args.backend} backend ({benchkit.machine()})")
    print(f"  unprofiled: wall per write {plain / n * 1e3:.3f} ms ({n / plain:,.0f}/s)")
    print(
        f"              CPU per write  {(user + system) / n * 1e3:.3f} ms: user {user / n * 1e3:.3f} ms, system {system / n * 1e3:.3f} ms"
    )
    print(f"  wall per write           {wall / n * 1e3:.3f} ms ({n / wall:,.0f}/s, profiled)")
    print(f"  process CPU per write    {cpu / n * 1e3:.3f} ms (all threads)")
    print(f"  committing thread CPU    {thread_cpu / n * 1e3:.3f} ms (the rest: publisher)")
    stats = pstats.Stats(profiler)
    raw = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for (_cc, _nc, tt, _ct, _callers) in raw.values())
    owners: dict[str, float] = defaultdict(float)
    for (filename, _line, func), (_cc, _nc, tt, _ct, _callers) in raw.items():
        owners[bucket(filename, func)] += tt
    print("\nown time by owner (profiled thread; profiling inflates small calls):")
    for owner, tt in sorted(owners.items(), key=lambda kv: -kv[1])[:20]:
        print(f"  {owner:42} {tt / n * 1e6:8.1f} µs/write  {tt / total:5.1%}")
    print(f"\ntop {args.top} functions by own time:")
    stats.sort_stats("tottime").print_stats(args.top)
    print("by cumulative time:")
    stats.sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
