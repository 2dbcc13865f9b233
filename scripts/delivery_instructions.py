#!/usr/bin/env python3
"""Instructions per unique webhook delivery, in-process, counted by valgrind's cachegrind:
the figure that does not move with the machine's load (docs/benchmarks.md, issue 17).

Run from the repository root (valgrind installed: ``apt-get install valgrind``):

    .venv/bin/python scripts/delivery_instructions.py                 # each delivery alone
    .venv/bin/python scripts/delivery_instructions.py --threads 8     # batches (group commit)
    PYTHONPATH=/path/to/other/src .venv/bin/python scripts/delivery_instructions.py

Each count runs deliveries of one signed 2 KB body with a fresh ``webhook-id`` through
``deliveries.accept`` (the call the HTTP route makes: the target checked, the signature,
exactly once, the durable record and its indexed run) into a ``Store`` in ``/dev/shm``
(no disk wait), by ``--threads`` threads, under ``valgrind --tool=cachegrind
--cache-sim=no``, once with ``--low`` and once with ``--high`` deliveries; the
difference divided by the deliveries between them is the cost of one, start-up,
imports and the warm-up cancelled out. ``--from DIR`` starts each count from a copy
of a data folder (one made with ``--keep DIR --prep N``: N deliveries made first, so
the index holds N runs). User-space instructions only: the kernel's work (the fsyncs,
SQLite's page writes) is not in the count; with more than one thread, how deliveries
group into batches depends on valgrind's scheduling (the batches are printed).
``--one N`` is the child: N deliveries, no count.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SECRET = "whsec_" + base64.b64encode(b"batch-secret-of-32-bytes-exact!!").decode()
BODY = b'{"action": "opened", "pad": "' + b"x" * 1900 + b'"}'
AGENT, TRIGGER = "bench/agent", "gh"


def child(n: int, threads: int, source: str | None, prep: int, keep: str | None) -> None:
    from memfs.config import Settings
    from memfs.core import deliveries
    from memfs.core.store import Store
    from memfs.core.triggers import Triggers
    from memfs.domain.webhook_verify import sign

    with tempfile.TemporaryDirectory(prefix="delivery-instructions-", dir="/dev/shm") as tmp:
        if source:
            shutil.copytree(source, tmp, dirs_exist_ok=True)
        store = Store(Path(tmp))
        index = store.index
        # Held off: their work depends on timing, not on the delivery.
        index._checkpoints._every = 1 << 60  # type: ignore[attr-defined]
        index._idle._every = 1 << 60  # type: ignore[attr-defined]
        index._idle._idle_s = 1e9  # type: ignore[attr-defined]
        if not source:
            store.create_agent(AGENT)
            Triggers(store.backend).put(AGENT, TRIGGER, {"secret": SECRET, "prompt": "triage"})
        settings = Settings()
        target = deliveries.target(store, settings, AGENT, TRIGGER)
        stamp = int(time.time())

        def headers(webhook_id: str) -> dict[str, str]:
            signature = sign(SECRET, webhook_id, stamp, BODY)
            return {
                "webhook-id": webhook_id,
                "webhook-timestamp": str(stamp),
                "webhook-signature": signature,
            }

        def deliver(webhook_id: str) -> None:
            kept = deliveries.seen(store, AGENT, TRIGGER) or target
            deliveries.accept(
                store, settings, kept, BODY, headers(webhook_id), "application/json",
                now=time.time(),
            )

        for i in range(prep):  # the folders, the schema pages, the runs before the count
            deliver(f"warm_{os.getpid()}_{i}")
        ids = [[f"msg_{os.getpid()}_{t}_{i}" for i in range(n // threads)] for t in range(threads)]

        def work(mine: list[str]) -> None:
            for webhook_id in mine:
                deliver(webhook_id)

        workers = [threading.Thread(target=work, args=(mine,)) for mine in ids]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        if keep:
            shutil.copytree(tmp, keep)
        queue = store.deliveries
        print(f"batches {queue.flushes} of {queue.flushed} records", file=sys.stderr)


def count(n: int, args: argparse.Namespace) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as out:
        argv = ["valgrind", "--tool=cachegrind", "--cache-sim=no"]
        argv += [f"--cachegrind-out-file={out}/cg.out", sys.executable, __file__]
        argv += ["--one", str(n), "--threads", str(args.threads), "--prep", "50"]
        if args.source:
            argv += ["--from", args.source]
        run = subprocess.run(argv, capture_output=True, text=True, check=False)
        found = re.search(r"I\s+refs:\s+([\d,]+)", run.stderr)
        if run.returncode != 0 or found is None:
            raise SystemExit(f"valgrind failed ({run.returncode}):\n{run.stderr[-2000:]}")
        batches = re.search(r"batches \d+ of \d+ records", run.stderr)
        return int(found.group(1).replace(",", "")), batches.group(0) if batches else ""


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="concurrent delivering threads (default 1)"
    )
    parser.add_argument(
        "--low", type=int, default=80, help="deliveries of the smaller counted run (default 80)"
    )
    parser.add_argument(
        "--high", type=int, default=400, help="deliveries of the larger counted run (default 400)"
    )
    parser.add_argument("--from", dest="source", help="start from a copy of this data folder")
    parser.add_argument("--prep", type=int, default=0, help="deliveries made first (--keep)")
    parser.add_argument("--keep", help="copy the data folder here at the end (no count)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.keep:
        child(0, 1, args.source, args.prep, args.keep)
        print(f"kept {args.keep}: {args.prep} deliveries")
        return
    if args.one is not None:
        child(args.one, args.threads, args.source, args.prep, None)
        return
    low, low_batches = count(args.low, args)
    high, high_batches = count(args.high, args)
    per = (high - low) / (args.high - args.low)
    print(
        f"threads {args.threads}: {per:,.0f} instructions per delivery"
        f" ({args.low}: {low_batches}; {args.high}: {high_batches})"
    )


if __name__ == "__main__":
    main()
