"""Concurrent new deliveries share one durability point, and exactly-once still holds.

``core/delivery_records.py`` makes the records of the deliveries waiting at the same
moment durable together: one fsync'd file, one hard link per record's name (each name
still create-if-absent), one folder fsync. Proved here:

- in-process: twelve deliveries queued behind a held one are made durable as ONE file
  whose twelve names are its links (a webhook id sent twice in the batch starts one
  run), each name reads back its own record, and a fresh index rebuilt from the files
  finds every run, as does a folder restored from a backup;
- the bound that spares the YAML of the memory-size check is never below the size
  ``memory_content`` makes (property test);
- real processes: two ``memfs serve`` on one data folder racing on the same webhook ids
  start exactly one run per id; a server killed -9 while a batch is durable but
  unanswered (``MEMFS_TEST_FAULT=delivery-durable-before-ack:N``) loses no
  acknowledged delivery and runs no id twice after restart; a disk whose fsyncs of
  delivery records fail (``MEMFS_TEST_FAULT=delivery-fsync-eio``) gets no 202 and no run.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import threading
import time
from pathlib import Path

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from memfs.canonical import layout
from memfs.canonical.backend import LocalBackend, MemoryBackend
from memfs.config import Settings
from memfs.core import backup, deliveries, maintenance
from memfs.core.actions.memory import memory_content, memory_size_at_most
from memfs.core.delivery_records import record_of
from memfs.core.runs import Runs, delivery_key
from memfs.core.store import Store
from memfs.core.triggers import Triggers
from memfs.domain.webhook_verify import sign
from servers_real import RealServer
from test_webhook_processes import agent_url, all_runs, deliver, set_up, wait_until

SECRET = "whsec_" + base64.b64encode(b"batch-secret-of-32-bytes-exact!!").decode()
AGENT = "users/alice/assistant"
TRIGGER = "gh"
WAIT = 120.0  # seconds; generous for a loaded machine, never reached when all is well


class _Held(LocalBackend):
    """Holds the first record's create until ``behind`` deliveries are queued after it."""

    def __init__(self, root: Path, behind: int) -> None:
        super().__init__(root)
        self.behind = behind
        self.store: Store | None = None
        self.held = False
        self.shared: list[list[str]] = []

    def put_if_absent(self, key: str, data: bytes) -> bool:
        if "/deliveries/" in key and not self.held:
            self.held = True
            assert self.store is not None
            deadline = time.monotonic() + WAIT
            while self.store.deliveries.waiting() < self.behind:
                assert time.monotonic() < deadline, "the deliveries never queued"
                time.sleep(0.01)
        return super().put_if_absent(key, data)

    def put_shared_if_absent(self, keys: list[str], data: bytes) -> list[bool]:  # type: ignore[override]
        self.shared.append(list(keys))
        return super().put_shared_if_absent(keys, data)


def _headers(webhook_id: str, body: bytes) -> dict[str, str]:
    stamp = int(time.time())
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(SECRET, webhook_id, stamp, body),
    }


