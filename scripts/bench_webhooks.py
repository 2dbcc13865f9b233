#!/usr/bin/env python3
"""Benchmark webhook deliveries against a bare Starlette route on the same uvicorn settings.

Run from the repository root:

    .venv/bin/python scripts/bench_webhooks.py                 # workers 1 and 2, 5 s each
    .venv/bin/python scripts/bench_webhooks.py --quick         # workers 2, 2 s each
    .venv/bin/python scripts/bench_webhooks.py --generator asyncio   # without wrk

Measured for each worker count, each after a warm-up, all in one run:

  bare        ``POST`` to a Starlette catch-all route that reads the body and answers
              202 with a small JSON document (an ``async def`` endpoint)
  duplicate   ``POST …/triggers/{t}:deliver`` of ONE webhook id, over and over: verify
              the signature, find the delivery record, answer 200 with its run
  unique      the same route with a fresh ``webhook-id`` per request: verify, create
              the delivery record (create-if-absent, fsync'd; it is also the run's
              first event), index the run, answer 202 — a durable run per request
  floor       the bare route plus the least the contract lets a unique delivery do:
              one durable create-if-absent file per request (``put_if_absent`` of the
              backend ``memfs serve`` builds, in the threadpool), nothing else: what
              a delivery costs with one fsync each; group commit (one fsync for many
              deliveries) is how ``unique / floor`` can pass 1. ``--no-floor`` skips it

The requests are built and signed (``standardwebhooks.Webhook.sign``, the sender's
library) in Python before a measurement starts, and the *same bytes* are sent to the
bare route, so both sides parse identical requests. The generator is ``wrk`` with a
Lua script that replays the pre-signed requests (Debian: ``apt-get install -y wrk``);
without it a raw-asyncio keep-alive client replays them. Either way the generator's
CPU use is printed (1.0 = one core) so it is clear whether it was the limit.

The memfs server is the real one: its trigger has a memory action, so while deliveries
arrive its run executor stores each delivery as a memory, sharing the CPU and the disk
with the request path and the generator. How many runs it executed during the window
is printed, then the backlog is drained (bounded by ``--drain``) and the drain rate
printed: that is the run executor's own throughput with no deliveries arriving.

Order per worker count: bare, floor, duplicate, unique, (drain), bare again; the ratios use
the mean of the two bare measurements, since the load of a shared machine moves.
The targets of issue 17, as ratios so a noisy machine cancels out, are printed as
PASS/MISS lines and a closing Markdown table: unique >= 0.4x bare with 2 workers,
unique >= 2x the one-durable-file floor, duplicates >= 0.6x bare. Nothing asserts: a
MISS is a finding to explain in docs/benchmarks.md.

``--base-src DIR`` measures another memfs beside this one, paired: its server runs with
``PYTHONPATH=DIR`` (e.g. ``/path/to/main/src``), and for each of ``--pairs N`` rounds
and each worker count the base and this tree are measured one after the other (the
order alternating by round), each with its own bare runs. A closing table gives, per
pair, this tree's figures over the base's: unique and duplicate deliveries per
second, the drain's runs per second, CPU per unique delivery on the event loops and
on the other threads.

Duration: about 1 min per worker count plus the drain (default ``--workers 1,2``:
~2-3 min; ``--quick``: ~1 min), longer on a loaded machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import hashlib
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import benchkit
from benchkit import ADMIN_KEY, Load, Report, Server, admin_headers, call, say
from standardwebhooks import Webhook
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from memfs import config
from memfs.canonical.backend import Backend
from memfs.http.app import build

AGENT = "bench/hooks"
TRIGGER = "bench"
SECRET = "whsec_" + "YmVuY2gtd2ViaG9va3Mtc2VjcmV0LWtleS0wMTIzNDU2Nzg5"
DELIVER_PATH = f"/v1/agents/{quote(AGENT, safe='')}/triggers/{TRIGGER}:deliver"
MAX_SECONDS = 60.0
MAX_POOL = 200_000


def _payload(n: int) -> bytes:
    """A ~1 KiB JSON body, as a GitHub-like sender would post."""
    doc = {
        "action": "opened",
        "number": n,
        "repository": {"full_name": "example/memfs", "private": False, "id": 4242},
        "sender": {"login": "octocat", "id": 1, "type": "User"},
        "issue": {
            "title": f"Benchmark issue {n}",
            "body": "Steps to reproduce: deliver a webhook. " * 18,
            "labels": ["bench", "webhook"],
        },
    }
    return json.dumps(doc, separators=(",", ":")).encode()


# ---- the bare app (imported by uvicorn as bench_webhooks:bare_app) ------------------------


async def _bare(request: Request) -> JSONResponse:
    await request.body()
    return JSONResponse({"id": "run_bare", "status": "queued"}, status_code=202)


async def _ready(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


bare_app = Starlette(
    routes=[Route("/ready", _ready), Route("/{rest:path}", _bare, methods=["POST"])]
)

FLOOR_ENV = "BENCH_WEBHOOKS_FLOOR_DIR"


_floor_backend: list[Backend] = []


def _floor_write(name: str, body: bytes) -> bool:
    if not _floor_backend:
        # The backend exactly as ``memfs serve`` builds it for its data folder.
        settings = config.load({"MEMFS_DATA": os.environ[FLOOR_ENV]}, {"admin_key": ADMIN_KEY})
        _floor_backend.append(build(settings).services.store.backend)
    return _floor_backend[0].put_if_absent(f"floor/{name}.json", body)


async def _floor(request: Request) -> JSONResponse:
    """The bare route plus the least a unique delivery must do: one durable new file."""
    body = await request.body()
    name = hashlib.sha256(request.headers.get("webhook-id", "").encode()).hexdigest()
    created = await run_in_threadpool(_floor_write, name, body)
    return JSONResponse(
        {"id": "run_floor", "status": "queued"}, status_code=202 if created else 200
    )


floor_app = Starlette(
    routes=[Route("/ready", _ready), Route("/{rest:path}", _floor, methods=["POST"])]
)


def serve_bare(port: int, workers: int) -> None:
    """Serve ``bare_app`` with the uvicorn arguments of ``memfs.cli.serve.run``."""
    benchkit.serve_bare("bench_webhooks:bare_app", port, workers)


def start_memfs(data: Path, workers: int, logs: Path, src: Path | None = None) -> Server:
    if src is None:
        return benchkit.start_memfs(data, workers, logs, "--retry-base-ms", "100")
    # Another tree's memfs (--base-src): its package first on the path.
    port = benchkit.free_port()
    argv = ["env", f"PYTHONPATH={src}", sys.executable, "-m", "memfs.cli", "serve"]
    argv += ["--data", str(data), "--port", str(port), "--workers", str(workers)]
    argv += ["--retry-base-ms", "100"]
    return Server(argv, port, logs / f"memfs-base-w{workers}.log", "/v1/agents?limit=1")


def start_bare(workers: int, logs: Path) -> Server:
    return benchkit.start_bare(__file__, workers, logs, "/ready")


def serve_floor(port: int, workers: int, folder: Path) -> None:
    """Serve ``floor_app``, writing its files into ``folder`` (workers inherit the env)."""
    os.environ[FLOOR_ENV] = str(folder)
    benchkit.serve_bare("bench_webhooks:floor_app", port, workers)


def start_floor(workers: int, logs: Path, folder: Path) -> Server:
    port = benchkit.free_port()
    argv = [sys.executable, str(Path(__file__).resolve()), "--serve-floor", str(port)]
    argv += ["--workers", str(workers), "--floor-dir", str(folder)]
    return Server(argv, port, logs / f"floor-w{workers}.log", "/ready")


# ---- requests ----------------------------------------------------------------------------


def signed_request(webhook_id: str, body: bytes) -> bytes:
    """A raw HTTP/1.1 delivery, signed as a Standard Webhooks sender signs it."""
    now = dt.datetime.now(dt.UTC)
    signature = Webhook(SECRET).sign(webhook_id, now, body.decode())
    head = (
        f"POST {DELIVER_PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\n"
        f"webhook-id: {webhook_id}\r\nwebhook-timestamp: {int(now.timestamp())}\r\n"
        f"webhook-signature: {signature}\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def pool(prefix: str, count: int) -> list[bytes]:
    return [signed_request(f"{prefix}_{n:07d}", _payload(n)) for n in range(count)]


# ---- load generators ---------------------------------------------------------------------


_WRK_LUA = """
local file = "%(file)s"
local nthreads = %(threads)d
local reqs = {}
local idx = 0

