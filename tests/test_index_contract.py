"""The Index contract (memfs.testing.index_contract) run for the SQLite index."""

from __future__ import annotations

from pathlib import Path

from memfs.derived import index
from memfs.derived.index.base import Index
from memfs.testing.index_contract import IndexContract


class TestSqliteIndex(IndexContract):
    def open_index(self, path: Path) -> Index:
        return index.Index(path)
