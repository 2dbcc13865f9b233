"""Opening the index a store runs on, from the ``MEMFS_INDEX`` setting."""

from __future__ import annotations

from pathlib import Path

from memfs.canonical import layout
from memfs.derived.index import base
from memfs.derived.index.factory import open_index
from memfs.errors import Unavailable


def open_configured(location: str | None, data_dir: Path) -> base.Index:
    """The index at ``location``: SQLite in ``data_dir`` when None, else PostgreSQL.
    An unreachable or unusable database raises Unavailable with one line that says why."""
    return open_index(location, layout.index_path(data_dir))


def check_reachable(location: str) -> None:
    """Open the PostgreSQL index at ``location`` and close it again: a wrong URL, a
    database that is down or refuses us, or a schema this memfs does not know fails
    here, before a server or command starts (Unavailable, one line)."""
    opened = open_index(location, Path("unused"))
    opened.close()


def open_for_store(location: str | None) -> None:
    """Check that the store can run on the index at ``location`` (None: SQLite)."""
    if location is None:
        return
    check_reachable(location)
    # The store's commit, run and maintenance paths still speak to the SQLite index's
    # connection directly; until they run on index sessions a PostgreSQL index is
    # reachable and passes the Index contract, but no store can be opened on it.
    raise Unavailable(
        "MEMFS_INDEX: the PostgreSQL index is reachable, but this memfs runs its store on"
        " the SQLite index only; unset MEMFS_INDEX (and --index)"
    )


__all__ = ["check_reachable", "open_configured", "open_for_store"]
