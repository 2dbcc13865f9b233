"""Webhook deliveries and runs against real ``memfs serve`` processes.

Servers come from ``tests/servers_real.py`` (127.0.0.1, a free port, data in
``tmp_path``, a process group of their own so ``kill_hard`` SIGKILLs master and
workers at once). Deliveries are signed by the ``standardwebhooks`` library, as a
sender would sign them. Every loop is bounded in count and in time; nothing asserts
a timing. The canonical run events and claims are read from the data folder, since
they, not the index, are the truth about how often something ran.
"""

from __future__ import annotations

import base64
import datetime as dt
import itertools
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from standardwebhooks import Webhook

from commands import child_python, shared_folder
from memfs.canonical import layout
from memfs.canonical.backend import LocalBackend
from memfs.core.delivery_records import record_of
from memfs.core.runs import claim_key, delivery_key
from memfs.domain.run_events import created as created_event
from servers_real import RealServer, memfs_cli

AGENT = "users/alice/assistant"
TERMINAL = ("succeeded", "failed")
RUN_OPTIONS = ("--retry-base-ms", "100", "--allow-commands")


def agent_url(suffix: str = "") -> str:
    return f"/v1/agents/{quote(AGENT, safe='')}{suffix}"


def server(data: Path, *, workers: int, concurrency: int = 4) -> RealServer:
    return RealServer(
        data,
        workers=workers,
        extra_args=(*RUN_OPTIONS, "--run-concurrency", str(concurrency)),
    )


def set_up(srv: RealServer, trigger: str, **body: Any) -> str:
    """Create the agent (if needed) and a trigger; the trigger's secret."""
    with srv.client() as client:
        response = client.put(agent_url(), json={"name": "assistant"})
        assert response.status_code in (200, 201), response.text
        response = client.put(agent_url(f"/triggers/{trigger}"), json=body)
        assert response.status_code == 201, response.text
        secret: str = response.json()["secret"]
        return secret


def signed(secret: str, webhook_id: str, body: str) -> dict[str, str]:
    """Headers of a delivery signed by the standardwebhooks library (the sender's side)."""
    now = dt.datetime.now(dt.UTC)
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(webhook_id, now, body),
        "Content-Type": "application/json",
    }


def deliver(
    client: httpx.Client, secret: str, trigger: str, webhook_id: str, body: str
) -> httpx.Response:
    # No Authorization, no Memfs-Protocol: a sender has neither.
    return client.post(
        agent_url(f"/triggers/{trigger}:deliver"),
        content=body.encode(),
        headers=signed(secret, webhook_id, body),
    )


