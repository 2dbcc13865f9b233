#!/usr/bin/env python3
"""Ways to make one create-if-absent file durable, measured side by side on one disk.

Run from the repository root:

    .venv/bin/python scripts/bench_durable.py            # ~1 min
    .venv/bin/python scripts/bench_durable.py --quick

Each option creates 2 KiB files under new names, single-threaded and from 16 threads
(16 folders, as 16 agents' logs; and 1 folder, as one agent's run events), in rounds
that alternate the options; the median round counts and the rates are printed as
ratios to ``today``:

- **today**: ``durable.create_new_at`` (temp file, fsync, ``link`` to the final name,
  unlink the temp, fsync of the folder), what ``LocalBackend.put_if_absent`` does;
- **excl**: ``O_CREAT|O_EXCL`` at the final name, write, ``fdatasync``, folder fsync.
  One inode and no link, but a crash (or kill -9) between the create and the write
  leaves an empty or partial file under the final name, which is taken for good, and
  a reader can see a half-written entry: it breaks "a crash leaves nothing or the
  whole file" and is measured only to know what that guarantee costs;
- **tmpfile**: ``O_TMPFILE`` (an unnamed inode in the folder), write, fsync, then
  ``linkat`` of ``/proc/self/fd/N`` to the final name (fails if the name exists), folder
  fsync: today's guarantees without the temp name's create and unlink;
- **group**: callers write their temp files unsynced and queue; one batcher thread
  takes everything waiting, makes it durable with one ``syncfs`` of the filesystem,
  links each, ``syncfs`` again (for the new names), then wakes the callers. Two sync
  points per batch, whatever its size; keeps create-if-absent (``link``) and "nothing
  or the whole file", but ``syncfs`` also flushes every other writer of the
  filesystem;
- **append** (the floor of a segment-file log): write the entry at the end of an open
  per-folder file, ``fdatasync``. No new inode, no folder fsync, but no create-if-absent
  per key, no framing, no lock;
- **segments**: what ``LocalBackend.put_if_absent`` of a log key does now
  (``canonical/segments.py``): under the agent's ``flock``, read what others appended,
  check the key is absent (and no one-file entry of an old folder), append a framed,
  checksummed entry, one ``fdatasync``. Each folder is one agent's log.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import benchkit

from memfs.canonical import durable
from memfs.canonical.backend import LocalBackend

DATA = (b"x" * 2047) + b"\n"
_libc = ctypes.CDLL(None, use_errno=True)


def syncfs(fd: int) -> None:
    if _libc.syncfs(fd) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def today(root: Path, folder: str, name: str) -> None:
    if not durable.create_new_at(root, [folder, name], DATA):
        raise FileExistsError(name)


def excl(root: Path, folder: str, name: str) -> None:
    dir_fd = durable.open_folder(root, [folder], create=True)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd)
        try:
            os.write(fd, DATA)
            os.fdatasync(fd)
        finally:
            os.close(fd)
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def tmpfile(root: Path, folder: str, name: str) -> None:
    dir_fd = durable.open_folder(root, [folder], create=True)
    try:
        fd = os.open(".", os.O_WRONLY | os.O_TMPFILE, 0o600, dir_fd=dir_fd)
        try:
            os.write(fd, DATA)
            os.fsync(fd)
            os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=dir_fd, follow_symlinks=True)
        finally:
            os.close(fd)
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


_SEGMENTS: dict[str, int] = {}
_SEGMENTS_LOCK = threading.Lock()


def append(root: Path, folder: str, name: str) -> None:
    """Not a candidate as is (no per-key create-if-absent, no framing): the floor of the
    issue's segment-file lever, an append to an open file plus fdatasync."""
    with _SEGMENTS_LOCK:
        fd = _SEGMENTS.get(folder)
        if fd is None:
            dir_fd = durable.open_folder(root, [folder], create=True)
            fd = os.open("segment", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600, dir_fd=dir_fd)
            os.fsync(dir_fd)
            os.close(dir_fd)
            _SEGMENTS[folder] = fd
    os.write(fd, name.encode() + b"\n" + DATA)
    os.fdatasync(fd)


class Segments:
    """``LocalBackend.put_if_absent`` of the next log key of the folder's agent."""

    def __init__(self, root: Path) -> None:
        self.backend = LocalBackend(root)
        self.lock = threading.Lock()
        self.next: dict[str, int] = {}

    def __call__(self, root: Path, folder: str, name: str) -> None:
        with self.lock:
            revision = self.next[folder] = self.next.get(folder, 0) + 1
        key = f"agents/{folder}/.memfs/log/{revision:020d}.json"
        if not self.backend.put_if_absent(key, DATA):
            raise FileExistsError(key)


