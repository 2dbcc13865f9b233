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
              the delivery record (create-if-absent, fsync'd) and the run's first
              event, answer 202 — a durable run record per request

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

Order per worker count: bare, duplicate, unique, (drain), bare again; the ratio uses
the mean of the two bare measurements, since the load of a shared machine moves.
Target, as a ratio so a noisy machine cancels out: unique >= 0.4x bare. Nothing
asserts: a MISS is a finding to explain in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import importlib.util
import json
import os
import platform
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from standardwebhooks import Webhook
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

AGENT = "bench/hooks"
TRIGGER = "bench"
ADMIN_KEY = "bench-admin-key-0123456789abcdef"
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


def serve_bare(port: int, workers: int) -> None:
    """Serve ``bare_app`` with the uvicorn arguments of ``memfs.serve.run``."""
    import uvicorn

    uvicorn.run(
        "bench_webhooks:bare_app",
        host="127.0.0.1",
        port=port,
        workers=workers if workers > 1 else None,
        log_level="info",
        timeout_graceful_shutdown=30,
    )


# ---- servers -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def call(
    port: int, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """One request on a fresh connection (set-up and checks only, never measured)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def admin_headers() -> dict[str, str]:
    return {"Memfs-Protocol": "1", "Authorization": f"Bearer {ADMIN_KEY}"}


class Server:
    """A server process group started here, stopped by its pid (SIGTERM, then SIGKILL)."""

    def __init__(self, argv: list[str], port: int, log: Path, ready_path: str) -> None:
        self.port = port
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
        env["MEMFS_ADMIN_KEY"] = ADMIN_KEY
        self._log = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.log_path = log
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                if call(port, "GET", ready_path, headers=admin_headers())[0] == 200:
                    return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"server did not start: {log.read_text(errors='replace')[-2000:]}")

    def cpu_seconds(self) -> float:
        """User + system CPU of every live process of the server's group (Linux /proc)."""
        total = 0
        tick = os.sysconf("SC_CLK_TCK")
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if int(fields[2]) == self.proc.pid:  # pgrp: the session this script created
                total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / tick

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)  # the group this script created
            self.proc.wait(timeout=30)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # a worker the master failed to stop
        self._log.close()


def start_memfs(data: Path, workers: int, logs: Path) -> Server:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "memfs.cli",
        "serve",
        "--data",
        str(data),
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--retry-base-ms",
        "100",
    ]
    return Server(argv, port, logs / f"memfs-w{workers}.log", "/v1/agents?limit=1")


def start_bare(workers: int, logs: Path) -> Server:
    port = free_port()
    argv = [sys.executable, str(Path(__file__).resolve()), "--serve-bare", str(port)]
    argv += ["--workers", str(workers)]
    return Server(argv, port, logs / f"bare-w{workers}.log", "/ready")


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


@dataclass
class Load:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int
    statuses: dict[str, int]
    wrapped: int  # times a connection or thread ran out of pre-signed requests
    generator_cpu: float  # CPU seconds / wall seconds of the generator (1.0 = one core)
    server_cpu: float  # the same for every process of the server

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


