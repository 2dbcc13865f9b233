"""A single writer's creates: the segment's fdatasync in situ, wall and CPU per create.

    scripts/bench_commit_sync.py [--paired 300] [--creates 400] [--rounds 3] [--base-src DIR]

First, in this process, creates alternate one by one between a store whose segment
has a zero tail and one whose every append grows the file (``TAIL_BYTES`` and
``TAIL_MIN`` at 0, the append before zero tails): the fdatasync, wall and CPU of
each, side by side (the growing store's journal commits also carry the other's
metadata, so this favours the zero tail a little). Then each round runs one child
process per variant (this checkout's ``src``, the same with no zero tail, and
``--base-src`` when given, e.g. ``git archive <commit> src | tar -x -C DIR``), in
rotating order, each writing ``--creates`` memories of 2 KiB to a fresh data folder on
the same disk (beside this checkout). The child wraps ``os.fdatasync`` (the segment's,
the one durability point of a create) to time it where it runs, takes its CPU from
``getrusage`` and counts the system calls memfs itself makes per create. The machine
is shared: read the ratios against the variants measured in the same run, not the
absolute figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

_CHILD = textwrap.dedent(
    """
    import fcntl, json, os, resource, sys, time
    from collections import Counter
    from pathlib import Path
    from memfs.core.store import Store

    data, creates = Path(sys.argv[1]), int(sys.argv[2])
    if sys.argv[3] == "growing":  # every append grows the file, as before the zero tail
        from memfs.canonical import segments
        segments.TAIL_BYTES = segments.TAIL_MIN = 0
    store = Store(data)
    store.create_agent("bench/sync")
    body = b"---\\ndescription: a note\\n---\\n" + b"x" * 2000 + b"\\n"
    for i in range(20):  # folders, segment, index warm
        store.write("bench/sync", f"/memories/docs/w{i}.md", body, actor="bench")
    syncs, calls = [], Counter()
    real_sync = os.fdatasync

    def timed(fd):
        t = time.perf_counter()
        real_sync(fd)
        syncs.append(time.perf_counter() - t)

    def counting(module, name):
        real = getattr(module, name)
        def counted(*a, **k):
            calls[name] += 1
            return real(*a, **k)
        setattr(module, name, counted)

    os.fdatasync = timed
    for name in ("stat", "fstat", "open", "pread", "pwrite", "replace", "fsync"):
        counting(os, name)
    counting(fcntl, "flock")
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for i in range(creates):
        store.write("bench/sync", f"/memories/docs/n{i}.md", body, actor="bench")
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    store.close()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    syncs.sort()
    print(json.dumps({
        "wall_us": wall / creates * 1e6,
        "cpu_us": cpu / creates * 1e6,
        "sync_p50_us": syncs[len(syncs) // 2] * 1e6,
        "sync_mean_us": sum(syncs) / len(syncs) * 1e6,
        "syncs_per_create": len(syncs) / creates,
        "calls": {k: v / creates for k, v in sorted(calls.items())},
    }))
    """
)


def paired(creates: int) -> None:
    """In this process, creates alternating between two stores on the same disk: one
    whose segment has a zero tail (appends overwrite zeros), one with ``TAIL_BYTES``
    and ``TAIL_MIN`` at 0 (every append grows the file, as before the zero tail).
    Alternating create by create shares the machine's mood between the two exactly."""
    import time

    sys.path.insert(0, str(REPO / "src"))
    from memfs.canonical import segments
    from memfs.core.store import Store

    body = b"---\ndescription: a note\n---\n" + b"x" * 2000 + b"\n"
    tails = {"zero tail": (segments.TAIL_BYTES, segments.TAIL_MIN), "growing": (0, 0)}
    with tempfile.TemporaryDirectory(dir=REPO, prefix=".bench-sync-") as tmp:
        stores = {name: Store(Path(tmp) / name.replace(" ", "-")) for name in tails}
        syncs: dict[str, list[float]] = {name: [] for name in tails}
        walls: dict[str, list[float]] = {name: [] for name in tails}
        cpus: dict[str, list[float]] = {name: [] for name in tails}
        real_sync = os.fdatasync
        current = ["zero tail"]

        def timed(fd: Any) -> None:
            t = time.perf_counter()
            real_sync(fd)
            syncs[current[0]].append(time.perf_counter() - t)

        for name, store in stores.items():
            segments.TAIL_BYTES, segments.TAIL_MIN = tails[name]
            store.create_agent("bench/sync")
            for i in range(20):
                store.write("bench/sync", f"/memories/docs/w{i}.md", body, actor="bench")
        os.fdatasync = timed
        try:
            for i in range(creates):
                order = list(stores) if i % 2 == 0 else list(reversed(stores))
                for name in order:
                    segments.TAIL_BYTES, segments.TAIL_MIN = tails[name]
                    current[0] = name
                    w, c = time.perf_counter(), time.thread_time()
                    stores[name].write("bench/sync", f"/memories/docs/n{i}.md", body, actor="b")
                    cpus[name].append(time.thread_time() - c)
                    walls[name].append(time.perf_counter() - w)
        finally:
            os.fdatasync = real_sync
            for store in stores.values():
                store.close()
    print(f"paired in one process, {creates} creates each, alternating:")
    med = {
        name: {
            "fdatasync p50": statistics.median(syncs[name]),
            "fdatasync mean": statistics.mean(syncs[name]),
            "wall p50": statistics.median(walls[name]),
            "wall mean": statistics.mean(walls[name]),
            "CPU mean": statistics.mean(cpus[name]),
        }
        for name in tails
    }
    for name, figures in med.items():
        print(f"  {name:10} " + ", ".join(f"{k} {v * 1e6:.0f} µs" for k, v in figures.items()))
    ratios = {k: med["zero tail"][k] / med["growing"][k] for k in med["growing"]}
    print("  zero tail / growing: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))


def run(src: Path, creates: int, mode: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(dir=REPO, prefix=".bench-sync-") as tmp:
        env = {**os.environ, "PYTHONPATH": str(src)}
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, str(Path(tmp) / "data"), str(creates), mode],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
    result: dict[str, object] = json.loads(out)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--creates", type=int, default=400, help="creates per round and way (default 400)")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds (default 3)")
    parser.add_argument("--base-src", type=Path, help="the src folder of the code to compare")
    parser.add_argument("--paired", type=int, default=300, help="creates per store, 0: skip")
    args = parser.parse_args()
    if args.paired:
        print(f"load average {os.getloadavg()}", flush=True)
        paired(args.paired)
    # name: (src folder, mode); "growing" is this checkout with no zero tail.
    bases = {"branch": (REPO / "src", "tail"), "growing": (REPO / "src", "growing")}
    if args.base_src:
        bases["base"] = (args.base_src, "tail")
    results: dict[str, list[dict[str, object]]] = {name: [] for name in bases}
    print(f"load average {os.getloadavg()}", flush=True)
    for round_ in range(args.rounds):
        order = list(bases)[round_ % len(bases) :] + list(bases)[: round_ % len(bases)]
        for name in order:
            result = run(*bases[name][:1], args.creates, bases[name][1])
            results[name].append(result)
            shown = {k: round(v, 1) for k, v in result.items() if isinstance(v, float)}
            print(f"round {round_ + 1} {name}: {shown} calls {result['calls']}", flush=True)
    print(f"load average {os.getloadavg()}", flush=True)
    if not args.rounds:
        return
    medians = {
        name: {
            k: statistics.median(float(r[k]) for r in runs)  # type: ignore[arg-type]
            for k in ("wall_us", "cpu_us", "sync_p50_us", "sync_mean_us")
        }
        for name, runs in results.items()
    }
    for name, med in medians.items():
        print(f"median {name}: " + ", ".join(f"{k} {v:.0f}" for k, v in med.items()))
    for other in ("growing", "base"):
        if other in medians:
            ratios = {k: medians["branch"][k] / medians[other][k] for k in medians[other]}
            print(f"branch / {other}: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))


if __name__ == "__main__":
    main()
