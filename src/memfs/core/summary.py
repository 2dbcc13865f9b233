"""An agent's memory summary: its counts and the one state machine of its runs.

``state`` is the answer a dashboard shows: ``updating`` while a run runs, ``delayed``
while one waits for a retry, ``waiting`` before the agent's first memory (a rename is
a commit too, but it writes no memory), ``idle`` otherwise.
"""

from __future__ import annotations

from typing import Any

from memfs.core.runs import Runs
from memfs.core.store import Store
from memfs.domain.commits import format_ts
from memfs.domain.shapes import SUMMARY


def summary(store: Store, agent_id: str) -> dict[str, Any]:
    """The summary JSON of ``agent_id`` (NotFound if there is no such agent)."""
    agent = store.get_agent(agent_id)
    # Kept in the agent's index row by every commit: one row read, not a scan.
    count, total = store.agent_stats(agent.agent_id)
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
