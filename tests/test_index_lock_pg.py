"""The PostgreSQL index's write lock across processes (servers): a writer in another
process waits for it, and a server killed with SIGKILL while holding it neither wedges
the others nor leaves half a transaction behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from memfs.derived.index.postgres import PostgresIndex

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
