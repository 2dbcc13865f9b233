"""What the SQLite engine raises when the machine fails, for the core's fault mapping.

The core never imports sqlite3: it asks these what an engine error means.
"""

from __future__ import annotations

import errno
import sqlite3

# The errors the engine raises for a failing machine (or a replaced file), not a bug.
ENGINE_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error,)
# SQLite's primary result codes for storage conditions: FULL, IOERR, READONLY.
_SQLITE_STORAGE = {13: errno.ENOSPC, 10: errno.EIO, 8: errno.EROFS}


def engine_storage_errno(exc: BaseException) -> int | None:
    """The errno a storage failure reported by the engine stands for, None otherwise."""
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if isinstance(code, int):
            return _SQLITE_STORAGE.get(code & 0xFF)
    return None
