"""The Index contract (memfs.testing.index_contract) run for the PostgreSQL index, on a
real PostgreSQL server (tests/engine_postgres.py) whose databases use a linguistic
collation (ICU en-US where the server has ICU), so bytewise order must come from the
index's own ``COLLATE "C"`` columns."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine_postgres import PostgresServer
from memfs.derived.index.base import Index
from memfs.derived.index.postgres import PostgresIndex
from memfs.testing.index_contract import IndexContract


class TestPostgresIndex(IndexContract):
    @pytest.fixture(autouse=True)
    def _server(self, postgres_server: PostgresServer) -> None:
        self.server = postgres_server
        self.databases: dict[Path, str] = {}

    def open_index(self, path: Path) -> Index:
        # One database per test's index "file": reopening the same path reaches it again.
        if path not in self.databases:
            self.databases[path] = self.server.new_database()
        return PostgresIndex(self.databases[path], pool_size=4)
