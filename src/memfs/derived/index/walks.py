"""The inspect walkers' queries: stored versions and log steps, pinned at a clock value.

Each call is one bounded, index-sought batch; the paging and merging is core.inspect's.
A target is an agent id plus, for a scope, its sub-agents (ids between scope + "/" and
scope + "0", since no id holds a character between "/" and "0" at that place).
"""

from __future__ import annotations

from typing import Any

from memfs.derived.index.rows import Connection

Row = tuple[Any, ...]


def version_rows(
    conn: Connection, seek: tuple[str, str, int], high: str, pin: int, limit: int
) -> list[Row]:
    """Stored (non-tombstone) versions visible at ``pin`` after ``seek`` = (agent, path,
    version) with agent < ``high``, by (agent, path, version): one primary-key range.

    Columns: agent_id, path, version, sha256, bytes, description, valid_from, valid_to,
    visible_to, revision, visible_from.
    """
    rows: list[Row] = conn.execute(
        "SELECT agent_id, path, version, sha256, bytes, description, valid_from,"
        " valid_to, visible_to, revision, visible_from FROM versions"
        " WHERE (agent_id, path, version) > (?, ?, ?) AND agent_id < ?"
        " AND sha256 IS NOT NULL AND visible_from<=?"
        " ORDER BY agent_id, path, version LIMIT ?",
        (*seek, high, pin, limit),
    ).fetchall()
    return rows


def live_version_at(conn: Connection, agent_id: str, path: str, pin: int) -> int | None:
    """The version of ``path`` that was live at ``pin`` (None: none was)."""
    row = conn.execute(
        "SELECT version FROM versions WHERE agent_id=? AND path=? AND visible_from<=?"
        " AND sha256 IS NOT NULL AND (visible_to IS NULL OR visible_to>?)",
        (agent_id, path, pin, pin),
    ).fetchone()
    return int(row[0]) if row else None


# The version of a link's target live at the pin (as ``live_version_at``), per row.
LIVE_TARGET = (
    "(SELECT t.version FROM versions t WHERE t.agent_id=l.agent_id AND t.path=l.target"
    " AND t.visible_from<=? AND t.sha256 IS NOT NULL AND (t.visible_to IS NULL"
    " OR t.visible_to>?) ORDER BY t.version LIMIT 1)"
)


def link_rows(
    conn: Connection, seek: tuple[str, str, int, int], high: str, pin: int, limit: int
) -> list[Row]:
    """Links of stored versions visible at ``pin`` after ``seek`` = (agent, path,
    version, idx) with agent < ``high``, in that order: one primary-key range of the
    links table (``links.py``), each row with its target's version live at ``pin``.

    Columns: agent_id, path, version, idx, target, live target version (or None).
    """
    rows: list[Row] = conn.execute(LINK_ROWS, (pin, pin, *seek, high, pin, limit)).fetchall()
    return rows


LINK_ROWS = (
    f"SELECT l.agent_id, l.path, l.version, l.idx, l.target, {LIVE_TARGET} FROM links l"
    " WHERE (l.agent_id, l.path, l.version, l.idx) > (?, ?, ?, ?) AND l.agent_id < ?"
    " AND l.visible_from<=? ORDER BY l.agent_id, l.path, l.version, l.idx LIMIT ?"
)


# ``{changes}``: every change, or only the first ones (``heads``: the row's head_changes).
COMMIT_STEPS = (
    "SELECT visible_at, agent_id, 0, '', revision, ts, actor, message, {changes}, '', 0,"
    " change_count FROM commits"
)
RUN_STEPS = (
    "SELECT visible_at, agent_id, 1, run_id, seq, at, '', '', detail, type, attempt, 0"
    " FROM run_steps"
)


def step_rows(
    conn: Connection,
    kind: str,
    ident: str,
    seek: tuple[Any, ...],
    pin: int,
    limit: int,
    *,
    commits: bool,
    heads: bool = False,
) -> list[Row]:
    """Commit rows (or run-step rows) visible at ``pin`` after ``seek``, in visible order.

    For an agent target ``seek`` = (visible_at, *rest) bound to ``ident``; for a scope,
    (visible_at, agent_id, *rest). ``rest`` is (revision,) for commits, (run_id, seq)
    for run steps. Columns: visible_at, agent_id, kind (0 commit, 1 run step), run_id,
    revision or seq, time, actor, message, changes or detail, step type, attempt, and
    the commit's change count (0 for a run step). ``heads``: a commit's changes are its
    first ``LOG_HEAD`` only (the console's log), read without its other changes.
    """
    select, rest = (commit_steps(heads), "revision") if commits else (RUN_STEPS, "run_id, seq")
    if kind == "agent":
        rows: list[Row] = conn.execute(
            f"{select} WHERE agent_id=? AND (visible_at, {rest}) > ({_marks(len(seek))})"
            f" AND visible_at<=? ORDER BY visible_at, {rest} LIMIT ?",
            (ident, *seek, pin, limit),
        ).fetchall()
        return rows
    rows = conn.execute(
        f"{select} WHERE (visible_at, agent_id, {rest}) > ({_marks(len(seek))})"
        " AND visible_at<=? AND (agent_id=? OR (agent_id>? AND agent_id<?))"
        f" ORDER BY visible_at, agent_id, {rest} LIMIT ?",
        (*seek, pin, ident, ident + "/", ident + "0", limit),
    ).fetchall()
    return rows


def commit_steps(heads: bool) -> str:
    return COMMIT_STEPS.format(changes="head_changes" if heads else "changes")


def _marks(n: int) -> str:
    return ", ".join("?" * n)
