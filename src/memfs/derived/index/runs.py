"""The runs and run_steps tables: each run's folded state and its events, derived from
the run's event files (``core.runs`` folds them; this only stores and queries)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

RUN_COLUMNS = (
    "agent_id, run_id, trigger_id, webhook_id, status, attempt, max_attempts, next_retry_at,"
    " created_at, started_at, finished_at, exit_code, output, error, events, delivery_key"
)
# The columns of a run row, in order: ``core.runs.Run`` has these fields in this order.
RUN_FIELDS = tuple(c.strip() for c in RUN_COLUMNS.split(","))
_INSERT_RUN = (
    f"INSERT OR REPLACE INTO runs({RUN_COLUMNS}) VALUES({','.join('?' * len(RUN_FIELDS))})"
)

RunRow = tuple[Any, ...]


def put_run(conn: sqlite3.Connection, values: Sequence[Any]) -> None:
    """Store a run's state (``values`` in RUN_FIELDS order), replacing the previous one."""
    conn.execute(_INSERT_RUN, list(values))


def add_run_step(
    conn: sqlite3.Connection,
    agent_id: str,
    run_id: str,
    seq: int,
    at: int,
    visible_at: int,
    kind: str,
    attempt: int,
    detail: str,
) -> None:
    """Record event ``seq`` of a run (kept once: a replay changes nothing)."""
    conn.execute(
        "INSERT OR IGNORE INTO run_steps VALUES(?,?,?,?,?,?,?,?)",
        (agent_id, run_id, seq, at, visible_at, kind, attempt, detail),
    )


def run_row(conn: sqlite3.Connection, agent_id: str, run_id: str) -> RunRow | None:
    row: RunRow | None = conn.execute(
        f"SELECT {RUN_COLUMNS} FROM runs WHERE agent_id=? AND run_id=?",
        (agent_id, run_id),
    ).fetchone()
    return row


def due_run_rows(conn: sqlite3.Connection, now: int, limit: int) -> list[RunRow]:
    """Up to ``limit`` of each: queued, running, and delayed runs whose retry time has
    come, each read in creation order from an index (one query per status: one query
    with the three ORed sorted every pending run on each poll, 5-8 ms with 5,000)."""
    wanted: tuple[tuple[str, tuple[int, ...]], ...] = (
        ("status='queued'", ()),
        ("status='running'", ()),
        ("status='delayed' AND next_retry_at<=?", (now,)),
    )
    rows: list[RunRow] = []
    for where, params in wanted:
        rows += conn.execute(
            f"SELECT {RUN_COLUMNS} FROM runs WHERE {where} ORDER BY created_at LIMIT ?",
            (*params, limit),
        ).fetchall()
    return rows


def run_rows(
    conn: sqlite3.Connection,
    agent_id: str,
    *,
    trigger_id: str | None,
    status: str | None,
    after: tuple[int, str] | None,
    limit: int,
) -> list[RunRow]:
    """An agent's runs in (created_at, run_id) order, after the keyset ``after``."""
    where = "agent_id=?"
    params: list[object] = [agent_id]
    if trigger_id is not None:
        where += " AND trigger_id=?"
        params.append(trigger_id)
    if status is not None:
        where += " AND status=?"
        params.append(status)
    if after is not None:
        where += " AND (created_at, run_id) > (?, ?)"
        params += list(after)
    rows: list[RunRow] = conn.execute(
        f"SELECT {RUN_COLUMNS} FROM runs WHERE {where} ORDER BY created_at, run_id LIMIT ?",
        (*params, limit),
    ).fetchall()
    return rows


def run_counts(conn: sqlite3.Connection, agent_id: str) -> dict[str, Any]:
    """An agent's runs by status, its last finish and its next retry time."""
    rows = dict(
        conn.execute(
            "SELECT status, COUNT(*) FROM runs WHERE agent_id=? GROUP BY status",
            (agent_id,),
        ).fetchall()
    )
    last = conn.execute(
        "SELECT MAX(finished_at) FROM runs WHERE agent_id=?", (agent_id,)
    ).fetchone()[0]
    retry = conn.execute(
        "SELECT MIN(next_retry_at) FROM runs WHERE agent_id=? AND status='delayed'",
        (agent_id,),
    ).fetchone()[0]
    return {"by_status": rows, "last_finished": last, "next_retry": retry}


def finished_deliveries(conn: sqlite3.Connection, before: int) -> list[tuple[str, str, str]]:
    """(agent id, run id, delivery key) of finished runs created before ``before`` whose
    delivery record is still kept."""
    rows: list[tuple[str, str, str]] = conn.execute(
        "SELECT agent_id, run_id, delivery_key FROM runs WHERE delivery_key IS NOT NULL"
        " AND status IN ('succeeded', 'failed') AND created_at < ?",
        (before,),
    ).fetchall()
    return rows


def forget_delivery(conn: sqlite3.Connection, agent_id: str, run_id: str) -> None:
    conn.execute(
        "UPDATE runs SET delivery_key=NULL WHERE agent_id=? AND run_id=?",
        (agent_id, run_id),
    )