function init(args)
  local f = assert(io.open(file, "rb"))
  local data = f:read("*a")
  f:close()
  local pos, n = 1, 0
  while true do
    local stop = string.find(data, "\\0", pos, true)
    if not stop then break end
    if n %% nthreads == tid - 1 then reqs[#reqs + 1] = string.sub(data, pos, stop - 1) end
    n = n + 1
    pos = stop + 1
  end
end

function request()
  idx = idx + 1
  if idx > #reqs then
    idx = 1
    wraps = wraps + 1
  end
  return reqs[idx]
end
"""


def run_wrk(
    server: Server,
    requests: list[bytes],
    *,
    connections: int,
    threads: int,
    seconds: float,
    workdir: Path,
) -> Load:
    data = workdir / f"requests-{time.monotonic_ns()}.bin"
    data.write_bytes(b"".join(r + b"\0" for r in requests))
    try:
        return benchkit.run_wrk(
            server,
            f"http://127.0.0.1:{server.port}/",
            _WRK_LUA % {"file": str(data), "threads": threads} + benchkit.WRK_COUNT_STATUSES,
            workdir / "replay.lua",
            connections=connections,
            threads=threads,
            duration=f"{seconds:g}s",
            timeout="10s",  # a slow 202 is an answer, not an error
            seconds=seconds,
        )
    finally:
        data.unlink()


class _Replay:
    """The requests of one connection in turn, from the first again when they run out."""

    def __init__(self, requests: list[bytes]) -> None:
        self.requests = requests
        self.n = 0
        self.wraps = 0

    def __call__(self) -> bytes:
        if self.n == len(self.requests):
            self.n, self.wraps = 0, self.wraps + 1
        self.n += 1
        return self.requests[self.n - 1]


def run_asyncio(server: Server, requests: list[bytes], *, connections: int, seconds: float) -> Load:
    """A raw-asyncio keep-alive replay of the pre-signed requests (no HTTP library)."""
    shares = [_Replay(requests[i::connections] or requests) for i in range(connections)]
    load = benchkit.run_asyncio(
        server, shares, seconds, lambda ordered, p: benchkit.quantile(ordered, p / 100)
    )
    return dataclasses.replace(load, wrapped=sum(s.wraps for s in shares))


# ---- the measurement ---------------------------------------------------------------------


@dataclass
class Args:
    workers: list[int]
    seconds: float
    warmup: float
    connections: int
    threads: int
    pool: int
    drain: float
    generator: str
    dir: Path | None
    keep: bool
    json_out: Path | None
    floor: bool = True
    base_src: Path | None = None
    pairs: int = 1


def summary(port: int) -> dict[str, Any]:
    status, body = call(
        port, "GET", f"/v1/agents/{quote(AGENT, safe='')}/memory", b"", admin_headers()
    )
    if status != 200:
        raise RuntimeError(f"memory summary: {status} {body[:300]!r}")
    doc: dict[str, Any] = json.loads(body)
    return doc


def prepare(memfs: Server) -> None:
    """The agent and its trigger (memory action, the default) with a known secret."""
    for path, doc in (
        (f"/v1/agents/{quote(AGENT, safe='')}", {"name": "webhook bench"}),
        (
            f"/v1/agents/{quote(AGENT, safe='')}/triggers/{TRIGGER}",
            {"prompt": "file the delivery", "secret": SECRET},
        ),
    ):
        headers = {**admin_headers(), "Content-Type": "application/json"}
        status, body = call(memfs.port, "PUT", path, json.dumps(doc).encode(), headers)
        if status not in (200, 201):
            raise RuntimeError(f"PUT {path}: {status} {body[:300]!r}")


def drain(memfs: Server, timeout: float) -> tuple[float, int, int]:
    """Wait (bounded) until no run is pending: (seconds waited, runs executed, pending)."""
    first = summary(memfs.port)
    t0 = time.monotonic()
    now = first
    while now["pendingRunCount"] and time.monotonic() - t0 < timeout:
        time.sleep(0.5)
        now = summary(memfs.port)
    return time.monotonic() - t0, now["memoryCount"] - first["memoryCount"], now["pendingRunCount"]


def thread_cpu(server: Server) -> tuple[float, float]:
    """CPU seconds of the server's group so far: (its processes' main threads, where
    uvicorn runs the event loop; every other thread: the delivery pool, the run
    executor's threads, the index's checkpointer). Linux /proc, by thread."""
    tick = os.sysconf("SC_CLK_TCK")
    loop = other = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
            if int(fields[2]) != server.proc.pid:  # pgrp: the session this script made
                continue
            tasks = list((entry / "task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                cpu = task.joinpath("stat").read_text().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            used = int(cpu[11]) + int(cpu[12])  # utime, stime
            if task.name == entry.name:
                loop += used
            else:
                other += used
    return loop / tick, other / tick


def measure(
    args: Args,
    generator: str,
    root: Path,
    workers: int,
    report: Report,
    *,
    src: Path | None = None,
    label: str = "",
) -> dict[str, Any]:
    tag = f"w{workers}"
    home = root / f"{label or 'this'}-{time.monotonic_ns()}"
    home.mkdir()
    t0 = time.monotonic()
    warm_pool = pool(f"warm_{tag}", min(args.pool, 5_000))
    main_pool = pool(f"uniq_{tag}", args.pool)
    duplicate = [signed_request(f"dup_{tag}", _payload(0))]
    print(
        f"  signed {len(warm_pool) + len(main_pool) + 1} requests in {time.monotonic() - t0:.1f} s"
    )

    def load(server: Server, requests: list[bytes], seconds: float) -> Load:
        if generator == "wrk":
            return run_wrk(
                server,
                requests,
                connections=args.connections,
                threads=args.threads,
                seconds=seconds,
                workdir=home,
            )
        return run_asyncio(server, requests, connections=args.connections, seconds=seconds)

    def measured(server: Server, requests: list[bytes], warm: list[bytes]) -> Load:
        if args.warmup > 0:
            load(server, warm, args.warmup)
        return load(server, requests, args.seconds)

    loads: dict[str, Load] = {}
    threads: dict[str, tuple[float, float]] = {}  # ms of CPU per request: loop, others
    out: dict[str, Any] = {"workers": workers}
    bare = start_bare(workers, home)
    memfs: Server | None = None
    floor: Server | None = None
    try:
        if args.floor:
            floor = start_floor(workers, home, home / f"floor-{tag}")
        memfs = start_memfs(home / f"data-{tag}", workers, home, src)
        prepare(memfs)
        status, body = call(memfs.port, "POST", *_split(duplicate[0]))
        if status != 202:
            raise RuntimeError(f"first delivery: {status} {body[:300]!r}")
        # bare, then memfs, then bare again: the load of a shared machine moves.
        loads["bare (before)"] = measured(bare, main_pool, warm_pool)
        if floor is not None:
            loads["floor"] = measured(floor, main_pool, warm_pool)
            floor.stop()
            floor = None
        if args.warmup > 0:
            load(memfs, duplicate, args.warmup)
        threads0 = thread_cpu(memfs)
        loads["duplicate"] = load(memfs, duplicate, args.seconds)
        threads["duplicate"] = _per_request(threads0, thread_cpu(memfs), loads["duplicate"])
        if args.warmup > 0:
            load(memfs, warm_pool, args.warmup)
            drain(memfs, args.drain)
        before = summary(memfs.port)
        threads0 = thread_cpu(memfs)
        loads["unique"] = load(memfs, main_pool, args.seconds)
        threads["unique"] = _per_request(threads0, thread_cpu(memfs), loads["unique"])
        after = summary(memfs.port)
        waited, executed, pending = drain(memfs, args.drain)
        out["runs"] = {
            "executed_during_unique_window": after["memoryCount"] - before["memoryCount"],
            "pending_after_window": after["pendingRunCount"],
            "drain_seconds": waited,
            "executed_while_draining": executed,
            "pending_after_drain": pending,
            "failed": after["failedRunCount"],
        }
        loads["bare (after)"] = measured(bare, main_pool, warm_pool)
    finally:
        if memfs is not None:
            memfs.stop()
        if floor is not None:
            floor.stop()
        bare.stop()

    for name, result in loads.items():
        print(
            f"  {name:<13} {result.rate:7.0f} req/s  p50 {result.p50_ms:7.2f} ms  "
            f"p99 {result.p99_ms:7.2f} ms  errors {result.errors}  "
            f"generator CPU {result.generator_cpu:.2f}  server CPU {result.server_cpu:.2f}"
            f" ({result.cpu_ms:.2f} ms/request)  statuses {result.statuses}",
            flush=True,
        )
        out[name] = {
            "rps": result.rate,
            "requests": result.requests,
            "p50_ms": result.p50_ms,
            "p99_ms": result.p99_ms,
            "errors": result.errors,
            "statuses": result.statuses,
            "wrapped": result.wrapped,
            "generator_cpu": result.generator_cpu,
            "server_cpu": result.server_cpu,
            "server_cpu_ms_per_request": result.cpu_ms,
        }
        if name in threads:
            on_loop, elsewhere = threads[name]
            print(
                f"  {'':<13} CPU per request by thread: {on_loop:.2f} ms on the event loops,"
                f" {elsewhere:.2f} ms on other threads",
                flush=True,
            )
            out[name]["loop_cpu_ms_per_request"] = on_loop
            out[name]["other_threads_cpu_ms_per_request"] = elsewhere
    runs = out["runs"]
    drained = runs["executed_while_draining"]
    print(
        f"  runs executed during the unique window: {runs['executed_during_unique_window']}"
        f" ({runs['pending_after_window']} pending at its end); then {drained} more in"
        f" {runs['drain_seconds']:.1f} s with no deliveries"
        f" ({drained / runs['drain_seconds'] if runs['drain_seconds'] else 0:.0f} runs/s),"
        f" {runs['pending_after_drain']} left, {runs['failed']} failed"
    )
    unique = loads["unique"]
    if unique.wrapped or unique.statuses.get("200"):
        print("  WARNING: the unique pool ran out; some 'unique' requests were duplicates")
    bare_rates = (loads["bare (before)"].rate, loads["bare (after)"].rate)
    bare_rate = sum(bare_rates) / 2
    out["bare_mean_rps"] = bare_rate
    # The targets of issue 17, as ratios within this run (bare: the mean of before and
    # after); the unique-vs-bare target is set for 2 workers, other counts are shown.
    say(
        f"  targets of issue 17 ({workers} workers{', ' + label if label else ''};"
        " bare: mean of before and after):"
    )
    workers_label = f"{workers} workers{', ' + label if label else ''}"
    duplicate_ratio = loads["duplicate"].rate / bare_rate
    unique_ratio = unique.rate / bare_rate
    if workers == 2:
        report.ratio(f"unique / bare ({workers_label})", unique_ratio, 0.4)
    else:
        report.add(f"unique / bare ({workers_label})", f"{unique_ratio:.2f}x (informational)")
    if "floor" in loads:
        floor_rate = loads["floor"].rate
        unique_floor = unique.rate / floor_rate if floor_rate else 0.0
        report.ratio(f"unique / one-durable-file floor ({workers_label})", unique_floor, 2.0)
        report.add(
            f"floor / bare ({workers_label})",
            f"{floor_rate / bare_rate:.2f}x (informational: one fsync'd file per request)",
        )
        out["floor / bare"] = floor_rate / bare_rate
        out["unique / floor"] = unique_floor
    report.ratio(f"duplicates / bare ({workers_label})", duplicate_ratio, 0.6)
    # Server CPU per request, bare over duplicate: what the ratio would be if both
    # servers had the same CPU (on a loaded machine the kernel shares it by runnable
    # thread, and memfs has a pool of them where the bare app has one per worker).
    bare_cpu = (loads["bare (before)"].cpu_ms + loads["bare (after)"].cpu_ms) / 2
    if loads["duplicate"].cpu_ms:
        report.add(
            f"duplicates / bare per server CPU ({workers_label})",
            f"{bare_cpu / loads['duplicate'].cpu_ms:.2f}x (informational: bare's CPU per"
            f" request {bare_cpu:.2f} ms, a duplicate's {loads['duplicate'].cpu_ms:.2f} ms)",
        )
    out["unique / bare"] = unique_ratio
    out["duplicate / bare"] = duplicate_ratio
    return out


def paired(args: Args, generator: str, root: Path, report: Report) -> list[dict[str, Any]]:
    """``--pairs`` rounds of the base (``--base-src``) and this tree, one after the
    other per worker count, the order alternating by round: each pair's results."""
    out: list[dict[str, Any]] = []
    for round_ in range(1, args.pairs + 1):
        for workers in args.workers:
            sides = [("base", args.base_src), ("this", None)]
            if round_ % 2 == 0:
                sides.reverse()  # a shared machine's load drifts: neither always first
            pair: dict[str, Any] = {"pair": round_, "workers": workers}
            for label, src in sides:
                print(f"\n== pair {round_}, --workers {workers}, {label}")
                pair[label] = measure(
                    args, generator, root, workers, report, src=src, label=f"{label} #{round_}"
                )
            out.append(pair)
    return out


