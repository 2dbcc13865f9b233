"""Is this server ready to answer from its index? And the shared-state figures of /metrics.

``readiness`` is the one check behind ``GET /readyz``: the index opens, its schema is
the one this memfs writes, and no agent has log entries the index has not applied.
Kept cheap: one indexed read plus one ``exists`` per agent; only agents that look
behind are looked at again under the index's write lock, where no commit is half
done (a commit publishes its entry just before its index transaction commits).
"""

from __future__ import annotations

from memfs.canonical import layout
from memfs.core.store import Store
from memfs.derived import index
from memfs.derived.index.faults import ENGINE_ERRORS

# What opening the index may raise when it can't be opened (not a bug).
_OPEN_ERRORS: tuple[type[BaseException], ...] = (*ENGINE_ERRORS, OSError, RuntimeError)
# Entries counted past an agent's indexed head: enough to tell "behind" from "far behind".
_LAG_CAP = 10_000


def readiness(store: Store) -> str | None:
    """None when the index is open, current and caught up; else why it is not."""
    try:
        with store.index.read_session() as ix:
            found = ix.schema()
    except _OPEN_ERRORS as exc:
        return f"the index can't be opened ({type(exc).__name__})"
    if found != index.SCHEMA_VERSION:
        return "the index schema is not current; it is being rebuilt"
    lag = index_lag(store)
    if lag:
        return f"the index is catching up with the log ({lag} entries behind)"
    return None


def index_lag(store: Store) -> int:
    """Log entries written but not applied to the index, summed over agents."""
    with store.index.read_session() as ix:
        heads = ix.agent_heads()
    behind = [(a, r) for a, r in heads if _entries_past(store, a, r, cap=1)]
    if not behind:
        return 0
    with store.index.write_session() as ix:
        total = 0
        for agent_id, _ in behind:
            current = ix.agent(agent_id)
            if current is not None:
                total += _entries_past(store, agent_id, current.revision, cap=_LAG_CAP)
        return total


def _entries_past(store: Store, agent_id: str, revision: int, *, cap: int) -> int:
    count = 0
    while count < cap and store.backend.exists(layout.log_key(agent_id, revision + count + 1)):
        count += 1
    return count


def runs_by_state(store: Store) -> dict[str, int]:
    with store.index.read_session() as ix:
        return ix.runs_by_status()
