"""memfs against real ``memfs serve`` processes: several workers, SIGKILL, SIGTERM.

Every test starts a server with ``tests/servers_real.py`` (127.0.0.1, a free port,
data in ``tmp_path``, the admin key in ``MEMFS_ADMIN_KEY``) and talks to it with plain
httpx clients. Every loop is bounded in count and in time; nothing asserts a timing.
"""

from __future__ import annotations

import hashlib
import json
import random
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from memfs.core.store import Put, Store
from servers_real import RealServer, headers, memfs_cli, running

AGENT = "users/alice/assistant"
MARKDOWN = {"Content-Type": "text/markdown"}


def agent_url(agent: str = AGENT) -> str:
    return f"/v1/agents/{quote(agent, safe='')}"


def memory_url(path: str, agent: str = AGENT) -> str:
    rel = path.removeprefix("/memories/")
    return f"{agent_url(agent)}/memories/" + "/".join(quote(s, safe="") for s in rel.split("/"))


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def create_agent(client: httpx.Client, agent: str = AGENT) -> None:
    response = client.put(agent_url(agent), json={"name": agent})
    assert response.status_code == 201, response.text


def revision(client: httpx.Client, agent: str = AGENT) -> int:
    response = client.get(agent_url(agent))
    assert response.status_code == 200, response.text
    value: int = response.json()["revision"]
    return value


def versions(client: httpx.Client, path: str, agent: str = AGENT) -> list[dict[str, object]]:
    """Every version of ``path`` through the versions route, following nextCursor."""
    out: list[dict[str, object]] = []
    params: dict[str, str] = {"path": path, "limit": "50"}
    for _page in range(1000):
        response = client.get(f"{agent_url(agent)}/versions", params=params)
        assert response.status_code == 200, response.text
        body = response.json()
        out.extend(body["versions"])
        if body["nextCursor"] is None:
            return out
        params["cursor"] = body["nextCursor"]
    raise AssertionError("the versions listing never ended")


def log_revisions(data: Path, agent: str = AGENT) -> list[dict[str, object]]:
    """``memfs log --json`` of the agent, run as a separate process beside the server."""
    done = memfs_cli("log", agent, "--json", data=data)
    assert done.returncode == 0, done.stderr
    commits: list[dict[str, object]] = json.loads(done.stdout)["commits"]
    return commits


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


# ---- a. paging to the end while another client writes ------------------------------------