_PAIRED = (
    ("unique/s", lambda r: r["unique"]["rps"]),
    ("duplicates/s", lambda r: r["duplicate"]["rps"]),
    ("drain runs/s", lambda r: _drain_rate(r["runs"])),
    ("unique: loop CPU ms", lambda r: r["unique"]["loop_cpu_ms_per_request"]),
    ("unique: other threads' CPU ms", lambda r: r["unique"]["other_threads_cpu_ms_per_request"]),
    ("unique / bare", lambda r: r["unique / bare"]),
)


def _drain_rate(runs: dict[str, Any]) -> float:
    seconds = float(runs["drain_seconds"])
    return float(runs["executed_while_draining"]) / seconds if seconds else 0.0


def pairs_table(pairs: list[dict[str, Any]]) -> str:
    """Per pair: each figure of the base and of this tree, and this tree's over the base's."""
    lines = [
        "| pair | workers | figure | base | this | this / base |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for pair in pairs:
        for name, figure in _PAIRED:
            base, this = figure(pair["base"]), figure(pair["this"])
            ratio = f"{this / base:.2f}x" if base else "-"
            lines.append(
                f"| {pair['pair']} | {pair['workers']} | {name} | {base:.2f} | {this:.2f} | {ratio} |"
            )
    return "\n".join(lines)


def _per_request(
    before: tuple[float, float], after: tuple[float, float], result: Load
) -> tuple[float, float]:
    """The CPU of the loops and of the other threads between two ``thread_cpu``
    readings, in ms per request of ``result``."""
    n = max(result.requests, 1)
    return (after[0] - before[0]) * 1000 / n, (after[1] - before[1]) * 1000 / n


def _split(raw: bytes) -> tuple[str, bytes, dict[str, str]]:
    """(path, body, headers) of a pre-built request, to send it with http.client."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    path = lines[0].split(" ")[1]
    headers = dict(line.split(": ", 1) for line in lines[1:])
    headers.pop("Host", None)
    headers.pop("Content-Length", None)
    return path, body, headers


def parse_args() -> Args | None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", default="1,2", help="comma-separated (default 1,2)")
    parser.add_argument("--seconds", type=float, default=5.0, help="per measurement (default 5)")
    benchkit.add_load_options(parser)
    parser.add_argument(
        "--pool", type=int, default=20_000, help="pre-signed unique deliveries (default 20000)"
    )
    parser.add_argument(
        "--drain", type=float, default=60.0, help="max s to wait for queued runs (default 60)"
    )
    parser.add_argument(
        "--no-floor",
        dest="floor",
        action="store_false",
        help="skip the floor measurement (bare route + one durable file per request)",
    )
    parser.add_argument(
        "--base-src",
        type=Path,
        help="also measure the memfs package in this folder (PYTHONPATH), paired with this one",
    )
    parser.add_argument(
        "--pairs", type=int, default=1, help="rounds of base and this tree (--base-src; default 1)"
    )
    parser.add_argument("--serve-floor", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--floor-dir", type=Path, help=argparse.SUPPRESS)
    benchkit.add_run_options(
        parser,
        quick_help="workers 2, 2 s per measurement",
        dir_help="parent folder for data and logs (default: tmp)",
    )
    ns = parser.parse_args()
    if ns.serve_bare is not None:
        serve_bare(ns.serve_bare, int(ns.workers))
        return None
    if ns.serve_floor is not None:
        serve_floor(ns.serve_floor, int(ns.workers), ns.floor_dir)
        return None
    if ns.quick:
        ns.workers, ns.seconds = "2", 2.0
    workers = benchkit.worker_counts(str(ns.workers))
    if not workers or min(workers) < 1 or not 0 < ns.seconds <= MAX_SECONDS:
        parser.error(f"--workers takes positive integers; --seconds is in (0, {MAX_SECONDS:g}]")
    if not 1 <= ns.pool <= MAX_POOL or not 1 <= ns.connections <= 1000:
        parser.error(f"--pool is in [1, {MAX_POOL}]; --connections in [1, 1000]")
    if ns.base_src is not None and not (ns.base_src / "memfs" / "__init__.py").is_file():
        parser.error(f"--base-src {ns.base_src}: no memfs package there (give its src folder)")
    if not 1 <= ns.pairs <= 10:
        parser.error("--pairs is in [1, 10]")
    return Args(
        workers,
        ns.seconds,
        max(0.0, min(ns.warmup, 10.0)),
        ns.connections,
        max(1, ns.threads),
        ns.pool,
        max(0.0, min(ns.drain, 300.0)),
        ns.generator,
        ns.dir,
        ns.keep,
        ns.json_out,
        ns.floor,
        ns.base_src.resolve() if ns.base_src is not None else None,
        ns.pairs,
    )


def main() -> int:
    args = parse_args()
    if args is None:
        return 0
    generator = benchkit.pick_generator(args.generator)
    if generator is None:
        return 2
    parent = args.dir or Path(tempfile.gettempdir())
    with benchkit.temp_root(parent, "bench-webhooks-", args.keep) as root:
        print(f"machine: {benchkit.machine()}")
        print(f"data on: {benchkit.df_type(root)} ({root})")
        print(
            f"uvicorn extras installed (auto-selected by both servers): {benchkit.uvicorn_extras()}"
        )
        # Both servers log as ``memfs serve`` does; the comparison is only fair that way.
        print(
            "access log: on for every server, one line per request to its log file"
            " (uvicorn's, log_level info, with memfs's formatter: memfs.cli.serve.log_config)"
        )
        print(
            benchkit.generator_line(
                generator, args.connections, args.threads, args.seconds, args.warmup
            )
            + f", {args.pool} pre-signed unique deliveries"
        )
        report = Report()
        results: dict[str, Any] = {
            "machine": benchkit.machine(),
            "generator": generator,
            "runs": [],
        }
        if args.base_src is None:
            for workers in args.workers:
                print(f"\n== --workers {workers}")
                results["runs"].append(measure(args, generator, root, workers, report))
        else:
            print(f"base: the memfs of {args.base_src}; this: the memfs of {benchkit.REPO}")
            results["pairs"] = paired(args, generator, root, report)
        say(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
        say("\n" + report.table())
        if args.base_src is not None:
            say("\n" + pairs_table(results["pairs"]))
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
