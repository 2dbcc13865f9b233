#!/usr/bin/env python3
"""One writer against 16 concurrent writers in one in-process Store: where the time goes.

Run from the repository root:

    .venv/bin/python scripts/bench_writers.py            # ~1-3 min (longer when loaded)
    .venv/bin/python scripts/bench_writers.py --quick    # fewer writes per round

Per round (3 rounds, the median counts), on one disk, 2 KiB Markdown creates:

- **memfs, 1 writer**: one thread writing to one agent;
- **memfs, 16 writers**: 16 threads, each writing to its own agent (made before the clock
  starts);
- **the durable floor, 1 and 16 at once**: threads each appending 2 KiB to a file of their
  own and ``fdatasync``-ing it (what a log entry's durability costs with nothing else:
  16 at once shows how much the disk shares its flushes between concurrent writers).

With ``--queues``, the group commit's two queues alone instead (``GroupCommit``, the
commits' leader lock, and ``WakingGroupCommit``, the deliveries' and registrations'):
16 threads each sleep 2 ms (a durable write, GIL released), spin 100 µs (planning)
and submit; a flush spins 50 µs, sleeps 0.4 ms (SQLite's I/O) and spins 30 µs per
item. ``--commit-queue waking`` runs the memfs rounds with the commits queued on
``WakingGroupCommit`` instead of the leader lock. ``--compare-planning`` adds, in each
round and the same process, 16 writers each planning its own commit (the commit path
before batched planning, ``Committer.plan_in_batches`` off): the one comparison here
that the machine's mood does not swamp. ``--compare-tree`` adds, the same way, 1 and
16 writers with the working tree's files staged as before (by the caller, before its
entry: ``Committer.stage_beside`` off) against today's (on a helper thread while the
entry is made), and 16 writers with the files also renamed before the index
transaction (``Committer.tree_before_index`` on: measured, not shipped).
``--no-worktree`` runs the Store without its
working tree (no file created per commit, whose system time moves with other
processes' file churn on the same disk).

For each: writes/s, user and system CPU per write and voluntary and involuntary context
switches per write (``getrusage`` of the process over the timed part), and for memfs
the mean commits per index transaction (the group commit's batches) and per planning
batch. The ratios end the run: 16 writers against 1 (does concurrency pay?), and each
against the floor with as many writers. ``--switch-intervals 5,1,0.5`` instead runs the
memfs rounds under each GIL switch interval (``sys.setswitchinterval``, in ms),
alternated in one process, with per-round ratios to the first. Nothing asserts: the machine is shared, so read the ratios and the
per-write figures, not the rates.
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import benchkit
from benchkit import say

from memfs.core import group_commit
from memfs.core.store import Store

THREADS = 16
DOC = b"# note\n\n" + b"x" * 2040


@dataclass
class Sample:
    rate: float
    user_ms: float
    sys_ms: float
    vcs: float
    ivcs: float
    batch: float | None = None
    planned: float | None = None  # commits per planning batch (absent from older code)


def timed(threads: int, work: Callable[[int], None], writes: int) -> Sample:
    """``work(t)`` on ``threads`` threads started together; the process's rusage over it."""
    barrier = threading.Barrier(threads + 1)

    def worker(t: int) -> None:
        barrier.wait()
        work(t)

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    barrier.wait()
    for thread in pool:
        thread.join()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    return Sample(
        rate=writes / wall,
        user_ms=(after.ru_utime - before.ru_utime) / writes * 1e3,
        sys_ms=(after.ru_stime - before.ru_stime) / writes * 1e3,
        vcs=(after.ru_nvcsw - before.ru_nvcsw) / writes,
        ivcs=(after.ru_nivcsw - before.ru_nivcsw) / writes,
    )


def memfs_round(store: Store, threads: int, per_thread: int, tag: str) -> Sample:
    agents = [f"bench/{tag}-{t}" for t in range(threads)]
    for agent in agents:
        store.create_agent(agent)
    group = store.commits.group
    # Counters of this memfs's group commit (absent from older code: then no batch size).
    flushes, flushed = getattr(group, "flushes", None), getattr(group, "flushed", None)
    planning = getattr(store.commits, "planning", None)
    plans = (planning.flushes, planning.flushed) if planning is not None else None

    def work(t: int) -> None:
        for i in range(per_thread):
            store.write(agents[t], f"/memories/docs/d{i:05}.md", DOC, actor="bench")

    sample = timed(threads, work, threads * per_thread)
    if flushes is not None and flushed is not None:
        took = group.flushes - flushes
        sample.batch = (group.flushed - flushed) / max(1, took)
    if planning is not None and plans is not None and planning.flushes > plans[0]:
        sample.planned = (planning.flushed - plans[1]) / (planning.flushes - plans[0])
    return sample


