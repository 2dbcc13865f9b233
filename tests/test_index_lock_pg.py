"""The PostgreSQL index's locks across processes (servers): a server killed with SIGKILL
while holding one neither wedges the others nor leaves half a transaction behind;
writers of different agents do not queue on each other, and the asOf rule holds while
they race (real processes, real PostgreSQL)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from memfs.derived.index.postgres import PostgresIndex
from memfs.domain.commits import CREATED, Change, Commit

HOLDER = textwrap.dedent(
    """
    import sys, time
    from memfs.derived.index.postgres import PostgresIndex
    idx = PostgresIndex(sys.argv[1], pool_size=1)
    with idx.write_session() as s:
        s.put_agent("ghost", "Ghost", "store-1", 1)
        s.raise_clock(10**15)
        print("holding", flush=True)
        time.sleep(3600)
    """
)


def test_a_server_killed_holding_the_write_lock_leaves_nothing_and_blocks_no_one(
    postgres_url: str,
) -> None:
    # A lock never freed fails the test after a minute (lock_timeout) instead of hanging.
    idx = PostgresIndex(postgres_url + "?options=-clock_timeout%3D60000", pool_size=2)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, postgres_url],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "holding"
        with idx.read_session() as r:  # readers never wait for a writer
            assert r.agent("ghost") is None and r.clock() == 0
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(timeout=60)
        # PostgreSQL ends the dead client's transaction: its lock is free, its writes gone.
        with idx.write_session() as s:
            s.put_agent("alice", "Alice", "store-1", 2)
        with idx.read_session() as r:
            assert r.agent("ghost") is None and r.agent("alice") is not None
            assert r.clock() == 0
    finally:
        if holder.poll() is None:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait(timeout=60)
        assert holder.stdout is not None
        holder.stdout.close()
        idx.close()


# A writer process that commits to agent "b" and holds its transaction open (after its
# commit is applied, before COMMIT) until told to go on: a server mid-commit.
WRITER_B = textwrap.dedent(
    """
    import hashlib, sys, time
    from memfs.derived.index.postgres import PostgresIndex
    from memfs.domain.commits import CREATED, Change, Commit
    idx = PostgresIndex(sys.argv[1], pool_size=1)
    data = b"from b\\n"
    sha = hashlib.sha256(data).hexdigest()
    change = Change("/memories/b.md", CREATED, 1, None, sha, len(data), content=data.decode())
    with idx.write_session() as s:
        row = s.agent("b")  # as a store's commit: the agent's head first (its lock)
        at = max(time.time_ns() // 1000, row.last_ts + 1, s.clock() + 1)
        commit = Commit("b", row.revision + 1, at, "t", "m", (change,))
        s.apply_commit(commit, at, {sha: data}, commit.to_bytes())
        print("stamped", at, flush=True)
        sys.stdin.readline()
    print("committed", flush=True)
    """
)


def _commit_to(idx: PostgresIndex, agent: str, path: str, data: bytes) -> int:
    """One commit of ``agent`` as a store makes it; its given stamp."""
    sha = hashlib.sha256(data).hexdigest()
    with idx.write_session() as s:
        row = s.agent(agent)
        assert row is not None
        at = max(time.time_ns() // 1000, row.last_ts + 1, s.clock() + 1)
        change = Change(path, CREATED, 1, None, sha, len(data), content=data.decode())
        commit = Commit(agent, row.revision + 1, at, "t", "m", (change,))
        assert s.apply_commit(commit, at, {sha: data}, commit.to_bytes())
        return at


def _walk(idx: PostgresIndex, pin: int) -> list[tuple[str, str]]:
    with idx.read_session() as r:
        rows = r.version_rows(("", "", 0), "\U0010ffff", pin, 1000)
    return [(str(row[0]), str(row[1])) for row in rows]


def test_writers_of_different_agents_do_not_queue_and_keep_the_as_of_rule(
    postgres_url: str,
) -> None:
    """Server B is mid-commit on agent b (its transaction open, its rows stamped):
    server A commits to agent a meanwhile, without waiting for B (one lock for all
    writers made A wait; the lock_timeout fails it then). A reader's readTimestamp
    after A's commit passes B's given stamp, yet B's commit, acknowledged after that
    reading, never shows in a walk pinned to it: B's clock step, last before its
    COMMIT, stamps it past the clock."""
    idx = PostgresIndex(postgres_url + "?options=-clock_timeout%3D20000", pool_size=2)
    writer = None
    try:
        with idx.write_session() as s:
            for agent in ("a", "b"):
                s.put_agent(agent, agent.upper(), f"store-{agent}", 1)
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER_B, postgres_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert writer.stdin is not None and writer.stdout is not None
        word, given_b = writer.stdout.readline().split()
        assert word == "stamped"
        stamp_a = _commit_to(idx, "a", "/memories/a.md", b"from a\n")  # B still open
        with idx.read_session() as r:
            pin = r.clock()
        assert pin >= stamp_a > int(given_b)  # B's given stamp is under the pin
        writer.stdin.write("go\n")
        writer.stdin.flush()
        assert writer.stdout.readline().strip() == "committed"  # acknowledged after pin
        assert writer.wait(timeout=60) == 0
        assert _walk(idx, pin) == [("a", "/memories/a.md")]
        with idx.read_session() as r:
            now = r.clock()
            assert r.live_version_at("b", "/memories/b.md", pin) is None
            assert r.live_version_at("b", "/memories/b.md", now) == 1
        assert now > pin
        assert _walk(idx, now) == [("a", "/memories/a.md"), ("b", "/memories/b.md")]
    finally:
        if writer is not None and writer.poll() is None:
            os.killpg(writer.pid, signal.SIGKILL)
            writer.wait(timeout=60)
        for stream in (writer.stdin, writer.stdout) if writer is not None else ():
            if stream is not None:
                stream.close()
        idx.close()


# A store process committing to its own agent as fast as it can: one memory created
# per commit and one memory rewritten (so versions are closed as well as opened).
STORE_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from memfs.core.planner import Put
    from memfs.core.store import Store
    data, url, agent, count = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    store = Store(data, index_location=url)
    for i in range(count):
        ops = [Put(f"/memories/n{i}.md", b"x\\n"), Put("/memories/same.md", f"{i}\\n".encode())]
        store.apply(agent, ops, actor="t")
    store.close()
    print("done", flush=True)
    """
)
COMMITS_EACH = 40


