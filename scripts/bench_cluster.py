"""memfs in cluster mode (objects on SeaweedFS, index in PostgreSQL), measured in one run.

Starts a real SeaweedFS and a real PostgreSQL (the test engines), then prints:

- the floors: raw conditional PUTs (``If-None-Match: *``, S3Backend) on SeaweedFS and raw
  PostgreSQL commits (one INSERT + COMMIT), each from ``--threads`` threads;
- commits/s and p50/p99 latency of ``PUT …/memories/…`` with 1 server and with 2
  servers (writers split across them), each writer on an agent of its own, and the
  CPU per commit of the servers (user+system of their process groups), PostgreSQL,
  SeaweedFS and this client (``--app-key``: the writers use an application key, as
  agents do, rather than the admin key; ``--client httpx``: the writers use httpx, whose
  CPU per request is four times http.client's, on the cores the servers need too);
- the 200-item list page in PostgreSQL at 1k memories and at each ``--large`` size
  (``--list-only``: that alone; ``--clone``: the big lists filled by SQL copies of one
  memory's row, for 1M), measured interleaved, with the page query's plan;
- ratios against the floors and between the cases, measured side by side here;
- per commit: the S3 requests SeaweedFS answered for the servers' bucket (its own
  metrics: retries and the node leases' renewals included), the statements PostgreSQL
  ran for the servers (pg_stat_statements, when the server build has it), and, in this process (``Store.apply`` from ``--threads``
  threads on the same engines), the statements sent, the round trips waited for and
  how many commits each group commit's transaction held;
- ``--paired SRC``: a server of another checkout (its ``src`` folder, the base) and
  one of this checkout side by side on the same engines, the writers moved from one to
  the other every ``--seconds`` for ``--rounds`` rounds, so both see the same load:
  per phase and as medians, commits/s and the CPU and statements per commit.

Absolute numbers depend on the machine and its load; read the ratios. On a 2-core
machine that also runs SeaweedFS, PostgreSQL and the client, two servers can't show
scaling (they share the same two cores): compare the CPU per commit and the round
trips instead.

    .venv/bin/python scripts/bench_cluster.py [--seconds 8] [--threads 4] [--large 20000]
        [--app-key] [--client stdlib|httpx] [--list-only] [--clone]
        [--paired OTHER_CHECKOUT/src [--rounds 4]]
"""

from __future__ import annotations

import argparse
import functools
import http.client
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import httpx  # noqa: E402
import psycopg  # noqa: E402

