"""What failures of the machine (not of the request) mean to a client.

A full, read-only or failing disk and an index being rebuilt are passing conditions:
they become ``Unavailable`` (503, retryable) at the edges instead of a 500.
"""

from __future__ import annotations

import errno
import os

from memfs.derived.index import IndexGone
from memfs.derived.index.faults import ENGINE_ERRORS, engine_storage_errno
from memfs.errors import MemfsError, StorageError, Unavailable

# What a machine failure may be raised as: an edge catches these and asks translate().
MACHINE_ERRORS: tuple[type[BaseException], ...] = (IndexGone, OSError, *ENGINE_ERRORS)
STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO}


def storage_errno(exc: BaseException) -> int | None:
    """The errno of a storage failure (full, quota, read-only, I/O), None otherwise."""
    if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
        return exc.errno
    return engine_storage_errno(exc)


def translate(exc: BaseException) -> MemfsError | None:
    """The MemfsError a machine failure stands for, None if it is a plain bug."""
    if isinstance(exc, IndexGone):
        return Unavailable(
            "the index is being rebuilt from the log (its file was deleted or replaced);"
            " retry in a few seconds"
        )
    number = storage_errno(exc)
    if number is not None:
        return StorageError(
            f"storage error: {os.strerror(number)} ({errno.errorcode[number]}); nothing was"
            " committed by this request. Free space or fix the disk, then retry"
        )
    return None


def index_gone(exc: BaseException) -> bool:
    """True if the index file was deleted or replaced: the caller starts its rebuild."""
    return isinstance(exc, IndexGone)