def alone_round(store: Store, per_thread: int, r: int) -> Sample:
    """16 writers whose callers each plan their own commit (``Committer.plan_in_batches``
    off: the commit path before batched planning), in the same process and sitting."""
    store.commits.plan_in_batches = False
    try:
        return memfs_round(store, THREADS, per_thread, f"p{r}")
    finally:
        store.commits.plan_in_batches = True


def tree_round(
    store: Store, threads: int, per_thread: int, tag: str, *, beside: bool, early: bool
) -> Sample:
    """``memfs_round`` with the tree files staged beside the entry or not, renamed
    before the index transaction or inside it; the shipped settings restored after."""
    commits = store.commits
    shipped = commits.stage_beside, commits.tree_before_index
    commits.stage_beside, commits.tree_before_index = beside, early
    try:
        return memfs_round(store, threads, per_thread, tag)
    finally:
        commits.stage_beside, commits.tree_before_index = shipped


def floor_round(root: Path, threads: int, per_thread: int, tag: str) -> Sample:
    fds = [
        os.open(root / f"{tag}-{t}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        for t in range(threads)
    ]
    entry = DOC + b"\n" * 60  # about a log entry's frame around a 2 KiB memory

    def work(t: int) -> None:
        for _ in range(per_thread):
            os.write(fds[t], entry)
            os.fdatasync(fds[t])

    try:
        return timed(threads, work, threads * per_thread)
    finally:
        for fd in fds:
            os.close(fd)


@dataclass(eq=False)
class _Item:
    done: bool = False


def spin(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def queue_round(name: str, per_thread: int) -> Sample:
    """``--queues``: one queue class of ``group_commit`` with a stand-in flush."""
    queue = getattr(group_commit, name)()
    batches: list[int] = []

    def flush(batch: list[_Item]) -> None:
        batches.append(len(batch))
        spin(50)
        time.sleep(0.0004)
        spin(30 * len(batch))
        for item in batch:
            item.done = True

    def work(_t: int) -> None:
        for _ in range(per_thread):
            time.sleep(0.002)
            spin(100)
            queue.submit(_Item(), flush)

    sample = timed(THREADS, work, THREADS * per_thread)
    sample.batch = sum(batches) / max(1, len(batches))
    return sample


def median(samples: list[Sample]) -> Sample:
    def med(values: list[float]) -> float:
        return statistics.median(values)

    batches = [s.batch for s in samples if s.batch is not None]
    planned = [s.planned for s in samples if s.planned is not None]
    return Sample(
        rate=med([s.rate for s in samples]),
        user_ms=med([s.user_ms for s in samples]),
        sys_ms=med([s.sys_ms for s in samples]),
        vcs=med([s.vcs for s in samples]),
        ivcs=med([s.ivcs for s in samples]),
        batch=med(batches) if batches else None,
        planned=med(planned) if planned else None,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer writes per round")
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds; the median counts (default 3)"
    )
    parser.add_argument("--dir", type=Path, default=benchkit.REPO / "data", help="parent folder")
    parser.add_argument("--keep", action="store_true", help="keep the data folder")
    parser.add_argument("--queues", action="store_true", help="the two queues alone")
    parser.add_argument(
        "--compare-planning", action="store_true",
        help="also 16 writers each planning its own commit (as before batched planning), "
        "interleaved with the batched rounds in the same process",
    )
    parser.add_argument(
        "--compare-tree", action="store_true",
        help="also 1 and 16 writers with the tree files staged as before (on the "
        "caller's thread), and 16 renaming them before the index, interleaved",
    )
    parser.add_argument(
        "--no-worktree", action="store_true",
        help="no working tree: the commit path without its file creation (whose system "
        "time moves with other processes' file churn on the same disk)",
    )
    parser.add_argument(
        "--switch-intervals", metavar="MS,MS,...",
        help="instead of the usual rounds: the memfs rounds (1 and 16 writers) under each "
        "of these sys.setswitchinterval values in milliseconds, alternated in one process "
        "(the first is the baseline of the ratios)",
    )
    parser.add_argument(
        "--commit-queue", choices=["leader", "waking"], default="leader",
        help="the commits' queue: GroupCommit (as shipped) or WakingGroupCommit",
    )
    args = parser.parse_args(argv)
    per_thread = 60 if args.quick else 150
    single = per_thread * 4  # the single writer's writes per round
    if args.queues:
        return queues(args.rounds, per_thread * 4)
    if args.switch_intervals:
        intervals = [float(ms) / 1e3 for ms in args.switch_intervals.split(",")]
        return switching(args, intervals, per_thread, single)

    with benchkit.temp_root(args.dir, "bench-writers-", args.keep) as root:
        say("bench_writers: memfs with 1 and 16 writers, and the fdatasync floor, one disk")
        loads = [os.getloadavg()[0]]
        for fact, value in [
            *benchkit.machine_facts(),
            ("filesystem", benchkit.fs_type(root)),
        ]:
            say(f"  {fact}: {value}")
        (root / "floor").mkdir()
        store = Store(root / "memfs", worktree=not args.no_worktree)
        if args.commit_queue == "waking":
            store.commits.group = group_commit.WakingGroupCommit()
        say(f"  commits queued on: {type(store.commits.group).__name__}")
        say(f"  working tree: {'off' if args.no_worktree else 'on'}")
        labels = ["memfs, 1 writer", "memfs, 16 writers", "floor, 1 at once", "floor, 16 at once"]
        alone = "memfs, 16 writers, each plans alone"
        if args.compare_planning:
            labels.append(alone)
        tree_labels = [
            "memfs, 1 writer, staged as before",
            "memfs, 16 writers, staged as before",
            "memfs, 16 writers, renamed before the index",
        ]
        if args.compare_tree:
            labels.extend(tree_labels)
        runs: dict[str, list[Sample]] = {label: [] for label in labels}
        try:
            memfs_round(store, 1, 20, "warm")
            for r in range(args.rounds):
                steps: list[tuple[str, Callable[[], Sample]]] = [
                    (labels[0], lambda r=r: memfs_round(store, 1, single, f"s{r}")),
                    (labels[1], lambda r=r: memfs_round(store, THREADS, per_thread, f"c{r}")),
                    (labels[2], lambda r=r: floor_round(root / "floor", 1, single, f"s{r}")),
                    (
                        labels[3],
                        lambda r=r: floor_round(root / "floor", THREADS, per_thread, f"c{r}"),
                    ),
                ]
                if args.compare_planning:
                    steps.insert(2, (alone, lambda r=r: alone_round(store, per_thread, r)))
                if args.compare_tree:
                    before = functools.partial(tree_round, store, beside=False, early=False)
                    early = functools.partial(tree_round, store, beside=True, early=True)
                    steps[1:1] = [
                        (tree_labels[0], functools.partial(before, 1, single, f"t{r}")),
                        (tree_labels[1], functools.partial(before, THREADS, per_thread, f"u{r}")),
                        (tree_labels[2], functools.partial(early, THREADS, per_thread, f"e{r}")),
                    ]
                for label, step in steps if r % 2 == 0 else steps[::-1]:
                    runs[label].append(step())
                loads.append(os.getloadavg()[0])
                say(f"  round {r + 1}/{args.rounds} done (load {loads[-1]:.2f})")
        finally:
            store.close()
        say(f"  load average: {min(loads):.2f}-{max(loads):.2f} over the run")
        say("")
        say("| measured | writes/s | user ms/write | sys ms/write | voluntary cs/write "
            "| involuntary cs/write | commits per index transaction | commits per planning batch |")
        say("|---|---:|---:|---:|---:|---:|---:|---:|")
        meds = {label: median(samples) for label, samples in runs.items()}
        for label, m in meds.items():
            batch = f"{m.batch:.2f}" if m.batch is not None else "-"
            planned = f"{m.planned:.2f}" if m.planned is not None else "-"
            say(f"| {label} | {m.rate:,.0f} | {m.user_ms:.2f} | {m.sys_ms:.2f} | {m.vcs:.1f} "
                f"| {m.ivcs:.1f} | {batch} | {planned} |")
        say("")
        one, many = meds[labels[0]], meds[labels[1]]
        say(f"memfs 16 writers / memfs 1 writer: {many.rate / one.rate:.2f}x")
        say(f"memfs 1 writer / floor 1 at once: {one.rate / meds[labels[2]].rate:.2f}x")
        say(f"memfs 16 writers / floor 16 at once: {many.rate / meds[labels[3]].rate:.2f}x")
        say(f"floor 16 at once / floor 1 at once: "
            f"{meds[labels[3]].rate / meds[labels[2]].rate:.2f}x")
        if args.compare_planning:
            each = meds[alone]
            say(f"16 writers, batched planning / each plans alone: {many.rate / each.rate:.2f}x "
                f"the rate, {(many.user_ms + many.sys_ms) / (each.user_ms + each.sys_ms):.2f}x "
                f"the CPU per write, {many.vcs / each.vcs:.2f}x the voluntary switches")
        if args.compare_tree:
            pairs = [
                ("1 writer, staged beside / as before", one, meds[tree_labels[0]]),
                ("16 writers, staged beside / as before", many, meds[tree_labels[1]]),
                ("16 writers, renamed before the index / as shipped", meds[tree_labels[2]], many),
            ]
            for what, a, b in pairs:
                say(f"{what}: {a.rate / b.rate:.2f}x the rate, "
                    f"{(a.user_ms + a.sys_ms) / (b.user_ms + b.sys_ms):.2f}x the CPU per write")
            ratios = [
                f"{a.rate / b.rate:.2f}"
                for a, b in zip(runs[tree_labels[2]], runs[labels[1]], strict=True)
            ]
            say(f"16 writers, renamed before the index / as shipped, per round: "
                f"{', '.join(ratios)}")
    return 0


def switching(
    args: argparse.Namespace, intervals: list[float], per_thread: int, single: int
) -> int:
    """``--switch-intervals``: the GIL's switch interval (how long a thread that wants
    the GIL back waits before it asks the holder to drop it), alternated round by round
    in one process and sitting, so the machine's mood is shared."""
    with benchkit.temp_root(args.dir, "bench-writers-", args.keep) as root:
        say("bench_writers --switch-intervals: memfs 1 and 16 writers per switch interval")
        for fact, value in benchkit.machine_facts():
            say(f"  {fact}: {value}")
        store = Store(root / "memfs", worktree=not args.no_worktree)
        say(f"  working tree: {'off' if args.no_worktree else 'on'}")
        before = sys.getswitchinterval()
        runs: dict[tuple[float, int], list[Sample]] = {
            (i, n): [] for i in intervals for n in (1, THREADS)
        }
        loads = [os.getloadavg()[0]]
        try:
            memfs_round(store, 1, 20, "warm")
            for r in range(args.rounds):
                order = intervals if r % 2 == 0 else intervals[::-1]
                for k, interval in enumerate(order):
                    sys.setswitchinterval(interval)
                    runs[(interval, 1)].append(memfs_round(store, 1, single, f"s{r}-{k}"))
                    runs[(interval, THREADS)].append(
                        memfs_round(store, THREADS, per_thread, f"c{r}-{k}")
                    )
                sys.setswitchinterval(before)
                loads.append(os.getloadavg()[0])
                say(f"  round {r + 1}/{args.rounds} done (load {loads[-1]:.2f})")
        finally:
            sys.setswitchinterval(before)
            store.close()
        say(f"  load average: {min(loads):.2f}-{max(loads):.2f} over the run")
        say("")
        say("| switch interval | writers | writes/s | user ms/write | sys ms/write "
            "| involuntary cs/write | rate / first interval's | CPU / first interval's |")
        say("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in (1, THREADS):
            base = median(runs[(intervals[0], n)])
            for interval in intervals:
                m = median(runs[(interval, n)])
                cpu = (m.user_ms + m.sys_ms) / (base.user_ms + base.sys_ms)
                say(f"| {interval * 1e3:g} ms | {n} | {m.rate:,.0f} | {m.user_ms:.2f} "
                    f"| {m.sys_ms:.2f} | {m.ivcs:.1f} | {m.rate / base.rate:.2f}x | {cpu:.2f}x |")
        # Per round, the ratio to the first interval in that same round (the medians of
        # those ratios: each round shares one moment's load).
        say("")
        for n in (1, THREADS):
            for interval in intervals[1:]:
                ratios = [
                    a.rate / b.rate
                    for a, b in zip(runs[(interval, n)], runs[(intervals[0], n)], strict=True)
                ]
                say(f"{n} writer(s), {interval * 1e3:g} ms / {intervals[0] * 1e3:g} ms, "
                    f"per round: {', '.join(f'{x:.2f}' for x in ratios)} "
                    f"(median {statistics.median(ratios):.2f}x)")
    return 0


def queues(rounds: int, per_thread: int) -> int:
    say("bench_writers --queues: the group commit's queues alone, 16 threads")
    names = ["GroupCommit", "WakingGroupCommit"]
    runs: dict[str, list[Sample]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            runs[name].append(queue_round(name, per_thread))
    say(f"  load average: {os.getloadavg()[0]:.2f} at the end")
    say("| queue | items/s | CPU µs/item | voluntary cs/item | involuntary cs/item "
        "| items per flush |")
    say("|---|---:|---:|---:|---:|---:|")
    for name, samples in runs.items():
        m = median(samples)
        cpu = (m.user_ms + m.sys_ms) * 1e3
        say(f"| {name} | {m.rate:,.0f} | {cpu:.0f} | {m.vcs:.2f} | {m.ivcs:.2f} "
            f"| {m.batch or 0:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
