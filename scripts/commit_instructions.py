#!/usr/bin/env python3
"""Instructions per single-writer commit, counted by valgrind's cachegrind: the figure
that does not move with the machine's load (docs/benchmarks.md).

Run from the repository root (valgrind installed: ``apt-get install valgrind``):

    .venv/bin/python scripts/commit_instructions.py                  # creates and updates
    PYTHONPATH=/path/to/other/src .venv/bin/python scripts/commit_instructions.py  # another tree

Each count runs sequential 2 KiB writes (``profile_commit.py``'s documents)
into one agent of a ``Store`` on a ``LocalBackend`` in ``/dev/shm`` (no disk wait),
under ``valgrind --tool=cachegrind --cache-sim=no``, once with ``--low`` and once with
``--high`` writes; the difference divided by the writes between them is the cost of a
write, start-up and imports cancelled out. The index's checkpointer and its idle
full-text flush are held off (their work depends on timing, not on the commit). With
``--updates``, each write overwrites a memory the run created first (its creates are
counted too: the figure is a create and an update averaged, as the
earlier rounds reported it). ``--one N`` is the child: N writes, no count.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

SHM = Path("/dev/shm")


def doc(i: int, salt: str = "") -> bytes:
    head = f"---\ndescription: profile note {i}{salt}\nkind: bench\n---\n".encode()
    body = (f"# Note {i}\n\n" + f"line {i}{salt} of a note the agent keeps. " * 60).encode()
    return (head + body)[:2048]


def child(n: int, updates: bool, where: Path) -> None:
    """``n`` writes into a fresh store under ``where`` (the counted process)."""
    from memfs.canonical.backend import LocalBackend
    from memfs.core.store import Store

    with tempfile.TemporaryDirectory(prefix="commit-instructions-", dir=where) as tmp:
        root = Path(tmp)
        store = Store(root, backend=LocalBackend(root))
        index = store.index
        # Held off: a checkpoint pass or a full-text flush lands on whichever commit
        # happens to be running, so it would make the count depend on timing.
        index._checkpoints._every = 1 << 60  # type: ignore[attr-defined]
        index._idle._every = 1 << 60  # type: ignore[attr-defined]
        index._idle._idle_s = 1e9  # type: ignore[attr-defined]
        agent = "bench/instructions"
        store.create_agent(agent)
        for i in range(20):  # the folders, the segment, the schema pages exist from here
            store.write(agent, f"/memories/warm/w{i}.md", doc(i), actor="bench")
        paths = [f"/memories/docs/d{i:07d}.md" for i in range(n)]
        if updates:
            for i, path in enumerate(paths):
                store.write(agent, path, doc(i), actor="bench")
        for i, path in enumerate(paths):
            store.write(agent, path, doc(i, " v2" if updates else ""), actor="bench")
        store.close()


def count(n: int, updates: bool, where: Path) -> int:
    """Instructions of a whole child run of ``n`` writes (every thread)."""
    with tempfile.TemporaryDirectory(prefix="cg-", dir=where) as out:
        outfile = os.path.join(out, "cg.out")
        cmd = [
            "valgrind", "--tool=cachegrind", "--cache-sim=no",
            f"--cachegrind-out-file={outfile}",
            sys.executable, os.path.abspath(__file__), "--one", str(n),
            "--where", str(where),
        ]
        if updates:
            cmd.append("--updates")
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            raise SystemExit(f"valgrind failed ({run.returncode}):\n{run.stderr[-2000:]}")
        with open(outfile) as f:
            for line in f:
                if line.startswith("summary:"):
                    return int(line.split()[1])
        found = re.search(r"I\s+refs:\s+([\d,]+)", run.stderr)
        if found is None:
            raise SystemExit("no instruction count in valgrind's output")
        return int(found.group(1).replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--low", type=int, default=40, help="writes of the smaller counted run (default 40)"
    )
    parser.add_argument(
        "--high", type=int, default=240, help="writes of the larger counted run (default 240)"
    )
    parser.add_argument("--updates", action="store_true", help="only updates")
    parser.add_argument("--creates", action="store_true", help="only creates")
    parser.add_argument(
        "--where", type=Path, default=SHM if SHM.is_dir() else None,
        help="where the counted runs write (default /dev/shm: no disk wait)",
    )
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    where = args.where or Path(tempfile.gettempdir())
    if args.one is not None:
        child(args.one, args.updates, where)
        return 0
    import memfs

    print(f"memfs from {Path(memfs.__file__).parent}, on {where}")
    kinds = ["creates"] if args.creates else ["updates"] if args.updates else ["creates", "updates"]
    for kind in kinds:
        low = count(args.low, kind == "updates", where)
        high = count(args.high, kind == "updates", where)
        # An update run makes each of its memories first: a create and an update per path.
        writes = (args.high - args.low) * (2 if kind == "updates" else 1)
        per = (high - low) / writes
        label = "create and update, averaged" if kind == "updates" else "create"
        print(
            f"  {label}: {per:,.0f} instructions per write "
            f"({args.high} writes {high:,}, {args.low} writes {low:,})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
