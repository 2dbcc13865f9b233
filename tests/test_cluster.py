"""Two real ``memfs serve`` processes on one SeaweedFS (objects) and one PostgreSQL
(index): the cluster configuration of docs/scale-out.md.

Each server has a data folder of its own (as a node on another machine would), both
share ``MEMFS_ADMIN_KEY``, the bucket folder and the database. Proven here, with real
processes and real engines:

- 8-way If-Match races split across both servers: one winner a round, no lost update;
- 30 concurrent duplicate deliveries of one webhook-id split across both: one run;
- read-after-write across servers (write through A, read through B at once);
- a key revoked through A is refused by B within 5 s (the issue's contract);
- kill -9 of one server under writes: every acknowledged write reads back from the
  survivor, and ``memfs fsck`` (the CLI on the cluster's settings) is clean;
- a server killed mid-run: its command child dies with it and the other server adopts
  the attempt (attempt 2, claimed by the survivor), on one host (the claim's pid) and
  across hosts (B in a UTS namespace with a hostname of its own: the node lease).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from commands import child_python, shared_folder
from engine_postgres import PostgresServer
from engine_seaweedfs import SeaweedFS
from memfs.canonical import layout
from memfs.canonical.s3 import S3Backend
from servers_real import RealServer, headers
from test_webhook_processes import (
    RUN_OPTIONS,
    deliver,
    duplicate_deliveries,
    set_up,
    wait_until,
)

AGENT = "users/alice/assistant"


def memories(path: str) -> str:
    return f"/v1/agents/{quote(AGENT, safe='')}/memories{path}"


@dataclass
class Cluster:
    """Two servers on one bucket folder and one database, and how to reach them."""

    a: RealServer
    b: RealServer
    env: dict[str, str]  # the cluster settings, as every node and command gets them
    backend: S3Backend  # the bucket folder both servers keep their objects in

    def cli(self, *args: str, data: Path) -> subprocess.CompletedProcess[str]:
        """``memfs ARGS`` in a fresh process on the cluster's settings."""
        import os

        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
        return subprocess.run(
            [sys.executable, "-m", "memfs.cli", *args, "--data", str(data)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**env, **self.env},
            check=False,
        )


# Server B on "another host": its own UTS namespace (``unshare --uts``, root) with a
# hostname of its own, so only B's node lease in the bucket can tell A that B is gone.
OTHER_HOST = ("unshare", "--uts", "sh", "-c", 'hostname memfs-node-b && exec "$@"', "sh")


@pytest.fixture
def cluster(
    request: pytest.FixtureRequest,
    seaweedfs: SeaweedFS,
    postgres_server: PostgresServer,
    tmp_path: Path,
) -> Iterator[Cluster]:
    name = f"c{time.monotonic_ns()}"
    backend = seaweedfs.backend(name)
    env = {
        **seaweedfs.env(),
        "MEMFS_OBJECTS": f"s3://{backend.bucket}/{name}",
        "MEMFS_INDEX": postgres_server.new_database(),
    }
    a = RealServer(tmp_path / "node-a", env=env, extra_args=RUN_OPTIONS)
    wrapper = OTHER_HOST if getattr(request, "param", "") == "two hosts" else ()
    b = RealServer(tmp_path / "node-b", env=env, extra_args=RUN_OPTIONS, wrapper=wrapper)
    with a, b:
        yield Cluster(a=a, b=b, env=env, backend=backend)


