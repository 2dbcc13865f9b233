"""The derived index in PostgreSQL, for many memfs servers sharing one database.

The same tables, rows, orders and answers as the SQLite index (``derived/index/``),
behind the same seam (``derived/index/base.py``): ``PostgresIndex`` and its read and
write sessions run ``memfs.testing.IndexContract`` like the SQLite index. See
``writes.py`` for the locks and ``connection.py`` for the visibility clock across nodes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memfs.derived.index.postgres.connection import IndexUnreachable, PostgresIndex, redacted
from memfs.derived.index.postgres.reads import PgRead
from memfs.derived.index.postgres.writes import WRITE_LOCK, PgWrite

__all__ = ["WRITE_LOCK", "IndexUnreachable", "PgRead", "PgWrite", "PostgresIndex", "redacted"]

if TYPE_CHECKING:  # mypy checks the PostgreSQL index and its sessions implement the seam
    from memfs.derived.index import base

    def _implements(idx: PostgresIndex, r: PgRead, w: PgWrite) -> base.Index:
        read: base.ReadSession = r
        write: base.WriteSession = w
        del read, write
        return idx