def test_waiting_deliveries_are_made_durable_as_one_file(tmp_path: Path) -> None:
    ids = [f"msg_{n}" for n in range(10)] + ["msg_twice", "msg_twice"]
    backend = _Held(tmp_path / "data", behind=len(ids))
    store = Store(tmp_path / "data", backend=backend)
    backend.store = store
    store.create_agent(AGENT)
    Triggers(store.backend).put(AGENT, TRIGGER, {"secret": SECRET, "prompt": "p"})
    target = deliveries.target(store, Settings(), AGENT, TRIGGER)
    answers: dict[int, tuple[str, str, bool]] = {}
    errors: list[BaseException] = []

    def one(n: int, webhook_id: str) -> None:
        try:
            body = f'{{"n": {n}}}'.encode()
            run, created = deliveries.accept(
                store, Settings(), target, body, _headers(webhook_id, body), "application/json",
                now=time.time(),
            )
            answers[n] = (webhook_id, run.run_id, created)
        except BaseException as exc:
            errors.append(exc)

    first = threading.Thread(target=one, args=(-1, "msg_first"))
    first.start()
    wait_until(lambda: backend.held, WAIT, "the first delivery to be held")
    threads = [threading.Thread(target=one, args=(n, i)) for n, i in enumerate(ids)]
    for thread in [*threads]:
        thread.start()
    for thread in [first, *threads]:
        thread.join(WAIT)
    assert not errors, errors
    assert len(answers) == len(ids) + 1

    # One shared file for the eleven distinct ids queued together: eleven links to it.
    assert len(backend.shared) == 1 and len(backend.shared[0]) == 11
    inodes = {os.stat(tmp_path / "data" / key).st_ino for key in backend.shared[0]}
    assert len(inodes) == 1
    assert os.stat(tmp_path / "data" / backend.shared[0][0]).st_nlink == 11
    # The id sent twice in the batch: one run, created once, both told its id.
    twice = [a for a in answers.values() if a[0] == "msg_twice"]
    assert len({run_id for _, run_id, _ in twice}) == 1
    assert sorted(created for _, _, created in twice) == [False, True]
    runs = {webhook_id: run_id for webhook_id, run_id, _ in answers.values()}
    assert len(set(runs.values())) == len(runs) == 12
    # Each name reads back its own record.
    for webhook_id, run_id in runs.items():
        key = delivery_key(AGENT, TRIGGER, webhook_id)
        record = record_of(key, store.backend.get(key))
        assert (record["webhookId"], record["runId"]) == (webhook_id, run_id)
        assert Runs(store).get(AGENT, run_id).webhook_id == webhook_id
    store.close()

    # The files are the truth: a fresh index rebuilt from them finds every run.
    fresh = Store(tmp_path / "data", index_file=tmp_path / "fresh.sqlite")
    try:
        maintenance.reindex(fresh)  # the agents from their records, the runs from theirs
        assert Runs(fresh).rescan() == 12
        listed = Runs(fresh).list(AGENT, trigger_id=None, status=None, after=None, limit=50)
        assert {r.webhook_id: r.run_id for r in listed} == runs
    finally:
        fresh.close()

    # A backup copies each name's bytes; the restored folder reads every record back.
    backup.backup(tmp_path / "data", tmp_path / "backup")
    backup.restore(tmp_path / "backup", tmp_path / "restored")
    restored = Store(tmp_path / "restored")
    try:
        maintenance.reindex(restored)
        listed = Runs(restored).list(AGENT, trigger_id=None, status=None, after=None, limit=50)
        assert {r.webhook_id: r.run_id for r in listed} == runs
    finally:
        restored.close()


_TRIGGER = Triggers(MemoryBackend()).put("a", "t", {"secret": SECRET, "prompt": "p"})[0]


@settings(max_examples=300, deadline=None)
@given(
    prompt=st.text(max_size=400),
    trigger_id=st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True),
    webhook_id=st.text(min_size=1, max_size=300),
    media=st.text(max_size=256),
    body=st.one_of(st.binary(max_size=2000), st.text(max_size=2000).map(str.encode)),
    received=st.integers(min_value=0, max_value=4_102_444_800_000_000),
)
def test_the_memory_size_bound_is_never_below_the_memory(
    prompt: str, trigger_id: str, webhook_id: str, media: str, body: bytes, received: int
) -> None:
    trigger = dataclasses.replace(_TRIGGER, prompt=prompt, trigger_id=trigger_id)
    facts = {"webhookId": webhook_id, "contentType": media, "receivedAt": received}
    assert len(memory_content(trigger, facts, body)) <= memory_size_at_most(
        trigger, facts, len(body)
    )


# ---- real processes ---------------------------------------------------------------------


