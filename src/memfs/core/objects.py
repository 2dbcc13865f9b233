"""Where canonical objects live, from the settings: the data folder or an S3 bucket.

The one place a Backend is chosen (``open_backend``), and the start-up check an S3
bucket must pass before anything is served (``check_bucket``): reachable, our
credentials accepted, and conditional writes honoured. A store that silently
overwrote on ``If-None-Match: *`` would let two servers both win one revision.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from memfs.canonical.backend import Backend
from memfs.canonical.s3 import S3Backend
from memfs.config import Objects
from memfs.errors import InvalidRequest, StorageError, Unavailable

if TYPE_CHECKING:
    from memfs.core.store import Store

PROBE_FOLDER = "memfs-probe"


def open_backend(objects: Objects, *, pool_size: int = 64) -> Backend | None:
    """The S3 backend the settings name, None for the local data folder."""
    if objects.bucket is None:
        return None
    return S3Backend(
        objects.bucket,
        objects.prefix,
        endpoint=objects.endpoint,
        region=objects.region,
        pool_size=pool_size,
    )


def check_bucket(backend: Backend, objects: Objects) -> None:
    """Refuse to start on a bucket that can't hold memfs: one clear message.

    Raises Unavailable (unreachable, refused credentials, no such bucket) or
    InvalidRequest (conditional writes not honoured).
    """
    key = f"{PROBE_FOLDER}/{uuid.uuid4().hex}"
    where = objects.url + (f" at {objects.endpoint}" if objects.endpoint else "")
    try:
        first = backend.put_if_absent(key, b"probe\n")
        second = backend.put_if_absent(key, b"again\n")
        backend.delete(key)
    except StorageError as exc:
        reason = exc.message.split("; nothing was committed")[0]
        raise Unavailable(f"can't use object storage {where}: {reason}") from None
    if not first:
        raise Unavailable(f"can't use object storage {where}: a new probe key already existed")
    if second:
        raise InvalidRequest(
            f"object storage {where} does not honour conditional writes (a PUT with"
            " If-None-Match: * overwrote an existing key); memfs needs them to keep"
            " one writer per revision. Use a store that supports them (AWS S3, R2,"
            " MinIO, SeaweedFS)"
        )


def require_local(store: Store, what: str) -> None:
    """Refuse a command that reads or writes the data folder's own objects (backup,
    restore) when objects are on S3: it would copy nothing, silently."""
    if isinstance(store.backend, S3Backend):
        raise InvalidRequest(
            f"{what} works on a local data folder, and objects are on S3 here"
            f" ({store.backend!r}); back the bucket up with the storage's own tools"
            " (versioning, replication), see docs/scale-out.md"
        )
