"""An agent's memory summary: its counts and the one state machine of its runs.

``state`` is the answer a dashboard shows: ``updating`` while a run runs, ``delayed``
while one waits for a retry, ``waiting`` before the agent's first memory (a rename is
a commit too, but it writes no memory), ``idle`` otherwise.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from memfs.core.runs import Runs
from memfs.core.store import Store
from memfs.domain.commits import format_ts
from memfs.domain.shapes import SUMMARY


def summary(store: Store, agent_id: str) -> dict[str, Any]:
    """The summary JSON of ``agent_id`` (NotFound if there is no such agent)."""
    agent = store.get_agent(agent_id)
    count, total = _stats(store, agent.agent_id, agent.memory_store_id, agent.revision)
    runs = Runs(store).counts(agent_id)
    by_status = runs["by_status"]
    pending = sum(by_status.get(s, 0) for s in ("queued", "running", "delayed"))
    if by_status.get("running"):
        state = "updating"
    elif by_status.get("delayed"):
        state = "delayed"
    elif not by_status and (agent.revision == 0 or not store.ever_written(agent_id)):
        state = "waiting"
    else:
        state = "idle"
    return SUMMARY.build(
        agent.agent_id,
        agent.name,
        agent.memory_store_id,
        count,
        total,
        agent.revision,
        state,
        pending,
        by_status.get("failed", 0),
        format_ts(agent.last_ts) if agent.revision else None,
        _ts(runs["last_finished"]),
        _ts(runs["next_retry"]),
    )


def _ts(value: int | None) -> str | None:
    return format_ts(value) if value is not None else None


# The count and bytes of an agent's memories are a scan of its memories in the index
# (≈ 1.3 us per memory: 130 ms at 100k), and they change only with a commit, which
# always raises the revision. So they are kept per (agent, store id, revision): a
# console page or GET …/memory read again before the next commit costs nothing. The
# store id tells an agent erased and made again from the old one; each process keeps
# its own, and another process's commit is a new revision, so nothing stale is shown.
_STATS: weakref.WeakKeyDictionary[Store, dict[str, tuple[str, int, int, int]]] = (
    weakref.WeakKeyDictionary()
)
_STATS_LOCK = threading.Lock()
_STATS_AGENTS = 1024  # agents remembered per store; the oldest entry goes first


def _stats(store: Store, agent_id: str, store_id: str, revision: int) -> tuple[int, int]:
    with _STATS_LOCK:
        known = _STATS.setdefault(store, {}).get(agent_id)
    if known is not None and known[0] == store_id and known[1] == revision:
        return known[2], known[3]
    count, total = store.agent_stats(agent_id)
    if store.get_agent(agent_id).revision != revision:
        return count, total  # a commit landed in between: remember nothing
    with _STATS_LOCK:
        cache = _STATS.setdefault(store, {})
        cache.pop(agent_id, None)
        cache[agent_id] = (store_id, revision, count, total)
        while len(cache) > _STATS_AGENTS:
            cache.pop(next(iter(cache)))
    return count, total