from engine_postgres import PostgresServer, dispose, restart, start_postgres  # noqa: E402
from engine_seaweedfs import SeaweedFS  # noqa: E402
from memfs.canonical.backend import MemoryBackend  # noqa: E402
from memfs.core.planner import Put  # noqa: E402
from memfs.core.store import Store  # noqa: E402
from servers_real import ADMIN_KEY, RealServer, headers  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def timed(
    threads: int, seconds: float, one: Callable[[int, int], None]
) -> tuple[float, list[float]]:
    """Run ``one(thread, n)`` in ``threads`` threads for ``seconds``: (ops/s, latencies)."""
    latencies: list[list[float]] = [[] for _ in range(threads)]
    stop = time.monotonic() + seconds

    def loop(t: int) -> None:
        n = 0
        while time.monotonic() < stop:
            began = time.perf_counter()
            one(t, n)
            latencies[t].append(time.perf_counter() - began)
            n += 1

    began = time.monotonic()
    workers = [threading.Thread(target=loop, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    flat = [x for per in latencies for x in per]
    return len(flat) / (time.monotonic() - began), flat


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def group_cpu(servers: list[RealServer]) -> float:
    """User+system seconds of every process of the servers' groups (children included)."""
    total = 0
    for srv in servers:
        for pid in srv._group_members():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += sum(int(x) for x in fields[11:15])
    return total / TICKS


def tree_cpu(root: int) -> float:
    """User+system seconds of ``root`` and every process below it (PostgreSQL's
    backends, SeaweedFS's children), from /proc."""
    children: dict[int, list[tuple[int, int]]] = {}
    own = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks = sum(int(x) for x in fields[11:15])
        if int(entry.name) == root:
            own = ticks
        children.setdefault(int(fields[1]), []).append((int(entry.name), ticks))
    total, todo = own, [root]
    while todo:
        for pid, ticks in children.get(todo.pop(), []):
            total += ticks
            todo.append(pid)
    return total / TICKS


class Engines:
    """CPU seconds of the engines' process trees and of this (client) process."""

    def __init__(self, engine: SeaweedFS, pg: PostgresServer) -> None:
        assert engine.process is not None
        self.pids = {"seaweedfs": engine.process.pid, "postgresql": pg.process.pid}

    def sample(self) -> dict[str, float]:
        out = {name: tree_cpu(pid) for name, pid in self.pids.items()}
        out["client"] = time.process_time()
        return out

    @staticmethod
    def per_op(before: dict[str, float], after: dict[str, float], ops: int) -> dict[str, float]:
        return {k: (after[k] - before[k]) / max(ops, 1) * 1000 for k in before}


def floors(
    engine: SeaweedFS, pg_url: str, threads: int, seconds: float, engines: Engines
) -> dict[str, float]:
    backend = engine.backend("floor")
    run = uuid.uuid4().hex[:6]
    began = engines.sample()
    put_rate, lat = timed(
        threads, seconds, lambda t, n: backend.put_if_absent(f"{run}/{t}/{n}", b"x" * 600)
    )
    put_cpu = Engines.per_op(began, engines.sample(), len(lat))
    conns = [psycopg.connect(pg_url) for _ in range(threads)]
    with conns[0] as c:
        c.execute("CREATE TABLE IF NOT EXISTS floor (id bigserial primary key, v text)")
        c.commit()
    conns[0] = psycopg.connect(pg_url)

    def commit(t: int, _n: int) -> None:
        conns[t].execute("INSERT INTO floor (v) VALUES ('x')")
        conns[t].commit()

    pg_rate, _ = timed(threads, seconds, commit)
    for c in conns:
        c.close()
    return {"put": put_rate, "pg": pg_rate, **{f"put_{k}": v for k, v in put_cpu.items()}}


def enable_statement_stats(pg: PostgresServer) -> bool:
    """Load pg_stat_statements (a restart): whether this server build has it."""
    try:
        with psycopg.connect(pg.url(), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_preload_libraries='pg_stat_statements'")
        pg.stop()
        restart(pg)
        with psycopg.connect(pg.url(), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        return True
    except (psycopg.Error, RuntimeError) as exc:
        print(f"pg_stat_statements unavailable ({exc}); statements per commit from this process only")
        with psycopg.connect(pg.url(), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM RESET shared_preload_libraries")
        pg.stop()
        restart(pg)
        return False


def statement_calls(pg: PostgresServer, database: str | None) -> tuple[int, int]:
    """Statements PostgreSQL ran in ``database`` so far (pg_stat_statements), and how
    many of them were clock steps (one per write session that committed rows: per
    group commit), or zeros."""
    if database is None:
        return 0, 0
    with psycopg.connect(pg.url(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT COALESCE(SUM(calls), 0),"
            " COALESCE(SUM(calls) FILTER (WHERE query LIKE 'WITH clock AS%%'), 0)"
            " FROM pg_stat_statements s JOIN pg_database d ON d.oid=s.dbid WHERE d.datname=%s",
            (database,),
        ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def index_trips(engine: SeaweedFS, pg_url: str, tmp: Path, threads: int, commits: int) -> str:
    """Commits through ``Store.apply`` in this process from ``threads`` threads, each on
    an agent of its own: statements sent, round trips waited for (a statement sent
    alone, or a pipeline), and the commits per group-commit transaction."""
    from memfs.core import commit as committing
    from memfs.derived.index.postgres import pool

    counts = {"statements": 0, "trips": 0, "batches": 0, "batched": 0}
    guard = threading.Lock()
    execute, pipeline = psycopg.Cursor.execute, psycopg.Connection.pipeline
    send_commit = getattr(pool, "_send_commit", None)  # absent before it existed
    index_batch = committing.Committer._index

    def counting(self: psycopg.Cursor[Any], query: Any, *a: Any, **k: Any) -> Any:
        with guard:
            counts["statements"] += 1
            counts["trips"] += self.connection._pipeline is None
        return execute(self, query, *a, **k)

    def piped(self: psycopg.Connection[Any]) -> Any:
        with guard:
            counts["trips"] += self._pipeline is None
        return pipeline(self)

    def sent(conn: psycopg.Connection[Any]) -> None:
        with guard:
            counts["statements"] += 1  # a statement, waited for by no one
        assert send_commit is not None
        send_commit(conn)

    def batch(self: Any, items: list[Any]) -> None:
        with guard:
            counts["batches"] += 1
            counts["batched"] += len(items)
        index_batch(self, items)

    store = Store(tmp / "trips", backend=engine.backend("trips"), index_location=pg_url)
    agents = [f"trips/a{t}" for t in range(threads)]
    body = b"---\ndescription: note\n---\n" + b"body text " * 60

    def write(t: int, first: int, count: int) -> None:
        for n in range(first, first + count):
            store.apply(agents[t], [Put(f"/memories/m/{n}.md", body)], actor="bench")

    def run(first: int, count: int) -> None:
        workers = [threading.Thread(target=write, args=(t, first, count)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    try:
        for agent in agents:
            store.create_agent(agent)
        run(0, 5)  # every statement prepared on the connections first
        psycopg.Cursor.execute = counting  # type: ignore[method-assign]
        psycopg.Connection.pipeline = piped  # type: ignore[method-assign]
        committing.Committer._index = batch  # type: ignore[method-assign]
        if send_commit is not None:
            pool._send_commit = sent
        run(5, commits)
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        psycopg.Connection.pipeline = pipeline  # type: ignore[method-assign]
        committing.Committer._index = index_batch  # type: ignore[method-assign]
        if send_commit is not None:
            pool._send_commit = send_commit
        store.close()
    total = threads * commits
    return (
        f"statements {counts['statements'] / total:.2f}, round trips waited for"
        f" {counts['trips'] / total:.2f}, commits per group commit"
        f" {counts['batched'] / max(1, counts['batches']):.2f}"
    )


def app_key(server: RealServer) -> str:
    """A fresh application key (memories:write on bench/*), made through ``server``."""
    key_id = f"bench{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=server.url, headers=headers(), timeout=60) as admin:
        made = admin.put(
            f"/v1/tenant/keys/{key_id}",
            json={"scopes": ["memories:read", "memories:write", "agents:bench"]},
        )
        made.raise_for_status()
        return str(made.json()["secret"])


class Writer:
    """One writer's keep-alive connection: the standard library's ``http.client`` (about
    0.6 ms of CPU per request here) or httpx (``--client httpx``: about 2.5 ms). The
    client runs on the same cores as the servers and engines, so its CPU is taken from
    theirs; the floor's client is the S3 backend's (Rust, about 0.5 ms per PUT)."""

    def __init__(self, url: str, key: str | None, kind: str) -> None:
        self.kind = kind
        self.headers = {**headers(key or ADMIN_KEY), "Content-Type": "text/markdown"}
        port = int(url.rsplit(":", 1)[1])
        self.plain = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.httpx = httpx.Client(base_url=url, timeout=60) if kind == "httpx" else None

    def put(self, path: str, body: bytes) -> None:
        if self.httpx is not None:
            self.httpx.put(path, content=body, headers=self.headers).raise_for_status()
            return
        self.plain.request("PUT", path, body=body, headers=self.headers)
        response = self.plain.getresponse()
        answer = response.read()
        if response.status not in (200, 201):
            raise RuntimeError(f"PUT {path}: {response.status} {answer[:200]!r}")

    def close(self) -> None:
        self.plain.close()
        if self.httpx is not None:
            self.httpx.close()


def cluster_writes(
    servers: list[RealServer],
    threads: int,
    seconds: float,
    engines: Engines,
    key: str | None = None,
    client: str = "stdlib",
    statements: Callable[[], tuple[int, int]] = lambda: (0, 0),
    s3: Callable[[], dict[str, int]] = dict,
) -> dict[str, float]:
    """Commits from ``threads`` writers on agents of their own, over HTTP; with ``key``
    (an application key) instead of the admin key for the writes. ``s3``: the S3
    requests SeaweedFS answered so far for the servers' bucket (``SeaweedFS.requests``)."""
    clients = [Writer(servers[t % len(servers)].url, key, client) for t in range(threads)]
    tag = uuid.uuid4().hex[:6]
    agents = [f"bench/{tag}-{t}" for t in range(threads)]
    for t, agent in enumerate(agents):
        with httpx.Client(
            base_url=servers[t % len(servers)].url, headers=headers(), timeout=60
        ) as admin:
            admin.put(f"/v1/agents/{quote(agent, safe='')}", json={"name": "b"}).raise_for_status()

    def one(t: int, n: int) -> None:
        url = f"/v1/agents/{quote(agents[t], safe='')}/memories/m/{n}.md"
        body = f"---\ndescription: note {n}\n---\n" + "body text " * 60
        clients[t].put(url, body.encode())

    cpu = group_cpu(servers)
    began = engines.sample()
    counted = statements()
    asked = s3()
    rate, lat = timed(threads, seconds, one)
    others = Engines.per_op(began, engines.sample(), len(lat))
    cpu = group_cpu(servers) - cpu
    ran, steps = (after - before for after, before in zip(statements(), counted, strict=True))
    # The node leases' renewals are in it too (a PUT and a DELETE per server every 3 s).
    requests = sum(s3().values()) - sum(asked.values())
    for c in clients:
        c.close()
    return {
        "rate": rate,
        "p50": pct(lat, 0.5),
        "p99": pct(lat, 0.99),
        "cpu_ms": cpu / len(lat) * 1000,
        "statements": ran / len(lat),
        "s3": requests / len(lat),
        "batch": len(lat) / steps if steps else 0.0,
        **{f"{k}_ms": v for k, v in others.items()},
    }


def clone_rows(pg_url: str, agent: str, size: int) -> None:
    """Fill ``agent`` (holding one memory the store wrote, ``/memories/f/00000000.md``)
    to ``size`` memories with copies of that row under the listing's paths, by SQL: a
    million in under a minute, where commits take over an hour on a small machine. The
    page reads the memories rows only; no ANALYZE is run."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO memories SELECT m.agent_id,"
            " '/memories/f/' || lpad(g::text, 8, '0') || '.md', m.version, m.sha256, m.bytes,"
            " m.description, m.metadata, m.created_at, m.updated_at, m.listing"
            " FROM memories m, generate_series(1, %s) g WHERE m.agent_id=%s",
            (size - 1, agent),
        )
        conn.execute("UPDATE agents SET memory_count=%s WHERE agent_id=%s", (size, agent))


def list_pages(
    pg_url: str, sizes: list[int], tmp: Path, rounds: int = 10, clone: bool = False
) -> dict[int, float]:
    """The median time of a 200-item page (keyset, mid-listing) at each size (1k first):
    every agent is loaded first, then the sizes are measured in interleaved rounds, so
    the machine's load (and autovacuum's passes over the fresh rows) weighs on each
    alike. Prints the page query's plan figures at each size (shared buffers read: a
    count, unmoved by load)."""
    out: dict[int, list[float]] = {size: [] for size in sizes}
    store = Store(tmp / "list", backend=MemoryBackend(), index_location=pg_url)
    try:
        for size in sizes:
            agent = f"list/a{size}"
            store.create_agent(agent)
            if clone and size > 1000:
                store.apply(agent, [Put("/memories/f/00000000.md", b"# m 0\n")], actor="bench")
                clone_rows(pg_url, agent, size)
                continue
            for start in range(0, size, 2000):
                ops = [
                    Put(f"/memories/f/{i:08d}.md", b"# m %d\n" % i)
                    for i in range(start, min(size, start + 2000))
                ]
                store.apply(agent, ops, actor="bench")
        for size in sizes:
            print(f"  page query at {size:>8}: {page_plan(pg_url, f'list/a{size}', size)}")
        for _ in range(rounds):
            for size in sizes:
                cursor_path = f"/memories/f/{size // 2:08d}.md"
                for _ in range(5):
                    began = time.perf_counter()
                    store.list_memories(f"list/a{size}", "", limit=200, after=cursor_path)
                    out[size].append(time.perf_counter() - began)
    finally:
        store.close()
    return {size: statistics.median(times) * 1000 for size, times in out.items()}


def page_plan(pg_url: str, agent: str, size: int) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of the listing's page query (the index's own SQL)."""
    from memfs.derived.index.postgres import reads

    sql = (
        f"SELECT {reads._MEMORY_COLUMNS} FROM memories WHERE {reads._KEYSET.format('>')}"
        " ORDER BY agent_id, path LIMIT 201"
    )
    params = (agent, f"/memories/f/{size // 2:08d}.md", agent, "/memories0")
    with psycopg.connect(pg_url) as conn:
        lines = [str(r[0]) for r in conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)]
    scan = next((x.strip().split("  (")[0].lstrip("-> ") for x in lines if "Scan" in x), "?")
    buffers = next((x.strip() for x in lines if "Buffers:" in x), "Buffers: ?")
    took = next((x.strip() for x in lines if "Execution Time" in x), "")
    return f"{scan}; {buffers}; {took}"


def paired(
    engine: SeaweedFS, pg: PostgresServer, tmp: Path, args: argparse.Namespace, stats: bool
) -> None:
    """A server of ``--paired SRC`` (PYTHONPATH=SRC: another checkout's ``src``, the
    base) and one of this checkout side by side on the same engines, each with a
    bucket folder and a database of its own; the writers move from one to the other
    every ``--seconds`` for ``--rounds`` rounds, so both see the same load. Per phase
    and per side: commits/s, the CPU per commit of the server, PostgreSQL, SeaweedFS
    and this client, and PostgreSQL's statements per commit; the raw PUT floor before
    and after."""
    engines = Engines(engine, pg)
    sides: dict[str, RealServer] = {}
    databases: dict[str, str | None] = {}
    buckets: dict[str, str] = {}
    for side, path in (("base", str(Path(args.paired).resolve())), ("branch", "")):
        backend = engine.backend(side)
        buckets[side] = backend.bucket
        env = {
            **engine.env(),
            "MEMFS_OBJECTS": f"s3://{backend.bucket}/{side}",
            "MEMFS_INDEX": pg.new_database(),
            "PYTHONPATH": path,
        }
        databases[side] = env["MEMFS_INDEX"].rsplit("/", 1)[1] if stats else None
        sides[side] = RealServer(tmp / side, env=env).start()
    try:
        keys = {side: app_key(srv) if args.app_key else None for side, srv in sides.items()}
        floor = [floors(engine, pg.new_database(), args.threads, args.seconds, engines)["put"]]
        print(f"floor before: raw conditional PUT {floor[0]:.1f}/s")
        runs: dict[str, list[dict[str, float]]] = {"base": [], "branch": []}
        for n in range(args.rounds):
            order = ("base", "branch") if n % 2 == 0 else ("branch", "base")
            for side in order:
                r = cluster_writes(
                    [sides[side]],
                    args.threads,
                    args.seconds,
                    engines,
                    keys[side],
                    args.client,
                    functools.partial(statement_calls, pg, databases[side]),
                    functools.partial(engine.requests, buckets[side]),
                )
                runs[side].append(r)
                print(
                    f"round {n + 1} {side:6}: {r['rate']:6.1f} commits/s  server"
                    f" {r['cpu_ms']:5.2f}  PostgreSQL {r['postgresql_ms']:5.2f}  SeaweedFS"
                    f" {r['seaweedfs_ms']:5.2f}  client {r['client_ms']:4.2f} ms/commit"
                    f"  statements {r['statements']:5.2f}  per group commit {r['batch']:4.2f}"
                    f"  S3 requests {r['s3']:4.2f}"
                    f"  load {os.getloadavg()[0]:.1f}"
                )
        floor.append(floors(engine, pg.new_database(), args.threads, args.seconds, engines)["put"])
        print(f"floor after: raw conditional PUT {floor[1]:.1f}/s")
    finally:
        for srv in sides.values():
            srv.stop()
    put = statistics.mean(floor)
    print("medians (base, branch, branch / base):")
    for field, label in (
        ("rate", "commits/s"),
        ("cpu_ms", "server CPU ms/commit"),
        ("postgresql_ms", "PostgreSQL CPU ms/commit"),
        ("seaweedfs_ms", "SeaweedFS CPU ms/commit"),
        ("client_ms", "client CPU ms/commit"),
        ("statements", "PostgreSQL statements/commit"),
        ("batch", "commits per group commit"),
        ("s3", "S3 requests/commit"),
    ):
        base = statistics.median(r[field] for r in runs["base"])
        branch = statistics.median(r[field] for r in runs["branch"])
        print(f"  {label:30} {base:8.2f} {branch:8.2f} {branch / base if base else 0:6.2f}x")
    for side in ("base", "branch"):
        rate = statistics.median(r["rate"] for r in runs[side])
        print(f"  {side} commits / raw conditional PUT (mean floor {put:.1f}/s): {rate / put:.2f}x")
    adjacent = [b["rate"] / a["rate"] for a, b in zip(runs["base"], runs["branch"], strict=True)]
    print("  branch / base commits/s, phase by phase: " + ", ".join(f"{x:.2f}" for x in adjacent))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--seconds", type=float, default=8.0, help="length of each commit measurement (default 8)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=4,
        help="concurrent client threads, each on its own agent (default 4)",
    )
    parser.add_argument(
        "--large",
        default="20000",
        help="memories in the big lists, comma-separated (for example 10000,100000)",
    )
    parser.add_argument(
        "--app-key",
        action="store_true",
        help="write with an application key (a key lookup per request) instead of the admin key",
    )
    parser.add_argument(
        "--client",
        choices=("stdlib", "httpx"),
        default="stdlib",
        help="the writers' HTTP client: http.client (default, the lighter) or httpx",
    )
    parser.add_argument(
        "--clone",
        action="store_true",
        help="fill the big lists by copying one memory's row with SQL instead of through"
        " commits (1M in under a minute)",
    )
    parser.add_argument(
        "--list-only",
        action="store_true",
        help="only the list pages (skip the commit measurements)",
    )
    parser.add_argument(
        "--paired",
        metavar="SRC",
        help="measure a server run from SRC (another checkout's src folder, the base)"
        " against one of this checkout, side by side, writers alternated",
    )
    parser.add_argument(
        "--rounds", type=int, default=4, help="with --paired: rounds of two phases (default 4)"
    )
    args = parser.parse_args()
    larges = [int(x) for x in str(args.large).split(",")]
    tmp = Path(f"/tmp/memfs-bench-cluster-{uuid.uuid4().hex[:6]}")
    pg = start_postgres()
    try:
        stats = False if args.list_only else enable_statement_stats(pg)
        if args.list_only:
            pages = list_pages(pg.new_database(), [1000, *larges], tmp, clone=args.clone)
            for large in larges:
                print(
                    f"list page (200 items): 1k {pages[1000]:.2f} ms, {large} {pages[large]:.2f} ms,"
                    f" {pages[large] / pages[1000]:.2f}x (target <= 1.5x)"
                )
            return 0
        with SeaweedFS() as engine:
            print(
                f"cores: {os.cpu_count()}  threads: {args.threads}  seconds: {args.seconds}"
                f"  key: {'application' if args.app_key else 'admin'}  client: {args.client}"
                f"  load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}"
            )
            if args.paired:
                paired(engine, pg, tmp, args, stats)
                return 0
            engines = Engines(engine, pg)
            f = floors(engine, pg.new_database(), args.threads, args.seconds, engines)
            print(
                f"floor: raw conditional PUT on SeaweedFS  {f['put']:8.1f} /s"
                f"  CPU per PUT: SeaweedFS {f['put_seaweedfs']:.2f} ms,"
                f" client {f['put_client']:.2f} ms"
            )
            print(f"floor: raw PostgreSQL commit            {f['pg']:8.1f} /s")
            results = {}
            for count in (1, 2):
                backend = engine.backend(f"c{count}")
                env = {
                    **engine.env(),
                    "MEMFS_OBJECTS": f"s3://{backend.bucket}/c{count}",
                    "MEMFS_INDEX": pg.new_database(),
                }
                servers = [RealServer(tmp / f"c{count}-n{k}", env=env) for k in range(count)]
                for srv in servers:
                    srv.start()
                try:
                    key = app_key(servers[0]) if args.app_key else None
                    database = env["MEMFS_INDEX"].rsplit("/", 1)[1] if stats else None
                    results[count] = r = cluster_writes(
                        servers,
                        args.threads,
                        args.seconds,
                        engines,
                        key,
                        args.client,
                        functools.partial(statement_calls, pg, database),
                        functools.partial(engine.requests, backend.bucket),
                    )
                finally:
                    for srv in servers:
                        srv.stop()
                print(
                    f"{count} server(s): {r['rate']:7.1f} commits/s  p50 {r['p50']:6.1f} ms"
                    f"  p99 {r['p99']:6.1f} ms  server CPU {r['cpu_ms']:5.1f} ms/commit"
                )
                print(
                    f"            CPU per commit elsewhere: PostgreSQL {r['postgresql_ms']:.2f} ms,"
                    f" SeaweedFS {r['seaweedfs_ms']:.2f} ms, client {r['client_ms']:.2f} ms"
                )
                print(f"            S3 requests per commit (SeaweedFS's count): {r['s3']:.2f}")
                if stats:
                    print(
                        f"            PostgreSQL statements per commit: {r['statements']:.2f},"
                        f" commits per group commit: {r['batch']:.2f}"
                    )
            trips = index_trips(
                engine, pg.new_database(), tmp, args.threads, max(20, int(args.seconds * 8))
            )
            print(f"in this process, per commit ({args.threads} threads): {trips}")
            print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
            pages = list_pages(pg.new_database(), [1000, *larges], tmp, clone=args.clone)
            for size, ms in pages.items():
                print(f"list page (200 items) at {size:>8} memories: {ms:6.2f} ms")
            print("ratios:")
            print(
                f"  1 server commits / raw conditional PUT: {results[1]['rate'] / f['put']:.2f}x (target >= 0.5x)"
            )
            print(
                f"  2 servers / 1 server commits:           {results[2]['rate'] / results[1]['rate']:.2f}x"
            )
            print(
                f"  2 servers CPU per commit / 1 server:    {results[2]['cpu_ms'] / results[1]['cpu_ms']:.2f}x"
            )
            for large in larges:
                print(
                    f"  list page {large} / 1000:           {pages[large] / pages[1000]:.2f}x (target <= 1.5x)"
                )
            if (os.cpu_count() or 1) <= 2:
                print(
                    "note: on 2 cores the servers, SeaweedFS, PostgreSQL and this client share"
                    " the same CPUs: 2 servers can't show scaling here; CPU per commit says"
                    " what a server costs."
                )
    finally:
        dispose(pg)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