_WRK_LUA = """
local file = "%(file)s"
local nthreads = %(threads)d
local threads = {}
local reqs = {}
local idx = 0
wraps = 0
statuses = {}

function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end

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

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local codes, wrapped = {}, 0
  for _, thread in ipairs(threads) do
    wrapped = wrapped + (thread:get("wraps") or 0)
    local s = thread:get("statuses")
    if s then
      for code, n in pairs(s) do codes[code] = (codes[code] or 0) + n end
    end
  end
  local parts = {}
  for code, n in pairs(codes) do table.insert(parts, string.format('"%%s": %%d', code, n)) end
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests": %%d, "duration_us": %%d, "p50_us": %%d, "p99_us": %%d, ' ..
    '"errors": %%d, "wrapped": %%d, "statuses": {%%s}}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.status + e.timeout, wrapped, table.concat(parts, ", ")))
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
    lua = workdir / "replay.lua"
    lua.write_text(_WRK_LUA % {"file": str(data), "threads": threads})
    url = f"http://127.0.0.1:{server.port}/"
    argv = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds:g}s", "--timeout", "10s"]
    argv += ["-s", str(lua), url]  # the timeout: a slow 202 is an answer, not an error
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0 = server.cpu_seconds()
    wall0 = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=False)
    wall = time.monotonic() - wall0
    server_cpu = server.cpu_seconds() - cpu0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    data.unlink()
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stdout}\n{done.stderr}")
    doc = json.loads(line.removeprefix("WRKJSON "))
    gen_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    duration = doc["duration_us"] / 1e6
    return Load(
        requests=doc["requests"],
        seconds=duration,
        p50_ms=doc["p50_us"] / 1000,
        p99_ms=doc["p99_us"] / 1000,
        errors=doc["errors"],
        statuses={str(k): v for k, v in doc["statuses"].items()},
        wrapped=doc["wrapped"],
        generator_cpu=gen_cpu / wall,
        server_cpu=server_cpu / duration,
    )


async def _replay(
    port: int,
    requests: list[bytes],
    deadline: float,
    latencies: list[float],
    statuses: dict[str, int],
) -> int:
    """Send ``requests`` in turn on one keep-alive connection until ``deadline``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    wraps = 0
    n = 0
    try:
        while time.perf_counter() < deadline:
            if n == len(requests):
                n, wraps = 0, wraps + 1
            start = time.perf_counter()
            writer.write(requests[n])
            n += 1
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if length:
                await reader.readexactly(length)
            latencies.append(time.perf_counter() - start)
            status = head[9:12].decode()
            statuses[status] = statuses.get(status, 0) + 1
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return wraps


def run_asyncio(server: Server, requests: list[bytes], *, connections: int, seconds: float) -> Load:
    """A raw-asyncio keep-alive replay of the pre-signed requests (no HTTP library)."""
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    shares = [requests[i::connections] or requests for i in range(connections)]

    async def main() -> list[int]:
        deadline = time.perf_counter() + seconds
        return await asyncio.gather(
            *(_replay(server.port, s, deadline, latencies, statuses) for s in shares)
        )

    before = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = server.cpu_seconds()
    wall0 = time.monotonic()
    wraps = asyncio.run(main())
    wall = time.monotonic() - wall0
    server_cpu = server.cpu_seconds() - cpu0
    after = resource.getrusage(resource.RUSAGE_SELF)
    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000

    gen_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Load(
        requests=len(latencies),
        seconds=wall,
        p50_ms=pct(0.5) if latencies else 0.0,
        p99_ms=pct(0.99) if latencies else 0.0,
        errors=sum(n for s, n in statuses.items() if not s.startswith("2")),
        statuses=statuses,
        wrapped=sum(wraps),
        generator_cpu=gen_cpu / wall,
        server_cpu=server_cpu / wall,
    )


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