def _race(calls: list[tuple[httpx.Client, str, dict[str, str]]]) -> list[httpx.Response]:
    """Send every PUT at once (a barrier releases them together); the answers in order."""
    gate = threading.Barrier(len(calls), timeout=60)
    answers: list[httpx.Response | BaseException | None] = [None] * len(calls)

    def one(n: int) -> None:
        client, body, extra = calls[n]
        try:
            gate.wait()
            answers[n] = client.put(
                memories("/race.md"),
                content=body.encode(),
                headers={"Content-Type": "text/markdown", **extra},
            )
        except BaseException as exc:  # reported below, never lost in a thread
            answers[n] = exc

    threads = [threading.Thread(target=one, args=(n,)) for n in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    done = [a for a in answers if isinstance(a, httpx.Response)]
    assert len(done) == len(calls), answers
    return done


def test_if_match_races_split_across_two_servers_have_one_winner_a_round(
    cluster: Cluster,
) -> None:
    rounds, racers = 3, 8
    limits = httpx.Limits(max_connections=racers, max_keepalive_connections=racers)
    with (
        cluster.a.client() as setup,
        httpx.Client(base_url=cluster.a.url, headers=headers(), limits=limits, timeout=60) as ca,
        httpx.Client(base_url=cluster.b.url, headers=headers(), limits=limits, timeout=60) as cb,
    ):
        assert setup.put(f"/v1/agents/{quote(AGENT, safe='')}", json={"name": "a"}).status_code in (
            200,
            201,
        )
        made = setup.put(memories("/race.md"), content=b"# round 0\n", headers=_md())
        assert made.status_code == 201, made.text
        sha = made.json()["contentSha256"]
        for round_no in range(1, rounds + 1):
            bodies = [f"# round {round_no} by racer {n}\n" for n in range(racers)]
            calls = [
                (ca if n % 2 == 0 else cb, bodies[n], {"If-Match": f'"{sha}"'})
                for n in range(racers)
            ]
            answers = _race(calls)
            codes = [r.status_code for r in answers]
            assert sorted(codes) == [200] + [412] * (racers - 1), [r.text for r in answers]
            winner = bodies[codes.index(200)]
            sha = hashlib.sha256(winner.encode()).hexdigest()
            # No lost update: both servers read the winner's bytes at once.
            for client in (ca, cb):
                shown = client.get(memories("/race.md"))
                assert shown.status_code == 200 and shown.json()["content"] == winner, shown.text
        history = cb.get(
            f"/v1/agents/{quote(AGENT, safe='')}/versions", params={"path": "/memories/race.md"}
        ).json()
        assert [v["version"] for v in history["versions"]] == list(range(1, rounds + 2)), history
    backend = cluster.backend
    revisions = [json.loads(backend.get(k))["revision"] for k in backend.list(_log())]
    assert revisions == list(range(1, len(revisions) + 1)), revisions  # no gap, no duplicate


def test_thirty_duplicate_deliveries_split_across_two_servers_start_one_run(
    cluster: Cluster,
) -> None:
    secret = set_up(cluster.a, "gh", prompt="file it")
    body = json.dumps({"action": "opened"})
    limits = httpx.Limits(max_connections=20, max_keepalive_connections=20)
    with (
        httpx.Client(base_url=cluster.a.url, timeout=120, limits=limits) as ca,
        httpx.Client(base_url=cluster.b.url, timeout=120, limits=limits) as cb,
    ):
        answers = duplicate_deliveries([cb, ca], secret, "gh", "msg_cluster", body, 30, timeout=60)
    assert sorted(code for code, _ in answers) == [200] * 29 + [202], answers
    (run_id,) = {run_id for _, run_id in answers}
    runs_url = f"/v1/agents/{quote(AGENT, safe='')}/runs"

    with cluster.a.client() as ca, cluster.b.client() as cb:

        def ended() -> bool:
            runs = cb.get(runs_url).json()["runs"]
            return len(runs) == 1 and runs[0]["status"] in ("succeeded", "failed")

        wait_until(ended, 90, "the run to end")
        (run,) = ca.get(runs_url).json()["runs"]
    assert run["id"] == run_id and run["status"] == "succeeded" and run["attempt"] == 1
    backend = cluster.backend
    agent = layout.agent_prefix(AGENT)
    assert len(list(backend.list(agent + "deliveries/gh/"))) == 1
    run_keys = list(backend.list(f"{agent}runs/{run_id}."))
    claims = [k for k in run_keys if ".c" in k.rsplit("/", 1)[1]]
    assert claims == [f"{agent}runs/{run_id}.c0001.json"], run_keys
    kinds = [json.loads(backend.get(k))["type"] for k in run_keys if ".e" in k.rsplit("/", 1)[1]]
    assert kinds.count("claimed") == 1 and kinds.count("succeeded") == 1, kinds


def test_a_write_through_one_server_is_read_at_once_through_the_other(cluster: Cluster) -> None:
    with cluster.a.client() as ca, cluster.b.client() as cb:
        assert ca.put(f"/v1/agents/{quote(AGENT, safe='')}", json={"name": "a"}).status_code in (
            200,
            201,
        )
        for n in range(10):
            writer, reader = (ca, cb) if n % 2 == 0 else (cb, ca)
            body = f"# note {n}\n"
            wrote = writer.put(memories(f"/n/{n}.md"), content=body.encode(), headers=_md())
            assert wrote.status_code == 201, wrote.text
            read = reader.get(memories(f"/n/{n}.md"))
            assert read.status_code == 200 and read.json()["content"] == body, read.text
            listed = reader.get(memories(""), params={"pathPrefix": "n"}).json()
            assert len(listed["memories"]) == n + 1, listed


def test_a_key_revoked_through_one_server_is_refused_by_the_other_within_5_s(
    cluster: Cluster,
) -> None:
    with cluster.a.client() as ca:
        made = ca.put("/v1/tenant/keys/app", json={"scopes": ["memories:read", "agents:users"]})
        assert made.status_code == 201, made.text
        secret = made.json()["secret"]
    with cluster.b.client(secret) as app:
        assert app.get("/v1/agents").status_code == 200  # B knows the key made through A
        with cluster.a.client() as ca:
            assert ca.delete("/v1/tenant/keys/app").status_code == 204
        revoked = time.monotonic()
        while app.get("/v1/agents").status_code != 401:
            assert time.monotonic() - revoked < 5.0, "B still accepts a key revoked through A"
            time.sleep(0.1)
        # And A refuses it, of course; the admin key still works on both.
        with cluster.a.client(secret) as on_a:
            assert on_a.get("/v1/agents").status_code == 401
    with cluster.b.client() as cb:
        assert cb.get("/v1/agents").status_code == 200


def test_kill_9_of_one_server_under_writes_loses_no_acknowledged_write(cluster: Cluster) -> None:
    with cluster.a.client() as ca:
        assert ca.put(f"/v1/agents/{quote(AGENT, safe='')}", json={"name": "a"}).status_code in (
            200,
            201,
        )
    acknowledged: dict[str, str] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def writer(srv: RealServer, tag: str) -> None:
        with httpx.Client(base_url=srv.url, headers=headers(), timeout=30) as client:
            n = 0
            while not stop.is_set():
                path, body = f"/w/{tag}-{n}.md", f"# {tag} {n}\n"
                n += 1
                try:
                    answer = client.put(memories(path), content=body.encode(), headers=_md())
                except httpx.TransportError:
                    continue  # the server died under us: not acknowledged
                if answer.status_code in (200, 201):
                    with lock:
                        acknowledged[path] = body

    threads = [
        threading.Thread(target=writer, args=(srv, f"{name}{k}"))
        for srv, name in ((cluster.a, "a"), (cluster.b, "b"))
        for k in range(2)
    ]
    for thread in threads:
        thread.start()
    wait_until(lambda: len(acknowledged) >= 20, 60, "20 acknowledged writes")
    cluster.a.kill_hard()  # A's master and workers, mid-write
    count = len(acknowledged)
    wait_until(lambda: len(acknowledged) >= count + 10, 60, "B to go on after A died")
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    assert any(path.startswith("/w/a") for path in acknowledged)
    with cluster.b.client() as cb:
        for path, body in sorted(acknowledged.items()):
            shown = cb.get(memories(path))
            assert shown.status_code == 200 and shown.json()["content"] == body, (path, shown.text)
        # One more write through the survivor adopts anything A left half-done.
        assert cb.put(memories("/after.md"), content=b"# after\n", headers=_md()).status_code == 201
    cluster.b.stop()
    checked = cluster.cli("fsck", "--json", data=cluster.b.data)  # on the survivor's node
    assert checked.returncode == 0, (checked.stdout, checked.stderr)


ATTEMPT_SCRIPT = """
import os, sys, time
sys.stdin.read()
with open({log!r}, "a") as out:
    out.write(f"start {{os.environ['MEMFS_ATTEMPT']}} {{os.getpid()}}\\n")
if os.environ["MEMFS_ATTEMPT"] == "1":
    time.sleep(300)  # killed with its server long before
"""


@pytest.mark.parametrize("cluster", ["one host", "two hosts"], indirect=True)
def test_a_run_of_a_server_killed_mid_run_is_adopted_by_the_other(cluster: Cluster) -> None:
    """One host: the claim's pid tells the survivor its owner is dead. Two hosts: the
    owner's node lease expires (core.leases), then the survivor adopts the attempt."""
    with shared_folder() as shared:
        log = shared / "attempts.log"
        script = ATTEMPT_SCRIPT.format(log=str(log))
        action = {"type": "command", "argv": [child_python(), "-c", script], "timeoutSeconds": 600}
        secret = set_up(cluster.a, "cmd", action=action, maxAttempts=3)
        with httpx.Client(base_url=cluster.a.url, timeout=30) as client:
            answer = deliver(client, secret, "cmd", "evt_adopt", json.dumps({"n": 1}))
        assert answer.status_code == 202, answer.text
        run_id = answer.json()["id"]

        def started() -> list[list[str]]:
            lines = log.read_text().splitlines() if log.exists() else []
            return [line.split() for line in lines]

        wait_until(lambda: len(started()) == 1, 60, "attempt 1 to start")
        ((_, attempt, child),) = started()
        assert attempt == "1"
        agent = layout.agent_prefix(AGENT)
        first = json.loads(cluster.backend.get(f"{agent}runs/{run_id}.c0001.json"))
        owner, survivor = (
            (cluster.a, cluster.b)
            if first["pid"] in cluster.a._group_members()
            else (cluster.b, cluster.a)
        )
        assert first["pid"] in owner._group_members()
        owner.kill_hard()
        wait_until(lambda: not Path(f"/proc/{child}").exists(), 30, "attempt 1 to die")
        runs_url = f"/v1/agents/{quote(AGENT, safe='')}/runs"
        with survivor.client() as client:

            def succeeded() -> bool:
                runs = client.get(runs_url).json()["runs"]
                return len(runs) == 1 and runs[0]["status"] == "succeeded"

            wait_until(succeeded, 120, "the survivor to run attempt 2")
            (run,) = client.get(runs_url).json()["runs"]
        assert run["id"] == run_id and run["attempt"] == 2, run
        second = json.loads(cluster.backend.get(f"{agent}runs/{run_id}.c0002.json"))
        assert second["pid"] in survivor._group_members()
        if cluster.b.wrapper:  # two hosts: the claims name different hosts and leases
            assert first["host"] != second["host"] and first["node"] != second["node"]
        assert [line[1] for line in started()] == ["1", "2"]


def _md() -> dict[str, str]:
    return {"Content-Type": "text/markdown"}


def _log() -> str:
    return layout.log_prefix(AGENT)
