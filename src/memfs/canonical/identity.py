"""Which stored file a key names right now, without reading it.

Canonical objects are immutable: an object's bytes never change under its key, and a
different object can stand there only after the first was deleted (collection,
erasure) and a new one created. A new file is a new inode, with its own change time
(set when it is created, and again when a link to it is made or removed), so a key
whose ``(inode, size, mtime, ctime)`` is what it was still names the object read
then. A reader may keep what it learnt from an object (core/runs.py keeps the run id
of a delivery record) and check it with one ``lstat`` instead of reading and parsing
the object again. A mismatch only means "read it again", never a wrong answer.
"""

from __future__ import annotations

import os
import stat

from memfs.canonical.backend import Backend, LocalBackend, check_key

Identity = tuple[int, int, int, int]


def of(backend: Backend, key: str) -> Identity | None:
    """The identity of the plain file ``key`` on a local backend; None when it is
    missing, not a plain file, or the backend keeps no files (memory, S3), so the
    caller reads the object instead."""
    if not isinstance(backend, LocalBackend):
        return None
    return of_file(f"{backend.root}/{check_key(key)}")


def path_of(backend: Backend, key: str) -> str | None:
    """The file ``key`` names on a local backend (None: a backend without files), for
    a caller that checks the same key often (``of_file``)."""
    if not isinstance(backend, LocalBackend):
        return None
    return f"{backend.root}/{check_key(key)}"


def of_file(path: str) -> Identity | None:
    """``of`` for a key's file (``path_of``)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

