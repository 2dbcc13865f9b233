"""A reindex is one transaction: killed with SIGKILL midway (an agent's rows cleared and
partly written again), it leaves the old index serving every answer as before, with
nothing to repair, and running it again completes it. Real processes, real SIGKILL."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from memfs.core import maintenance
from memfs.core.store import Delete, Put, Store
from test_maintenance import populate, snapshot, table_rows

ACTOR = "test"
TABLES = ("commits", "versions", "memories", "memory_meta", "blobs", "links", "agents")
WAIT = 120.0  # seconds: the machine may be loaded


def history(store: Store, agent: str) -> None:
    """``populate``'s history and a commit with more changes than the log's head."""
    populate(store, agent)
    many = [Put(f"/memories/many/n{i:02d}-\u00e9.md", f"n{i} [[a]]".encode()) for i in range(25)]
    store.apply(agent, many, actor=ACTOR, message="twenty-five at once")
    store.apply(agent, [Delete(p.path) for p in many[:21]], actor=ACTOR, message="and gone")


# The reindex of the test below, in its own process: its bulk load has cleared the
# first agent's rows and written its commits and versions rows when it says so and
# waits to be killed.
_KILLED_MIDWAY = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from memfs.core import maintenance
    from memfs.core.store import Store
    from memfs.derived.index import bulk

    real = bulk.add_links

    def add_then_wait(conn, rows):
        real(conn, rows)
        Path(sys.argv[2]).write_text("written")
        time.sleep(600)

    bulk.add_links = add_then_wait
    maintenance.reindex(Store(Path(sys.argv[1])))
    """
)


def test_a_reindex_killed_midway_leaves_the_old_index_and_a_rerun_completes(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    store = Store(data)
    agent = store.create_agent("users/alice/assistant").agent_id
    history(store, agent)
    answers = snapshot(store)
    before = {t: table_rows(data, t) for t in TABLES}
    store.close()
    marker, errors = tmp_path / "written", tmp_path / "stderr"
    with errors.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", _KILLED_MIDWAY, str(data), str(marker)], stderr=err
        )
    try:
        deadline = time.monotonic() + WAIT
        while not marker.exists():
            assert proc.poll() is None, errors.read_text()
            assert time.monotonic() < deadline, "the reindex never wrote its first rows"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(WAIT)
    assert proc.returncode == -signal.SIGKILL

    # The old index answers as before (its rows were cleared and partly rewritten in a
    # transaction that never committed), with nothing to repair.
    reopened = Store(data)
    try:
        assert snapshot(reopened) == answers
        assert {t: table_rows(data, t) for t in TABLES} == before
        assert maintenance.fsck(reopened).ok
        rebuilt = maintenance.reindex(reopened)
        assert (rebuilt.agents, rebuilt.damaged) == (3, [])
        assert {t: table_rows(data, t) for t in TABLES} == before
    finally:
        reopened.close()
