"""Which index a store opens: SQLite in the data folder, or PostgreSQL at a URL."""

from __future__ import annotations

from pathlib import Path

from memfs.derived.index import base
from memfs.errors import InvalidRequest

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def open_index(location: str | None, file: Path) -> base.WatchedIndex:
    """The index at ``location`` (``MEMFS_INDEX``): None for the SQLite ``file``, a
    ``postgresql://`` URL for a PostgreSQL database shared by many servers. Raises
    InvalidRequest for another location and ``Unavailable`` (one line naming the
    database, its password hidden) when PostgreSQL can't be reached or used."""
    if location is None:
        from memfs.derived.index.connection import Index

        return Index(file)
    if location.startswith(POSTGRES_SCHEMES):
        # Imported here: a single-node memfs never loads the PostgreSQL driver.
        from memfs.derived.index.postgres import PostgresIndex

        return PostgresIndex(location)
    raise InvalidRequest("MEMFS_INDEX: expected a postgresql:// URL")