def measure(args: Args, generator: str, root: Path, workers: int) -> dict[str, Any]:
    tag = f"w{workers}"
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
                workdir=root,
            )
        return run_asyncio(server, requests, connections=args.connections, seconds=seconds)

    def measured(server: Server, requests: list[bytes], warm: list[bytes]) -> Load:
        if args.warmup > 0:
            load(server, warm, args.warmup)
        return load(server, requests, args.seconds)

    loads: dict[str, Load] = {}
    out: dict[str, Any] = {"workers": workers}
    bare = start_bare(workers, root)
    memfs: Server | None = None
    try:
        memfs = start_memfs(root / f"data-{tag}", workers, root)
        prepare(memfs)
        status, body = call(memfs.port, "POST", *_split(duplicate[0]))
        if status != 202:
            raise RuntimeError(f"first delivery: {status} {body[:300]!r}")
        # bare, then memfs, then bare again: the load of a shared machine moves.
        loads["bare (before)"] = measured(bare, main_pool, warm_pool)
        loads["duplicate"] = measured(memfs, duplicate, duplicate)
        if args.warmup > 0:
            load(memfs, warm_pool, args.warmup)
            drain(memfs, args.drain)
        before = summary(memfs.port)
        loads["unique"] = load(memfs, main_pool, args.seconds)
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
        bare.stop()

    for name, result in loads.items():
        print(
            f"  {name:<13} {result.rate:7.0f} req/s  p50 {result.p50_ms:7.2f} ms  "
            f"p99 {result.p99_ms:7.2f} ms  errors {result.errors}  "
            f"generator CPU {result.generator_cpu:.2f}  server CPU {result.server_cpu:.2f}  "
            f"statuses {result.statuses}",
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
        }
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
    for label, ratio, target in (
        ("unique / bare", unique.rate / bare_rate, 0.4),
        ("duplicate / bare", loads["duplicate"].rate / bare_rate, None),
    ):
        verdict = (
            "(informational)"
            if target is None
            else f"target >= {target}x  {'PASS' if ratio >= target else 'MISS'}"
        )
        print(f"  {label:<18} {ratio:5.2f}x  {verdict}  (bare: mean of before and after)")
        out[label] = ratio
    return out


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
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--workers", default="1,2", help="comma-separated (default 1,2)")
    parser.add_argument("--seconds", type=float, default=5.0, help="per measurement (default 5)")
    parser.add_argument("--warmup", type=float, default=1.0, help="per measurement (default 1)")
    parser.add_argument("--connections", type=int, default=16, help="keep-alive (default 16)")
    parser.add_argument("--threads", type=int, default=1, help="wrk threads (default 1)")
    parser.add_argument(
        "--pool", type=int, default=20_000, help="pre-signed unique deliveries (default 20000)"
    )
    parser.add_argument(
        "--drain", type=float, default=60.0, help="max s to wait for queued runs (default 60)"
    )
    parser.add_argument("--generator", choices=("auto", "wrk", "asyncio"), default="auto")
    parser.add_argument("--quick", action="store_true", help="workers 2, 2 s per measurement")
    parser.add_argument("--dir", type=Path, help="parent folder for data and logs (default: tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the data and logs")
    parser.add_argument("--json", dest="json_out", type=Path, help="also write results here")
    parser.add_argument("--serve-bare", type=int, metavar="PORT", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.serve_bare is not None:
        serve_bare(ns.serve_bare, int(ns.workers))
        return None
    if ns.quick:
        ns.workers, ns.seconds = "2", 2.0
    workers = [int(w) for w in str(ns.workers).split(",") if w.strip()]
    if not workers or min(workers) < 1 or not 0 < ns.seconds <= MAX_SECONDS:
        parser.error(f"--workers takes positive integers; --seconds is in (0, {MAX_SECONDS:g}]")
    if not 1 <= ns.pool <= MAX_POOL or not 1 <= ns.connections <= 1000:
        parser.error(f"--pool is in [1, {MAX_POOL}]; --connections in [1, 1000]")
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
    )


def machine() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = os.getloadavg()
    return (
        f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs ({cpu}), "
        f"Python {platform.python_version()}, load average {load[0]:.2f}"
    )


def filesystem(path: Path) -> str:
    done = subprocess.run(
        ["df", "-T", str(path)], capture_output=True, text=True, timeout=10, check=False
    )
    rows = done.stdout.splitlines()
    return rows[-1].split()[1] if len(rows) > 1 else "unknown"


def main() -> int:
    args = parse_args()
    if args is None:
        return 0
    wrk = shutil.which("wrk")
    generator = args.generator
    if generator == "auto":
        generator = "wrk" if wrk else "asyncio"
    if generator == "wrk" and not wrk:
        print("wrk is not installed: apt-get update && apt-get install -y wrk", file=sys.stderr)
        return 2
    if generator == "asyncio":
        print("raw-asyncio generator: its CPU use is printed; near 1.0 means it was the limit")
    parent = args.dir or Path(tempfile.gettempdir())
    parent.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="bench-webhooks-", dir=parent))
    loops = [m for m in ("uvloop", "httptools") if importlib.util.find_spec(m)]
    print(f"machine: {machine()}")
    print(f"data on: {filesystem(root)} ({root})")
    print(f"uvicorn extras installed (auto-selected by both servers): {', '.join(loops) or 'none'}")
    print(
        f"generator: {generator}, {args.connections} connections"
        + (f", {args.threads} thread(s)" if generator == "wrk" else "")
        + f", {args.seconds:g} s per measurement after {args.warmup:g} s warm-up,"
        f" {args.pool} pre-signed unique deliveries"
    )
    results: dict[str, Any] = {"machine": machine(), "generator": generator, "runs": []}
    try:
        for workers in args.workers:
            print(f"\n== --workers {workers}")
            results["runs"].append(measure(args, generator, root, workers))
        print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
