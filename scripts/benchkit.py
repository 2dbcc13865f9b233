"""Shared helpers of the benchmark scripts in this folder (``bench_*.py``).

A script imports it as a sibling module (``import benchkit``): the folder of the script
being run is ``sys.path[0]``. Nothing here is a benchmark of its own:

- machine facts: CPU, memory, OS, the filesystem type of a folder;
- statistics: percentiles and the median, millisecond formatting;
- a PASS/MISS report that prints each line and ends as a Markdown table;
- servers: a memfs or bare uvicorn server started in its own session
  (``start_new_session``) and stopped by its pid (SIGTERM, then ``killpg``);
- load generators: ``wrk`` with a Lua script ending in :data:`WRK_REPORT_LUA`, and the
  raw-asyncio keep-alive fallback, both measuring the generator's and the server's CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import importlib.util
import json
import os
import platform
import resource
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ADMIN_KEY = "bench-admin-key-0123456789abcdef"


# ---- output --------------------------------------------------------------------------


def say(text: str) -> None:
    print(text, flush=True)


def ms(seconds: float, places: int = 3) -> str:
    return f"{seconds * 1000:.{places}f} ms"


@dataclass
class Result:
    name: str
    value: str
    target: str = ""
    ok: bool | None = None  # None: informational, no target

    @property
    def verdict(self) -> str:
        return "" if self.ok is None else ("PASS" if self.ok else "MISS")


@dataclass
class Report:
    """Results printed as they come, then all of them as a Markdown table."""

    results: list[Result] = field(default_factory=list)

    def add(self, name: str, value: str, target: str = "", ok: bool | None = None) -> None:
        result = Result(name, value, target, ok)
        self.results.append(result)
        tail = f"  target {target}  {result.verdict}" if target else ""
        say(f"  {name}: {value}{tail}")

    def ratio(self, name: str, measured: float, goal: float, *, at_most: bool = False) -> None:
        """A ratio measured in this run against its target: ``>= goal`` (``<= goal``
        with ``at_most``), printed and kept as PASS/MISS like every other result."""
        ok = measured <= goal if at_most else measured >= goal
        self.add(name, f"{measured:.2f}x", f"{'<=' if at_most else '>='} {goal:g}x", ok)

    def table(self) -> str:
        rows = ["| measurement | result | target | verdict |", "|---|---|---|---|"]
        for r in self.results:
            rows.append(f"| {r.name} | {r.value} | {r.target} | {r.verdict} |")
        return "\n".join(rows)


@contextlib.contextmanager
def temp_root(parent: Path, prefix: str, keep: bool) -> Iterator[Path]:
    """A fresh folder under ``parent``, removed at the end unless ``keep`` (then said)."""
    parent.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        yield root
    finally:
        if keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


# ---- statistics ----------------------------------------------------------------------


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def quantile(samples: Sequence[float], q: float) -> float:
    """The sample at rank ``int(q * n)`` of the sorted samples (``q`` in [0, 1])."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def nearest_rank(ordered: Sequence[float], pct: float) -> float:
    """The nearest-rank ``pct`` percentile (0-100) of already sorted samples; 0 if none."""
    if not ordered:
        return 0.0
    rank = max(0, min(len(ordered) - 1, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


# ---- machine facts -------------------------------------------------------------------


def _proc_field(path: str, prefix: str) -> str | None:
    """The text after the first ``:`` of the first line of ``path`` starting ``prefix``."""
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            if line.startswith(prefix):
                return line.split(":", 1)[1].strip()
    return None


def cpu_model(unknown: str = "?") -> str:
    return _proc_field("/proc/cpuinfo", "model name") or unknown


def memory_total() -> str:
    total = _proc_field("/proc/meminfo", "MemTotal:")
    return f"{int(total.split()[0]) / 1024 / 1024:.1f} GiB" if total else "?"


def machine() -> str:
    """One line: OS, CPUs, Python and the load average now."""
    load = os.getloadavg()
    return (
        f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs "
        f"({cpu_model('unknown CPU')}), "
        f"Python {platform.python_version()}, load average {load[0]:.2f}"
    )


def machine_facts() -> list[tuple[str, str]]:
    """(fact, value) rows: date, CPUs, memory, OS, Python, SQLite."""
    return [
        ("date", time.strftime("%Y-%m-%d %H:%M:%S %Z")),
        ("cpus", f"{os.cpu_count()} x {cpu_model()}"),
        ("memory", memory_total()),
        ("os", platform.platform()),
        ("python", f"{platform.python_implementation()} {platform.python_version()}"),
        ("sqlite", sqlite3.sqlite_version),
    ]


@dataclass
class Mount:
    point: str = "?"
    kind: str = "?"
    options: str = ""


def mount_of(path: Path) -> Mount | None:
    """The /proc/mounts entry ``path`` lies on (the longest mount point holding it)."""
    found: Mount | None = None
    with contextlib.suppress(OSError):
        real = str(path.resolve())
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            if len(parts) < 4:
                continue
            point = parts[1]
            inside = real == point or real.startswith(point.rstrip("/") + "/")
            if inside and (found is None or len(point) > len(found.point)):
                found = Mount(point, parts[2], parts[3])
    return found


def fs_type(path: Path) -> str:
    """``stat -f -c %T`` of ``path`` and the type /proc/mounts gives its mount."""
    try:
        statfs = subprocess.run(
            ["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        statfs = "?"
    mount = mount_of(path) or Mount()
    return f"{mount.kind} (statfs: {statfs}) mounted at {mount.point} [{mount.options}]"


def df_type(path: Path) -> str:
    """The filesystem type ``df -T`` gives for ``path``."""
    done = subprocess.run(
        ["df", "-T", str(path)], capture_output=True, text=True, timeout=10, check=False
    )
    rows = done.stdout.splitlines()
    return rows[-1].split()[1] if len(rows) > 1 else "unknown"


def uvicorn_extras() -> str:
    """The uvicorn speed-ups installed, which uvicorn picks by itself."""
    loops = [m for m in ("uvloop", "httptools") if importlib.util.find_spec(m)]
    return ", ".join(loops) or "none"


# ---- servers -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def admin_headers() -> dict[str, str]:
    return {"Memfs-Protocol": "1", "Authorization": f"Bearer {ADMIN_KEY}"}


def call(
    port: int, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """One request on a fresh connection (set-up and checks only, never measured)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


class Server:
    """A server process group started here, stopped by its pid (SIGTERM, then SIGKILL).

    It runs with ``MEMFS_ADMIN_KEY`` set to :data:`ADMIN_KEY` and no other ``MEMFS_``
    variable, and is ready when ``GET ready_path`` (with the admin key) answers 200.
    """

    def __init__(self, argv: list[str], port: int, log: Path, ready_path: str) -> None:
        self.port = port
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
        env["MEMFS_ADMIN_KEY"] = ADMIN_KEY
        self._log = open(log, "ab")  # noqa: SIM115 - closed in stop()
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


def start_memfs(data: Path, workers: int, logs: Path, *extra: str) -> Server:
    """``memfs serve`` of ``data`` on a free port (``extra``: more serve options)."""
    port = free_port()
    argv = [sys.executable, "-m", "memfs.cli", "serve", "--data", str(data)]
    argv += ["--port", str(port), "--workers", str(workers), *extra]
    return Server(argv, port, logs / f"memfs-w{workers}.log", "/v1/agents?limit=1")


def start_bare(script: str, workers: int, logs: Path, ready_path: str) -> Server:
    """``script --serve-bare PORT --workers N``: the script's bare app (see serve_bare)."""
    port = free_port()
    argv = [sys.executable, str(Path(script).resolve()), "--serve-bare", str(port)]
    argv += ["--workers", str(workers)]
    return Server(argv, port, logs / f"bare-w{workers}.log", ready_path)


def serve_bare(app: str, port: int, workers: int) -> None:
    """Serve ``app`` (``module:attribute``) with the uvicorn arguments of ``memfs.cli.serve.run``."""
    import uvicorn

    from memfs.cli.serve import log_config

    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        workers=workers if workers > 1 else None,
        log_level="info",
        timeout_graceful_shutdown=30,
        log_config=log_config(),  # the access log line memfs serve writes, the same way
    )


# ---- load generators -----------------------------------------------------------------


@dataclass
class Load:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int
    statuses: dict[str, int]
    generator_cpu: float  # CPU seconds / wall seconds of the generator (1.0 = one core)
    server_cpu: float  # the same for every process of the server
    wrapped: int = 0  # times a connection or thread ran out of pre-built requests

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def cpu_ms(self) -> float:
        """Server CPU per request (ms): the cost measure a busy machine disturbs least."""
        return self.server_cpu * self.seconds / self.requests * 1000 if self.requests else 0.0


def add_load_options(parser: argparse.ArgumentParser) -> None:
    """--warmup, --connections and --threads of the HTTP benchmarks."""
    parser.add_argument("--warmup", type=float, default=1.0, help="per measurement (default 1)")
    parser.add_argument("--connections", type=int, default=16, help="keep-alive (default 16)")
    parser.add_argument("--threads", type=int, default=1, help="wrk threads (default 1)")


def add_run_options(parser: argparse.ArgumentParser, *, quick_help: str, dir_help: str) -> None:
    """--generator, --quick, --dir, --keep, --json and the hidden --serve-bare PORT."""
    parser.add_argument(
        "--generator", choices=("auto", "wrk", "asyncio"), default="auto",
        help="load generator: wrk when installed (auto, default), or the raw-asyncio one",
    )
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--dir", type=Path, help=dir_help)
    parser.add_argument("--keep", action="store_true", help="keep the data and logs")
    parser.add_argument("--json", dest="json_out", type=Path, help="also write results here")
    parser.add_argument("--serve-bare", type=int, metavar="PORT", help=argparse.SUPPRESS)


def worker_counts(text: str) -> list[int]:
    """``--workers 1,2`` as a list (an empty item is skipped)."""
    return [int(w) for w in text.split(",") if w.strip()]


def pick_generator(choice: str, *, say_missing: bool = False) -> str | None:
    """``wrk`` or ``asyncio`` for ``--generator choice``; None (said why) if impossible."""
    wrk = shutil.which("wrk")
    generator = choice
    if generator == "auto":
        generator = "wrk" if wrk else "asyncio"
    if generator == "wrk" and not wrk:
        print("wrk is not installed: apt-get update && apt-get install -y wrk", file=sys.stderr)
        return None
    if generator == "asyncio":
        if say_missing and not wrk:
            print("wrk not found (Debian: apt-get update && apt-get install -y wrk); using the")
        print("raw-asyncio generator: its CPU use is printed; near 1.0 means it was the limit")
    return generator


def generator_line(
    generator: str, connections: int, threads: int, seconds: float, warmup: float
) -> str:
    return (
        f"generator: {generator}, {connections} connections"
        + (f", {threads} thread(s)" if generator == "wrk" else "")
        + f", {seconds:g} s per measurement after {warmup:g} s warm-up"
    )


WRK_COUNT_STATUSES = """
function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end
"""

# Appended to every wrk script: its done() prints one ``WRKJSON {...}`` line, read by
# run_wrk. ``statuses`` (see WRK_COUNT_STATUSES) and ``wraps`` are per-thread globals.
WRK_REPORT_LUA = """
local threads = {}
statuses = {}
wraps = 0

function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
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
  for code, n in pairs(codes) do table.insert(parts, string.format('"%s": %d', code, n)) end
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests": %d, "duration_us": %d, "p50_us": %d, "p99_us": %d, ' ..
    '"errors": %d, "wrapped": %d, "statuses": {%s}}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.status + e.timeout, wrapped, table.concat(parts, ", ")))
end
"""


def run_wrk(
    server: Server,
    url: str,
    script: str,
    lua: Path,
    *,
    connections: int,
    threads: int,
    duration: str,
    timeout: str,
    seconds: float,
) -> Load:
    """``wrk`` for ``duration`` with ``script`` + WRK_REPORT_LUA (written to ``lua``)."""
    lua.write_text(script + WRK_REPORT_LUA)
    argv = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}", "--timeout", timeout]
    argv += ["-s", str(lua), url]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0 = server.cpu_seconds()
    wall0 = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=False)
    wall = time.monotonic() - wall0
    server_cpu = server.cpu_seconds() - cpu0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("WRKJSON ")), None)
    if done.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stdout}\n{done.stderr}")
    doc = json.loads(line.removeprefix("WRKJSON "))
    gen_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    duration_s = doc["duration_us"] / 1e6
    return Load(
        requests=doc["requests"],
        seconds=duration_s,
        p50_ms=doc["p50_us"] / 1000,
        p99_ms=doc["p99_us"] / 1000,
        errors=doc["errors"],
        statuses={str(k): v for k, v in doc["statuses"].items()},
        wrapped=doc["wrapped"],
        generator_cpu=gen_cpu / wall,
        server_cpu=server_cpu / duration_s,
    )