def test_paging_walk_while_another_client_writes(tmp_path: Path) -> None:
    """Keyset paging over HTTP, with a second client committing between every page.

    600 memories ``n0000, n0002, …`` exist before the walk. During it a writer creates
    the odd-numbered names (interleaved everywhere in the key range, both behind and
    ahead of the cursor) and deletes and re-creates every tenth original. A walk must
    return no path twice, stay in its folder, be ordered, and return every memory that
    existed unchanged for the whole walk (untouched originals, and new ones made before
    the walk began).
    """
    data = tmp_path / "data"
    folder = "/memories/notes"
    originals = [f"{folder}/n{i:04d}.md" for i in range(0, 1200, 2)]
    volatile = originals[::10]
    stable = set(originals) - set(volatile)
    store = Store(data)  # set-up in one commit, before the server runs
    try:
        store.create_agent(AGENT)
        store.apply(AGENT, [Put(p, f"# {p}\n".encode()) for p in originals], actor="setup")
        # A sibling folder whose name extends the walked one: it must never leak in.
        store.apply(
            AGENT,
            [Put(f"/memories/notes2/s{i}.md", b"# sibling\n") for i in range(30)],
            actor="setup",
        )
    finally:
        store.close()

    stop = threading.Event()
    done_writes = [0]
    created: list[str] = []  # new paths, acknowledged, never touched again
    errors: list[str] = []

    def writer(server: RealServer) -> None:
        rng = random.Random(7)
        fresh = [f"{folder}/n{i:04d}.md" for i in range(1, 1200, 2)]
        rng.shuffle(fresh)
        present = dict.fromkeys(volatile, True)
        deadline = time.monotonic() + 40
        with server.client() as client:
            for n in range(3000):
                if stop.is_set() or time.monotonic() > deadline:
                    return
                if n % 2 == 0 and fresh:
                    path = fresh.pop()
                    response = client.put(memory_url(path), content=b"# new\n", headers=MARKDOWN)
                    ok = response.status_code == 201
                    if ok:
                        created.append(path)
                else:
                    path = volatile[(n // 2) % len(volatile)]
                    if present[path]:
                        response = client.delete(memory_url(path))
                        ok = response.status_code == 204
                    else:
                        body = f"# {path} again {n}\n".encode()
                        response = client.put(memory_url(path), content=body, headers=MARKDOWN)
                        ok = response.status_code == 201
                    present[path] = not present[path]
                if not ok:
                    errors.append(f"{response.status_code} {response.text}")
                    return
                done_writes[0] += 1

    with running(data, workers=2) as server, server.client() as reader:
        thread = threading.Thread(target=writer, args=(server,), daemon=True)
        thread.start()
        try:
            for _walk in range(3):
                seen: list[str] = []
                params = {"pathPrefix": "notes", "limit": "50"}
                writes_at_start = done_writes[0]
                # Unchanged for the whole walk: untouched originals, and new memories
                # acknowledged before it began (each is created once, never changed).
                unchanged = stable | set(created)
                for _page in range(200):
                    response = reader.get(f"{agent_url()}/memories", params=params)
                    assert response.status_code == 200, response.text
                    body = response.json()
                    page = [m["path"] for m in body["memories"]]
                    assert len(page) <= 50
                    seen.extend(page)
                    if body["nextCursor"] is None:
                        break
                    params["cursor"] = body["nextCursor"]
                    # Let at least one write land between this page and the next.
                    before, deadline = done_writes[0], time.monotonic() + 10
                    while done_writes[0] == before and thread.is_alive():
                        assert time.monotonic() < deadline, "the writer stalled"
                        time.sleep(0.002)
                    assert not errors, errors
                else:
                    raise AssertionError("the walk never reached nextCursor: null")
                assert len(seen) == len(set(seen)), "a path was returned twice"
                assert all(p.startswith(folder + "/") for p in seen), "left the folder"
                encoded = [p.encode() for p in seen]
                assert encoded == sorted(encoded), "not in bytewise order"
                missing = unchanged - set(seen)
                assert not missing, (
                    f"skipped {len(missing)} unchanged memories: {sorted(missing)[:5]}"
                )
                assert done_writes[0] > writes_at_start, "nothing was written during the walk"
        finally:
            stop.set()
            thread.join(30)
        assert not errors, errors


# ---- b. two workers, concurrent If-Match writers ------------------------------------------


def test_if_match_race_across_two_workers(tmp_path: Path) -> None:
    """N clients PUT one path with the same If-Match at once, on a 2-worker server.

    Each round exactly one wins (200) and the rest get 412; the path ends with
    rounds + 1 versions and the agent's commits are contiguous, as seen by the
    versions route and by ``memfs log --json`` run beside the server.
    """
    data = tmp_path / "data"
    rounds, writers = 8, 8
    path = "/memories/race/counter.md"
    with running(data, workers=2) as server, server.client() as admin:
        create_agent(admin)
        first = admin.put(memory_url(path), content=b"# round 0\n", headers=MARKDOWN)
        assert first.status_code == 201, first.text
        current = first.json()["contentSha256"]
        # One client (one connection, accepted by either worker) per writer, warmed up.
        clients = [server.client() for _ in range(writers)]
        try:
            for c in clients:
                assert c.get(memory_url(path)).status_code == 200
            with ThreadPoolExecutor(max_workers=writers) as pool:
                for r in range(1, rounds + 1):
                    barrier = threading.Barrier(writers)
                    expected = current

                    def put(
                        i: int,
                        r: int = r,
                        expected: str = expected,
                        barrier: threading.Barrier = barrier,
                    ) -> httpx.Response:
                        barrier.wait(timeout=10)
                        return clients[i].put(
                            memory_url(path),
                            content=f"# round {r} writer {i}\n".encode(),
                            headers={**MARKDOWN, "If-Match": f'"{expected}"'},
                        )

                    responses = list(pool.map(put, range(writers)))
                    codes = sorted(resp.status_code for resp in responses)
                    assert codes == [200] + [412] * (writers - 1), codes
                    for resp in responses:
                        if resp.status_code == 412:
                            assert resp.json()["code"] == "precondition_failed"
                    winner = next(resp for resp in responses if resp.status_code == 200)
                    current = winner.json()["contentSha256"]
                    got = admin.get(memory_url(path), headers={"Accept": "text/markdown"})
                    assert sha(got.content) == current
                    assert got.headers["ETag"] == f'"{current}"'
        finally:
            for c in clients:
                c.close()

        history = versions(admin, path)
        assert [v["version"] for v in history] == list(range(1, rounds + 2))
        assert [v["revision"] for v in history] == list(range(1, rounds + 2))
        assert history[-1]["contentSha256"] == current
        assert revision(admin) == rounds + 1
        log = log_revisions(data)
        assert [c["revision"] for c in log] == list(range(rounds + 1, 0, -1))


# ---- c. subject scopes ----------------------------------------------------------------------


def test_subject_scopes_narrow_a_key(tmp_path: Path) -> None:
    """A key narrowed to read-only for subject alice can't write (403, nothing written);
    narrowed with write scope, its writes are recorded as ``subject:alice``."""
    data = tmp_path / "data"
    with running(data) as server, server.client() as admin:
        create_agent(admin)
        seeded = admin.put(memory_url("/memories/seed.md"), content=b"# seed\n", headers=MARKDOWN)
        assert seeded.status_code == 201
        made = admin.put(
            "/v1/tenant/keys/alice-app",
            json={"scopes": ["memories:read", "memories:write", "agents:users/alice"]},
        )
        assert made.status_code == 201, made.text
        secret = made.json()["secret"]
        before = revision(admin)
        log_before = log_revisions(data)

        read_only = headers(
            secret, Memfs_Subject="alice", Memfs_Scopes="memories:read agents:users/alice"
        )
        read_write = headers(
            secret,
            Memfs_Subject="alice",
            Memfs_Scopes="memories:read memories:write agents:users/alice",
        )
        with httpx.Client(base_url=server.url, timeout=30) as plain:
            # Narrowed to read: reads work, every kind of write is refused.
            assert plain.get(memory_url("/memories/seed.md"), headers=read_only).status_code == 200
            refused = [
                plain.put(
                    memory_url("/memories/prefs.md"),
                    content=b"# alice likes tea\n",
                    headers={**read_only, **MARKDOWN},
                ),
                plain.put(
                    memory_url("/memories/seed.md"),
                    json={"content": "# overwritten\n"},
                    headers=read_only,
                ),
                plain.delete(memory_url("/memories/seed.md"), headers=read_only),
                plain.post(
                    f"{agent_url()}/memory:command",
                    json={"command": "create", "path": "/memories/x.md", "file_text": "x"},
                    headers=read_only,
                ),
            ]
            for response in refused:
                assert response.status_code == 403, response.text
                assert response.json()["code"] == "forbidden"
            # Narrowing can't widen: a scope or an agent outside the key is refused too.
            for scopes in ("memories:read inspect agents:users/alice", "memories:write agents:*"):
                wider = headers(secret, Memfs_Subject="alice", Memfs_Scopes=scopes)
                response = plain.put(
                    memory_url("/memories/prefs.md"), content=b"x", headers={**wider, **MARKDOWN}
                )
                assert response.status_code == 403, response.text
            # Nothing was written: same revision, same log, no new memory, seed intact.
            assert revision(admin) == before
            assert log_revisions(data) == log_before
            assert admin.get(memory_url("/memories/prefs.md")).status_code == 404
            seed = admin.get(memory_url("/memories/seed.md"), headers={"Accept": "text/markdown"})
            assert seed.content == b"# seed\n"

            # Narrowed with write scope: the write lands and names the subject as actor.
            written = plain.put(
                memory_url("/memories/prefs.md"),
                content=b"# alice likes tea\n",
                headers={**read_write, **MARKDOWN, "Memfs-Message": "learned a preference"},
            )
            assert written.status_code == 201, written.text
            # The same key without narrowing is recorded as the key.
            unnarrowed = plain.put(
                memory_url("/memories/seed.md"),
                content=b"# seed v2\n",
                headers={**headers(secret), **MARKDOWN},
            )
            assert unnarrowed.status_code == 200, unnarrowed.text

        assert revision(admin) == before + 2
        (prefs,) = versions(admin, "/memories/prefs.md")
        assert prefs["actor"] == "subject:alice"
        assert prefs["message"] == "learned a preference"
        assert versions(admin, "/memories/seed.md")[-1]["actor"] == "key:alice-app"
        newest = log_revisions(data)[:2]
        assert [c["actor"] for c in newest] == ["key:alice-app", "subject:alice"]


# ---- d. kill -9 under write load --------------------------------------------------------------


def _content(rng: random.Random, tag: str) -> bytes:
    big = rng.random() < 0.4  # over the 16 KiB inline limit: stored as a separate blob
    size = rng.randrange(16 * 1024 + 1, 48 * 1024) if big else rng.randrange(0, 800)
    head = f"---\ndescription: {tag}\n---\n# {tag}\n"
    unit = f"{tag} ünïcødé line\n"
    return (head + unit * (size // len(unit) + 1))[: len(head) + size].encode()


def test_kill_9_under_write_load_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """SIGKILL the whole server (master, workers) mid-load, restart, rounds of it.

    Every write answered 2xx before the kill reads back byte-identical after the
    restart, and ``memfs fsck`` finds the data directory consistent.
    """
    data = tmp_path / "data"
    threads, per_thread, rounds = 4, 400, 3
    rng = random.Random(20260101)
    acked: dict[str, bytes] = {}
    acked_lock = threading.Lock()
    unexpected: list[str] = []

    def load(server: RealServer, round_no: int, t: int, stop: threading.Event) -> None:
        local = random.Random(round_no * 100 + t)
        deadline = time.monotonic() + 20
        with server.client(timeout=10) as client:
            for n in range(per_thread):
                if stop.is_set() or time.monotonic() > deadline:
                    return
                path = f"/memories/crash/r{round_no}/t{t}/m{n:04d}.md"
                body = _content(local, f"r{round_no} t{t} n{n}")
                try:
                    response = client.put(memory_url(path), content=body, headers=MARKDOWN)
                except httpx.TransportError:
                    return  # the server is gone
                if response.status_code == 201 and response.json()["contentSha256"] == sha(body):
                    with acked_lock:
                        acked[path] = body
                else:
                    unexpected.append(f"{path}: {response.status_code} {response.text[:200]}")
                    return

    server = RealServer(data, workers=2).start()
    try:
        with server.client() as admin:
            create_agent(admin)
        for round_no in range(rounds):
            stop = threading.Event()
            acked_before = len(acked)
            workers = [
                threading.Thread(target=load, args=(server, round_no, t, stop), daemon=True)
                for t in range(threads)
            ]
            for w in workers:
                w.start()
            deadline = time.monotonic() + 20
            while len(acked) < acked_before + 5 and not unexpected:
                assert time.monotonic() < deadline, "the load never got going"
                time.sleep(0.005)
            time.sleep(rng.uniform(0.05, 0.6))  # a random instant of the load
            server.kill_hard()
            stop.set()
            for w in workers:
                w.join(30)
            assert not unexpected, unexpected
            assert len(acked) > acked_before

            server = RealServer(data, workers=2).start()
            with server.client() as client:
                for path, body in sorted(acked.items()):
                    got = client.get(memory_url(path), headers={"Accept": "text/markdown"})
                    assert got.status_code == 200, f"{path}: {got.status_code} {got.text}"
                    assert got.content == body, f"{path} changed"
            fsck_ok(data)
    finally:
        server.close()
    fsck_ok(data)


def fsck_ok(data: Path) -> None:
    """``memfs fsck`` exits 0 (run beside the idle server, as the CLI is meant to be).

    One finding is tolerated, and only alone: a SIGKILL during a working-tree file
    update leaves that update's temp file, which durable.py documents as the one
    possible residue of a crash and ``fsck --repair`` removes (the file under its final
    name is whole either way). Then ``--repair`` must clear it and a second fsck pass.
    """
    done = memfs_cli("fsck", "--json", data=data)
    assert done.stdout.strip(), f"fsck exit {done.returncode}: {done.stderr}"
    report = json.loads(done.stdout)
    assert not report["damaged"], report
    if done.returncode != 0 and all(d.endswith(": stray temp file") for d in report["derived"]):
        repaired = memfs_cli("fsck", "--repair", data=data)
        assert repaired.returncode == 0, repaired.stdout + repaired.stderr
        done = memfs_cli("fsck", "--json", data=data)
        report = json.loads(done.stdout)
    assert done.returncode == 0, f"fsck exit {done.returncode}: {done.stdout} {done.stderr}"
    assert report["ok"] is True and not report["derived"], report


# ---- e. graceful shutdown ------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_lets_requests_in_flight_finish(tmp_path: Path, workers: int) -> None:
    """SIGTERM while PUTs are mid-body: each completes with 201, then the process exits 0."""
    data = tmp_path / "data"
    n = 4
    head, tail = b"# in flight\n", b"the rest of the body, sent after SIGTERM\n" * 100
    sent = [threading.Event() for _ in range(n)]
    release = threading.Event()
    results: list[tuple[int, bytes] | str] = ["not run"] * n
    server = RealServer(data, workers=workers).start()
    try:
        with server.client() as admin:
            create_agent(admin)
        clients = [server.client() for _ in range(n)]
        try:
            for c in clients:  # an established, accepted keep-alive connection each
                assert c.get(agent_url()).status_code == 200

            def slow_body(i: int) -> object:
                yield head
                sent[i].set()
                release.wait(20)
                yield tail

            def put(i: int) -> None:
                try:
                    response = clients[i].put(
                        memory_url(f"/memories/inflight/{i}.md"),
                        content=slow_body(i),  # type: ignore[arg-type]
                        headers={**MARKDOWN, "Content-Length": str(len(head) + len(tail))},
                    )
                    results[i] = (response.status_code, response.content)
                except httpx.HTTPError as exc:
                    results[i] = f"{type(exc).__name__}: {exc}"

            threads = [threading.Thread(target=put, args=(i,), daemon=True) for i in range(n)]
            for t in threads:
                t.start()
            wait_until(lambda: all(e.is_set() for e in sent), 10, "the requests to start")
            time.sleep(0.3)  # the server reads each request's headers: they are in flight
            assert server.proc is not None
            server.proc.send_signal(signal.SIGTERM)
            # Every server process has begun its shutdown (a fixed sleep was too short
            # for a loaded machine: a worker noticed SIGTERM after the bodies arrived).
            wait_until(
                lambda: server.log_text().count("Shutting down") >= workers,
                20,
                "every server process to begin its shutdown",
            )
            release.set()
            for t in threads:
                t.join(30)
            code = server.proc.wait(timeout=30)
        finally:
            for c in clients:
                c.close()
        assert [r if isinstance(r, str) else r[0] for r in results] == [201] * n, results
        assert code == 0, server.log_text()
        # They really were in flight: the server logged its shutdown before answering them.
        lines = server.log_text().splitlines()
        shutdown = next(i for i, line in enumerate(lines) if "Shutting down" in line)
        answered = [i for i, line in enumerate(lines) if "/memories/inflight/" in line]
        assert len(answered) == n and min(answered) > shutdown, server.log_text()
    finally:
        server.close()
    store = Store(data)  # every acknowledged write is there
    try:
        for i in range(n):
            assert store.read(AGENT, f"/memories/inflight/{i}.md").content == head + tail
    finally:
        store.close()