def duplicate_deliveries(
    clients: list[httpx.Client],
    secret: str,
    trigger: str,
    webhook_id: str,
    body: str,
    count: int,
    *,
    timeout: float,
) -> list[tuple[int, str]]:
    """``count`` deliveries of one webhook-id at once (threads released together by a
    barrier), sent through ``clients`` in turn: each answer's status and run id. An
    error in a thread fails the test here, never lost in the thread."""
    gate = threading.Barrier(count, timeout=timeout)
    answers: list[tuple[int, str]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def one(client: httpx.Client) -> None:
        try:
            gate.wait()
            response = deliver(client, secret, trigger, webhook_id, body)
            with lock:
                answers.append((response.status_code, response.json()["id"]))
        except BaseException as exc:
            with lock:
                errors.append(exc)

    threads = [
        threading.Thread(target=one, args=(clients[n % len(clients)],)) for n in range(count)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=2 * timeout)
    assert not errors, errors
    assert len(answers) == count, answers
    return answers


def all_runs(client: httpx.Client) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    params = {"limit": "50"}
    for _page in range(100):
        response = client.get(agent_url("/runs"), params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        runs.extend(body["runs"])
        if body["nextCursor"] is None:
            return runs
        params["cursor"] = body["nextCursor"]
    raise AssertionError("the runs listing never ended")


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def wait_terminal(srv: RealServer, count: int, timeout: float = 40.0) -> list[dict[str, Any]]:
    """Poll ``GET …/runs`` until ``count`` runs exist and all of them have ended."""
    seen: list[dict[str, Any]] = []
    with srv.client() as client:

        def done() -> bool:
            nonlocal seen
            seen = all_runs(client)
            return len(seen) == count and all(r["status"] in TERMINAL for r in seen)

        try:
            wait_until(done, timeout, f"{count} runs to end")
        except AssertionError:
            lines = [x for x in srv.log_text().splitlines() if '" 200 OK' not in x]
            tail = "\n".join(lines[-60:])
            raise AssertionError(f"runs did not end: {seen}\n{tail}") from None
    return seen


def runs_folder(data: Path) -> Path:
    return data / layout.agent_prefix(AGENT) / "runs"


def events(data: Path, run_id: str) -> list[dict[str, Any]]:
    """The run's canonical events: event 1 is its delivery record (until collected)."""
    files = sorted(runs_folder(data).glob(f"{run_id}.e*.json"))
    found = [json.loads(p.read_text()) for p in files]
    if not (runs_folder(data) / f"{run_id}.e000001.json").exists():
        folder = data / layout.agent_prefix(AGENT) / "deliveries"
        for path in sorted(folder.glob("*/*.json")):
            key = path.relative_to(data).as_posix()
            record = record_of(key, path.read_bytes())  # its own file, or a batch's entry
            if record["runId"] == run_id:
                found.insert(0, created_event(key, record))
    return found


def claims(data: Path, run_id: str) -> list[str]:
    prefix = f"{run_id}.c"
    return sorted(p.name.removeprefix(prefix) for p in runs_folder(data).glob(f"{prefix}*.json"))


def run_keys(srv: RealServer) -> list[str]:
    with srv.client() as client:
        response = client.get("/v1/tenant/keys")
        assert response.status_code == 200, response.text
        return [k["keyId"] for k in response.json()["keys"] if k["keyId"].startswith("run-")]


# ---- a. one webhook-id delivered 50 times at once to two workers ------------------------


def test_fifty_concurrent_deliveries_of_one_id_start_one_run(tmp_path: Path) -> None:
    """Exactly one 202 and 49 × 200, all naming one run that executes exactly once.

    The 50 requests are released together by a barrier on 50 connections, so both
    workers race on the create-if-absent delivery record. "Executes once" is read
    from the run's canonical events and claims (one claim, one ``claimed``, one
    ``succeeded``), not only from the memory: writing identical content is a no-op,
    so a second execution would not show up as a second version.
    """
    data = tmp_path / "data"
    with server(data, workers=2) as srv:
        secret = set_up(srv, "gh", prompt="file it")
        body = json.dumps({"action": "opened", "n": 1})
        limits = httpx.Limits(max_connections=60, max_keepalive_connections=60)
        with httpx.Client(base_url=srv.url, timeout=60, limits=limits) as client:
            answers = duplicate_deliveries([client], secret, "gh", "msg_same", body, 50, timeout=30)
        codes = sorted(code for code, _ in answers)
        assert codes == [200] * 49 + [202], codes
        run_ids = {run_id for _, run_id in answers}
        assert len(run_ids) == 1, run_ids
        (run_id,) = run_ids

        (run,) = wait_terminal(srv, 1)
        assert run["id"] == run_id and run["webhookId"] == "msg_same"
        assert run["status"] == "succeeded" and run["attempt"] == 1, run
        with srv.client() as client:
            path = "/memories/inbox/gh/msg_same.md"
            response = client.get(agent_url("/versions"), params={"path": path})
            assert response.status_code == 200, response.text
            versions = response.json()["versions"]
            assert len(versions) == 1 and versions[0]["actor"] == f"run:{run_id}", versions
            memory = client.get(agent_url("/memories/inbox/gh/msg_same.md")).json()
            assert memory["content"].endswith(body)
            again = deliver(client, secret, "gh", "msg_same", body)
            assert again.status_code == 200 and again.json()["id"] == run_id
            assert again.json()["status"] == "succeeded"
    kinds = [e["type"] for e in events(data, run_id)]
    assert kinds.count("created") == 1 and kinds.count("claimed") == 1, kinds
    assert kinds.count("succeeded") == 1 and "failed" not in kinds, kinds
    assert claims(data, run_id) == ["0001.json"]
    delivered = list((data / layout.agent_prefix(AGENT) / "deliveries" / "gh").glob("*.json"))
    assert len(delivered) == 1


# ---- b. kill -9 of the whole server while command runs are queued and running -----------

SLEEP = 3.0  # before the kill: long enough that every started attempt is still running
SLEEP_AFTER_RESTART = 0.5
RUN_SCRIPT = """
import os, sys, time
def note(line):
    fd = os.open({log!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
run, attempt = os.environ["MEMFS_RUN_ID"], os.environ["MEMFS_ATTEMPT"]
note(f"start {{run}} {{attempt}} {{time.time():.6f}} {{os.getpid()}}\\n")
sys.stdin.read()
time.sleep({short} if os.path.exists({restarted!r}) else {sleep})
note(f"end {{run}} {{attempt}} {{time.time():.6f}}\\n")
"""


Starts = dict[tuple[str, int], list[tuple[float, int]]]
Ends = dict[tuple[str, int], list[float]]


def read_log(path: Path) -> tuple[Starts, Ends]:
    """``start`` lines as (run, attempt) → [(time, pid)], ``end`` lines likewise → [time]."""
    starts: Starts = {}
    ends: Ends = {}
    text = path.read_text() if path.exists() else ""
    for line in text.splitlines():
        parts = line.split()
        if parts[0] == "start":
            starts.setdefault((parts[1], int(parts[2])), []).append(
                (float(parts[3]), int(parts[4]))
            )
        elif parts[0] == "end":
            ends.setdefault((parts[1], int(parts[2])), []).append(float(parts[3]))
    return starts, ends


def process_gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def test_kill_9_while_runs_queue_and_run_resumes_each_once(tmp_path: Path) -> None:
    """SIGKILL of master + workers with command runs running and queued, then restart.

    Proves: the command children of the killed server die with it (PDEATHSIG) — no
    attempt that started before the kill ever logs ``end``, and its pid is gone; after
    a restart on the same data every run ends ``succeeded``; each (run, attempt) was
    started by exactly one process, attempt k+1 never started before attempt k's
    process was gone, and exactly one attempt of each run ran to its end; a redelivery
    of an old webhook id answers 200 with its first run; the keys handed to the
    interrupted attempts are revoked; ``memfs fsck`` is clean.
    """
    with shared_folder() as shared:
        _kill_9_while_runs_queue(tmp_path / "data", shared)


def _kill_9_while_runs_queue(data: Path, shared: Path) -> None:
    log = shared / "attempts.log"
    restarted = shared / "restarted"
    script = RUN_SCRIPT.format(
        log=str(log), sleep=SLEEP, short=SLEEP_AFTER_RESTART, restarted=str(restarted)
    )
    action = {"type": "command", "argv": [child_python(), "-c", script], "timeoutSeconds": 60}
    ids = [f"evt_{i}" for i in range(8)]
    first_runs: dict[str, str] = {}

    srv = server(data, workers=2, concurrency=2)
    with srv:
        secret = set_up(srv, "cmd", action=action, maxAttempts=5)
        with httpx.Client(base_url=srv.url, timeout=30) as client:
            for webhook_id in ids:
                response = deliver(
                    client, secret, "cmd", webhook_id, json.dumps({"id": webhook_id})
                )
                assert response.status_code == 202, response.text
                first_runs[webhook_id] = response.json()["id"]
        # Wait until a few attempts run (≤ 2 per worker); the rest must still be queued.
        wait_until(lambda: len(read_log(log)[0]) >= 3, 20, "three attempts to start")
        with srv.client() as client:
            statuses = [r["status"] for r in all_runs(client)]
        assert "queued" in statuses and "running" in statuses, statuses
        srv.kill_hard()
        killed_at = time.time()
        before_starts, before_ends = read_log(log)
        assert not before_ends, "an attempt ended before the kill; the premise failed"
        killed = before_starts
        # The children were in sessions of their own, outside the killed group: only
        # PDEATHSIG takes them down, well before their sleep would end.
        pids = [pid for procs in killed.values() for _, pid in procs]
        wait_until(lambda: all(process_gone(p) for p in pids), SLEEP / 4, "attempts to die")

        # A child that survived would log its end within its sleep; wait past that.
        time.sleep(max(0.0, killed_at + SLEEP + 0.5 - time.time()))
        assert not read_log(log)[1], "an attempt kept running after the server was killed"

        restarted.touch()  # attempts from now on sleep briefly
        srv.start()  # same data folder, new processes
        runs = wait_terminal(srv, len(ids))
        with srv.client() as client:
            old = deliver(client, secret, "cmd", ids[0], json.dumps({"id": ids[0]}))
            assert old.status_code == 200, old.text
            assert old.json()["id"] == first_runs[ids[0]]
        leftover_keys = run_keys(srv)
        srv.stop()

    by_id = {r["id"]: r for r in runs}
    assert set(by_id) == set(first_runs.values())
    for run in runs:
        assert run["status"] == "succeeded", (run["error"], run["output"])
    starts, ends = read_log(log)
    for key in killed:
        assert key not in ends, f"attempt {key} kept running after the server was killed"
        run = by_id[key[0]]
        assert run["attempt"] > key[1], f"interrupted attempt {key} was not retried: {run}"
    for run_id, run in by_id.items():
        attempts = sorted(a for (r, a) in starts if r == run_id)
        # Each attempt is started by exactly one process.
        for attempt in attempts:
            assert len(starts[(run_id, attempt)]) == 1, (run_id, attempt, starts)
        # Exactly one attempt ran to its end: the last, the one that succeeded.
        finished = sorted(a for (r, a) in ends if r == run_id)
        assert finished == [run["attempt"]], (run_id, finished, run)
        assert len(ends[(run_id, run["attempt"])]) == 1
        # Attempt k+1 starts only after attempt k's process is gone: after its end, or
        # (killed, no end) after the kill.
        for earlier, later in itertools.pairwise(attempts):
            gone_at = ends[(run_id, earlier)][0] if (run_id, earlier) in ends else killed_at
            assert starts[(run_id, later)][0][0] >= gone_at, (run_id, earlier, later)
        kinds = [e["type"] for e in events(data, run_id)]
        assert kinds.count("created") == 1 and kinds.count("succeeded") == 1, kinds
        # One "retry scheduled" per failure, even when both workers found it interrupted.
        assert kinds.count("retry_scheduled") == kinds.count("failed"), kinds
        assert len(claims(data, run_id)) == run["attempt"]
    assert killed, "no attempt was running at the kill"
    assert leftover_keys == [], f"keys of interrupted attempts were never revoked: {leftover_keys}"
    work = data / "work"
    assert not work.exists() or not any(work.iterdir()), sorted(work.rglob("*"))
    fsck = memfs_cli("fsck", data=data)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr


# ---- c. a crash right after the dedupe record, and right after a claim -----------------


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(child.stdout)


def test_delivery_record_without_events_runs_after_restart(tmp_path: Path) -> None:
    """Crash windows a kill can't hit on purpose, written by hand in runs.py's format.

    ``msg_orphan``: the delivery record exists (the dedupe point: the sender got, or
    will get on retry, this run id) but the server died before the run's ``created``
    event. ``msg_claimed``: it also died right after winning the claim of attempt 1,
    before recording ``claimed`` (the claim names a process that no longer exists).
    After a restart both runs are found and executed, and redelivering either id
    answers 200 with the run id of the record.
    """
    data = tmp_path / "data"
    srv = server(data, workers=2)
    with srv:
        secret = set_up(srv, "gh", prompt="inbox")
        srv.stop()

        backend = LocalBackend(data)
        run_ids = {"msg_orphan": "run_" + "a" * 32, "msg_claimed": "run_" + "b" * 32}
        bodies = {w: json.dumps({"webhook": w}) for w in run_ids}
        for webhook_id, run_id in run_ids.items():
            record = {
                "webhookId": webhook_id,
                "triggerId": "gh",
                "runId": run_id,
                "receivedAt": time.time_ns() // 1000,
                "contentType": "application/json",
                "maxAttempts": 5,
                "body": base64.b64encode(bodies[webhook_id].encode()).decode(),
            }
            key = delivery_key(AGENT, "gh", webhook_id)
            assert backend.put_if_absent(key, json.dumps(record).encode())
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        owner = {
            "host": socket.gethostname(),
            "bootId": boot_id,
            "pid": dead_pid(),
            "start": "0",
            "attempt": 1,
        }
        claim = claim_key(AGENT, run_ids["msg_claimed"], 1)
        assert backend.put_if_absent(claim, json.dumps(owner).encode())

        srv.start()
        runs = wait_terminal(srv, 2, timeout=30)
        by_id = {r["id"]: r for r in runs}
        assert set(by_id) == set(run_ids.values())
        for webhook_id, run_id in run_ids.items():
            run = by_id[run_id]
            assert run["status"] == "succeeded" and run["webhookId"] == webhook_id, run
        assert by_id[run_ids["msg_orphan"]]["attempt"] == 1
        assert by_id[run_ids["msg_claimed"]]["attempt"] == 2  # attempt 1 died with its owner
        with srv.client() as client:
            for webhook_id in run_ids:
                memory = client.get(agent_url(f"/memories/inbox/gh/{webhook_id}.md"))
                assert memory.status_code == 200, memory.text
                assert memory.json()["content"].endswith(bodies[webhook_id])
            for webhook_id, run_id in run_ids.items():
                again = deliver(client, secret, "gh", webhook_id, bodies[webhook_id])
                assert again.status_code == 200, again.text
                assert again.json()["id"] == run_id
    kinds = [e["type"] for e in events(data, run_ids["msg_claimed"])]
    assert kinds.count("succeeded") == 1, kinds
    assert claims(data, run_ids["msg_claimed"]) == ["0001.json", "0002.json"]


# ---- d. what a command run writes is the run's -----------------------------------------


def test_writes_of_a_command_run_are_attributed_to_the_run(tmp_path: Path) -> None:
    """The program writes through memfs with its MEMFS_TOKEN; the version says run:<id>."""
    script = (
        "import os, urllib.parse, urllib.request; "
        "agent = urllib.parse.quote(os.environ['MEMFS_AGENT_ID'], safe=''); "
        "req = urllib.request.Request("
        "os.environ['MEMFS_URL'] + '/v1/agents/' + agent + '/memories/notes/from-run.md', "
        "data=b'written by the program', method='PUT', headers={"
        "'Authorization': 'Bearer ' + os.environ['MEMFS_TOKEN'], 'Memfs-Protocol': '1', 'Content-Type': 'text/markdown'}); "
        "print(urllib.request.urlopen(req).status)"
    )
    action = {"type": "command", "argv": [child_python(), "-c", script], "timeoutSeconds": 30}
    srv = RealServer(tmp_path / "data", workers=1, extra_args=RUN_OPTIONS)
    with srv.start():
        secret = set_up(srv, "cmd", action=action, maxAttempts=1)
        with httpx.Client(base_url=srv.url, timeout=30) as plain:
            assert deliver(plain, secret, "cmd", "msg_actor", "{}").status_code == 202
        [run] = wait_terminal(srv, 1)
        assert run["status"] == "succeeded", (run["error"], run["output"])
        with srv.client() as client:
            response = client.get(
                agent_url("/versions"), params={"path": "/memories/notes/from-run.md"}
            )
            assert response.status_code == 200, response.text
            [version] = response.json()["versions"]
    assert version["actor"] == f"run:{run['id']}"