def test_two_servers_on_one_folder_start_one_run_per_webhook_id(tmp_path: Path) -> None:
    data = tmp_path / "data"
    a = RealServer(data).start()
    b = RealServer(data).start()
    try:
        secret = set_up(a, TRIGGER, secret=SECRET)
        ids = [f"msg_race_{n}" for n in range(12)]
        answers: list[tuple[str, int, str]] = []
        errors: list[BaseException] = []
        lock = threading.Lock()
        gate = threading.Barrier(8, timeout=WAIT)

        def sender(n: int) -> None:
            client = httpx.Client(base_url=(a if n % 2 else b).url, timeout=WAIT)
            try:
                gate.wait()
                for webhook_id in ids[n % 3 :] + ids[: n % 3]:  # every id from each sender
                    got = deliver(client, secret, TRIGGER, webhook_id, '{"x": 1}')
                    with lock:
                        answers.append((webhook_id, got.status_code, got.json()["id"]))
            except BaseException as exc:
                errors.append(exc)
            finally:
                client.close()

        threads = [threading.Thread(target=sender, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(2 * WAIT)
        assert not errors, errors
        assert len(answers) == 8 * len(ids)
        for webhook_id in ids:
            mine = [(status, run_id) for wid, status, run_id in answers if wid == webhook_id]
            assert len({run_id for _, run_id in mine}) == 1, (webhook_id, mine)
            assert sorted(status for status, _ in mine) == [200] * 7 + [202], mine
        with a.client() as client:
            runs = all_runs(client)
        assert sorted(r["webhookId"] for r in runs) == sorted(ids)
    finally:
        b.close()
        a.close()


def test_kill_between_batch_durable_and_202_loses_no_acknowledged_delivery(
    tmp_path: Path,
) -> None:
    data, marker = tmp_path / "data", tmp_path / "parked"
    passing = 20  # records made durable before every later batch is parked
    env = {"MEMFS_TEST_FAULT": f"delivery-durable-before-ack:{passing}"}
    env["MEMFS_TEST_FAULT_FILE"] = str(marker)
    server = RealServer(data, env=env).start()
    senders = 6
    acked: list[list[tuple[str, str]]] = [[] for _ in range(senders)]
    pending: list[str | None] = [None] * senders
    try:
        secret = set_up(server, TRIGGER, secret=SECRET)

        def sender(n: int) -> None:
            with httpx.Client(base_url=server.url, timeout=WAIT) as client:
                for i in range(100):
                    webhook_id = f"msg_{n}_{i}"
                    pending[n] = webhook_id
                    try:
                        got = deliver(client, secret, TRIGGER, webhook_id, f'{{"i": {i}}}')
                    except httpx.HTTPError:
                        return  # killed while this one was parked: never answered
                    assert got.status_code == 202, got.text
                    acked[n].append((webhook_id, got.json()["id"]))
                    pending[n] = None

        threads = [threading.Thread(target=sender, args=(n,)) for n in range(senders)]
        for thread in threads:
            thread.start()
        # A batch durable and parked, and every sender waiting on an answer.
        wait_until(
            lambda: marker.exists()
            and all(p is not None for p in pending)
            and sum(len(a) for a in acked) + senders > passing,
            WAIT,
            "a batch to be parked with every sender waiting",
        )
        time.sleep(0.5)  # the senders' requests reach the server and queue behind it
        server.kill_hard()
    finally:
        server.close()
    for thread in threads:
        thread.join(WAIT)
    answered = [pair for pairs in acked for pair in pairs]
    assert 0 < len(answered) <= passing
    unanswered = [p for p in pending if p is not None]
    assert len(unanswered) == senders

    restarted = RealServer(data).start()  # indexes the durable records it finds
    try:
        secret = SECRET
        with restarted.client() as client:
            wait_until(
                lambda: len(all_runs(client)) >= len(answered), WAIT, "the runs to be indexed"
            )
            runs = all_runs(client)
            by_id = {r["webhookId"]: r["id"] for r in runs}
            # No webhook id ran twice: one run per id.
            assert len(by_id) == len(runs), runs
            for webhook_id, run_id in answered:
                assert by_id.get(webhook_id) == run_id, webhook_id
                got = client.get(agent_url(f"/runs/{run_id}"))
                assert got.status_code == 200, got.text
        with httpx.Client(base_url=restarted.url, timeout=WAIT) as sender_client:
            # A sender retries what it was never answered: one run each, never two.
            for webhook_id in unanswered + [w for w, _ in answered]:
                again = deliver(sender_client, secret, TRIGGER, webhook_id, '{"i": 0}')
                assert again.status_code in (200, 202), again.text
                if webhook_id in by_id:
                    assert again.status_code == 200 and again.json()["id"] == by_id[webhook_id]
        with restarted.client() as client:
            final = all_runs(client)
        assert len({r["webhookId"] for r in final}) == len(final)
        assert {w for w, _ in answered} | set(unanswered) <= {r["webhookId"] for r in final}
    finally:
        restarted.close()


def test_a_failing_fsync_of_delivery_records_gets_no_202_and_no_run(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = RealServer(data, env={"MEMFS_TEST_FAULT": "delivery-fsync-eio"}).start()
    statuses: list[tuple[int, object]] = []
    lock = threading.Lock()
    ids = [f"msg_eio_{n}" for n in range(12)]
    try:
        secret = set_up(server, TRIGGER, secret=SECRET)

        def sender(chunk: list[str]) -> None:
            with httpx.Client(base_url=server.url, timeout=WAIT) as client:
                for webhook_id in chunk:
                    got = deliver(client, secret, TRIGGER, webhook_id, '{"x": 1}')
                    retryable = got.json().get("details", {}).get("retryable")
                    with lock:
                        statuses.append((got.status_code, retryable))

        threads = [threading.Thread(target=sender, args=(ids[n::4],)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(WAIT)
        assert len(statuses) == len(ids)
        # A failing disk is a passing condition: 503, retryable, never a 2xx.
        assert statuses == [(503, True)] * len(ids), statuses
        with server.client() as client:
            assert all_runs(client) == []
    finally:
        server.close()
    folder = data / layout.agent_prefix(AGENT) / "deliveries"
    assert not list(folder.rglob("*.json"))  # no record name was left behind
    restarted = RealServer(data).start()  # the disk is fine again: still no run
    try:
        with restarted.client() as client:
            assert all_runs(client) == []
        secret = SECRET
        with httpx.Client(base_url=restarted.url, timeout=WAIT) as client:
            got = deliver(client, secret, TRIGGER, ids[0], '{"x": 1}')
            assert got.status_code == 202, got.text  # a first delivery, as it always was
    finally:
        restarted.close()
