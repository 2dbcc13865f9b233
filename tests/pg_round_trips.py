"""Counting what a test process waits on PostgreSQL for (shared by the round-trip tests)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest


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
