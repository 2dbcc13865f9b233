"""Counting what a test process waits on PostgreSQL for (shared by the round-trip tests),
and the index with two agents those tests start from."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from memfs.derived.index.postgres import PostgresIndex


def index_with_agents(url: str, pool_size: int) -> Iterator[PostgresIndex]:
    """A PostgreSQL index on ``url`` holding agents "a" and "b", closed after use (the
    body of the round-trip tests' ``idx`` fixtures)."""
    index = PostgresIndex(url, pool_size=pool_size)
    with index.write_session() as s:
        for agent in ("a", "b"):
            s.put_agent(agent, agent.upper(), f"store-{agent}", 1)
    try:
        yield index
    finally:
        index.close()


def count_round_trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The list each round trip is appended to from now on: a statement sent alone (its
    text), or a pipeline (``"pipeline"``: one round trip however many statements it holds)."""
    waited: list[str] = []
    execute = psycopg.Cursor.execute
    pipeline = psycopg.Connection.pipeline

    def counting(self: psycopg.Cursor[Any], query: Any, *args: Any, **kw: Any) -> Any:
        if self.connection._pipeline is None:
            waited.append(str(query))
        return execute(self, query, *args, **kw)

    def piped(self: psycopg.Connection[Any]) -> Any:
        if self._pipeline is None:
            waited.append("pipeline")
        return pipeline(self)

    monkeypatch.setattr(psycopg.Cursor, "execute", counting)
    monkeypatch.setattr(psycopg.Connection, "pipeline", piped)
    return waited


def count_statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The list each statement sent is appended to from now on (its first word: BEGIN,
    SELECT, WITH, …), in a pipeline or not: a batch's rows are one WITH statement,
    however many commits it holds."""
    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def counting(self: psycopg.Cursor[Any], query: Any, *args: Any, **kw: Any) -> Any:
        sent.append(str(query).split(" ", 1)[0])
        return execute(self, query, *args, **kw)

    monkeypatch.setattr(psycopg.Cursor, "execute", counting)
    return sent
