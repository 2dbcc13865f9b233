"""Opening the index a store runs on, from the ``MEMFS_INDEX`` setting."""

from __future__ import annotations

from pathlib import Path

from memfs.derived.index.factory import open_index


def check_reachable(location: str) -> None:
    """Open the PostgreSQL index at ``location`` and close it again: a wrong URL, a
    database that is down or refuses us, or a schema this memfs does not know fails
    here, before a server or command starts (Unavailable, one line)."""
    opened = open_index(location, Path("unused"))
    opened.close()


def open_for_store(location: str | None) -> None:
    """Check, before a data folder is made, that the index at ``location`` (None:
    SQLite in the data folder) can be opened: raises Unavailable with one line."""
    if location is None:
        return
    check_reachable(location)


__all__ = ["check_reachable", "open_for_store"]