async def _connection(
    port: int,
    next_request: Callable[[], bytes],
    deadline: float,
    latencies: list[float],
    statuses: dict[str, int],
) -> None:
    """Send ``next_request()`` after request on one keep-alive connection until ``deadline``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < deadline:
            request = next_request()
            start = time.perf_counter()
            writer.write(request)
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


def run_asyncio(
    server: Server,
    connections: Sequence[Callable[[], bytes]],
    seconds: float,
    percentile: Callable[[list[float], float], float],
) -> Load:
    """A keep-alive HTTP/1.1 load on raw asyncio streams (no HTTP client library).

    One connection per request source; ``percentile(sorted latencies, 0-100)``.
    """
    latencies: list[float] = []
    statuses: dict[str, int] = {}

    async def main() -> None:
        deadline = time.perf_counter() + seconds
        await asyncio.gather(
            *(_connection(server.port, c, deadline, latencies, statuses) for c in connections)
        )

    cpu0, server0, wall0 = time.process_time(), server.cpu_seconds(), time.perf_counter()
    asyncio.run(main())
    wall = time.perf_counter() - wall0
    gen_cpu, server_cpu = time.process_time() - cpu0, server.cpu_seconds() - server0
    latencies.sort()
    return Load(
        requests=len(latencies),
        seconds=wall,
        p50_ms=percentile(latencies, 50) * 1000 if latencies else 0.0,
        p99_ms=percentile(latencies, 99) * 1000 if latencies else 0.0,
        errors=sum(n for s, n in statuses.items() if not s.startswith("2")),
        statuses=statuses,
        generator_cpu=gen_cpu / wall,
        server_cpu=server_cpu / wall,
    )