class Group:
    """A batcher thread: many waiting creates made durable by two syncfs calls."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cond = threading.Condition()
        self.queue: list[tuple[int, str, str, list[bool | None]]] = []
        self.batches = 0
        self.items = 0
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def __call__(self, root: Path, folder: str, name: str) -> None:
        dir_fd = durable.open_folder(root, [folder], create=True)
        tmp = durable.write_temp_at(dir_fd, DATA, sync=False)
        slot: list[bool | None] = [None]
        with self.cond:
            self.queue.append((dir_fd, tmp, name, slot))
            self.cond.notify_all()
            while slot[0] is None:
                self.cond.wait()
        os.close(dir_fd)
        if not slot[0]:
            raise FileExistsError(name)

    def _run(self) -> None:
        root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        while True:
            with self.cond:
                while not self.queue and not self.stop:
                    self.cond.wait()
                if self.stop:
                    return
                batch, self.queue = self.queue, []
            syncfs(root_fd)  # every temp file's data and inode
            won = []
            for dir_fd, tmp, name, _slot in batch:
                try:
                    os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                    won.append(True)
                except FileExistsError:
                    won.append(False)
                os.unlink(tmp, dir_fd=dir_fd)
            syncfs(root_fd)  # every new name
            self.batches += 1
            self.items += len(batch)
            with self.cond:
                for (_fd, _tmp, _name, slot), ok in zip(batch, won, strict=True):
                    slot[0] = ok
                self.cond.notify_all()

    def close(self) -> None:
        with self.cond:
            self.stop = True
            self.cond.notify_all()
        self.thread.join()


def run(
    fn: Callable[[Path, str, str], None], root: Path, tag: str, threads: int, folders: int, n: int
) -> tuple[float, float]:
    """(creates per second, process CPU seconds per create): ``threads`` threads, ``n``
    files each, over ``folders`` folders."""
    barrier = threading.Barrier(threads + 1)

    def worker(t: int) -> None:
        folder = f"{tag}-f{t % folders}"
        barrier.wait()
        for i in range(n):
            fn(root, folder, f"{tag}-t{t}-{i:06d}")

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    barrier.wait()
    began, cpu = time.perf_counter(), time.process_time()
    for thread in pool:
        thread.join()
    return threads * n / (time.perf_counter() - began), (time.process_time() - cpu) / (threads * n)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer files per way and round")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds (default 3)")
    parser.add_argument(
        "--dir", type=Path, default=benchkit.REPO / "data",
        help="parent folder of the files (a real disk: the fsyncs count; default ./data)",
    )
    args = parser.parse_args(argv)
    single, per_thread = (60, 6) if args.quick else (200, 15)
    with benchkit.temp_root(args.dir, "bench-durable-", keep=False) as root:
        group = Group(root)
        options: dict[str, Callable[[Path, str, str], None]] = {
            "today": today,
            "excl": excl,
            "tmpfile": tmpfile,
            "group": group,
            "append": append,
            "segments": Segments(root),
        }
        shapes = [("1 writer", 1, 1, single), ("16 writers, 16 folders", 16, 16, per_thread),
                  ("16 writers, 1 folder", 16, 1, per_thread)]  # fmt: skip
        say = benchkit.say
        say(f"bench_durable: {benchkit.machine()}, filesystem {benchkit.fs_type(root)}")
        rates: dict[tuple[str, str], list[float]] = {}
        cpus: dict[str, list[float]] = {}
        for r in range(args.rounds):
            for shape, threads, folders, n in shapes:
                names = list(options) if r % 2 == 0 else list(options)[::-1]
                for opt in names:
                    tag = f"r{r}-{opt}-{threads}-{folders}"
                    rate, cpu = run(options[opt], root, tag, threads, folders, n)
                    rates.setdefault((shape, opt), []).append(rate)
                    if threads == 1:
                        cpus.setdefault(opt, []).append(cpu)
            say(f"  round {r + 1} done (load {os.getloadavg()[0]:.1f})")
        say(f"\ngroup: {group.items} creates in {group.batches} batches")
        group.close()
        say(
            "\n| shape | "
            + " | ".join(options)
            + " | "
            + " | ".join(f"{o} / today" for o in list(options)[1:])
            + " |"
        )
        say("|---|" + "---:|" * (2 * len(options) - 1))
        for shape, *_ in shapes:
            med = {opt: statistics.median(rates[(shape, opt)]) for opt in options}
            cells = " | ".join(f"{med[o]:,.0f}/s" for o in options)
            ratios = " | ".join(f"{med[o] / med['today']:.2f}x" for o in list(options)[1:])
            say(f"| {shape} | {cells} | {ratios} |")
        cpu_of = {opt: statistics.median(cpus[opt]) for opt in options}
        say(
            "\nCPU per create, 1 writer (process CPU, kernel included): "
            + ", ".join(f"{o} {cpu_of[o] * 1e3:.2f} ms" for o in options)
        )
        say(
            f"segments: {med_1w(rates, 'segments') / med_1w(rates, 'today'):.2f}x today's rate,"
            f" {cpu_of['segments'] * 1e3:.2f} ms CPU per entry against {cpu_of['today'] * 1e3:.2f} ms"
            " (the issue's whole-commit target: CPU <= 0.5 ms)"
        )
    return 0


def med_1w(rates: dict[tuple[str, str], list[float]], opt: str) -> float:
    return statistics.median(rates[("1 writer", opt)])


if __name__ == "__main__":
    sys.exit(main())