def test_pinned_walks_hold_while_two_processes_commit_to_different_agents(
    postgres_url: str, tmp_path: Path
) -> None:
    """Two real store processes commit to agents a and b at once (no shared lock
    between them), while readers here read the clock, as readTimestamp does, and what
    that same snapshot holds. Every walk pinned to such a reading, made after all the
    commits, shows exactly what the snapshot held: a commit not yet visible when the
    reading was taken (so possibly acknowledged after it) is never stamped at or
    under it, on either agent, for created or rewritten memories."""
    from memfs.core.store import Store

    data = tmp_path / "data"
    store = Store(data, index_location=postgres_url)
    for agent in ("a", "b"):
        store.create_agent(agent)
    idx = store.index
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", STORE_WRITER, str(data), postgres_url, agent, str(COMMITS_EACH)],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        for agent in ("a", "b")
    ]
    seen: list[tuple[int, set[tuple[str, str, int]], dict[str, int | None]]] = []
    try:
        while any(w.poll() is None for w in writers):
            with idx.read_session() as r:  # one snapshot: the reading and what it holds
                pin = r.clock()
                rows = r.version_rows(("", "", 0), "\U0010ffff", 1 << 62, 10_000)
                same = {a: r.live_version_at(a, "/memories/same.md", 1 << 62) for a in "ab"}
            seen.append((pin, {(str(x[0]), str(x[1]), int(x[2])) for x in rows}, same))
        for w in writers:
            assert w.stdout is not None
            assert w.stdout.read().strip() == "done" and w.wait(timeout=60) == 0
        with idx.read_session() as r:
            assert r.agent("a").revision == r.agent("b").revision == COMMITS_EACH  # type: ignore[union-attr]
        assert len(seen) > 3, "the readers read while the writers wrote"
        for pin, held, same in seen:
            with idx.read_session() as r:
                rows = r.version_rows(("", "", 0), "\U0010ffff", pin, 10_000)
                walked = {(str(x[0]), str(x[1]), int(x[2])) for x in rows}
                live = {a: r.live_version_at(a, "/memories/same.md", pin) for a in "ab"}
            assert walked == held, pin
            assert live == same, pin
    finally:
        for w in writers:
            if w.poll() is None:
                os.killpg(w.pid, signal.SIGKILL)
                w.wait(timeout=60)
            if w.stdout is not None:
                w.stdout.close()
        store.close()
