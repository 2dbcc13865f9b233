"""Delivery records made durable in batches: one durability point for the concurrent
new deliveries of a process.

A record (``deliveries/<trigger>/<sha256(webhook-id)>.json``) is the dedupe point of
its webhook id and the run's first event (``core/runs.py``), so a 202 must wait until
it is durable. Made one by one, that is a temp-file fsync and a folder fsync per
delivery. Here the deliveries waiting at the same moment are made together
(``GroupCommit``, the ``Store.deliveries`` queue): the leader writes ONE file holding
every waiting record of a trigger's folder, fsyncs it once, hard-links it under each
record's name (``os.link`` is create-if-absent, so each webhook id is still decided
alone, against other threads, workers and servers on the folder alike) and fsyncs the
folder once (``LocalBackend.put_shared_if_absent``). Only then is any of them told it
was stored; the same leader first hands the records it made to their ``then`` (the
runs' index transaction, ``core/runs.py``), so a new delivery waits in one queue.

The file a batch's names share is::

    {"deliveries": {"<sha256(webhook-id)>": <record>, ...}}

and the record of a key is picked out by its name (``record_of``). A name whose link
lost to a record made first elsewhere points at that one; the loser's copy in its own
batch file is never reachable by its name. A record alone (no concurrent delivery, a
record over the batch size, or a backend without shared creates, such as S3) is
written as before: the record's own JSON. The bytes of a batch file go when its last
name does (collection deletes names one by one; erasure removes the agent's folder).
"""

from __future__ import annotations

import functools
import json
import typing
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memfs.canonical.backend import Backend, SharedCreate
from memfs.core import fault_points
from memfs.core.store import Store

# A batch is bounded so that reading one record (which reads its whole batch file)
# stays cheap: a record larger than this goes alone.
MAX_BATCH_BYTES = 256 * 1024
MAX_BATCH = 64
_BATCH = "deliveries"


def record_of(key: str, data: bytes) -> dict[str, Any]:
    """The record stored under ``key`` (its own file, or its entry of a batch file)."""
    doc = json.loads(data)
    if not isinstance(doc, dict):
        raise ValueError(f"{key}: not a delivery record")
    batch = doc.get(_BATCH)
    if isinstance(batch, dict) and "runId" not in doc:
        record = batch.get(key.rpartition("/")[2].removesuffix(".json"))
        if not isinstance(record, dict):
            raise ValueError(f"{key}: its batch file holds no record of it")
        return record
    return doc


# What the leader does with the records a flush made, once they are durable and before
# any caller is answered: index their runs, all in one transaction (``core/runs.py``).
# Called with the ``tag`` each caller passed; it must not raise (it notes errors in them).
Then = Callable[[Store, list[Any]], None]


@dataclass
class _Pending:
    key: str
    record: dict[str, Any]
    data: bytes  # the record alone, as its own file
    then: Then | None = None
    tag: Any = None
    created: bool = False
    error: BaseException | None = None
    done: bool = field(default=False)


def put_record(
    store: Store, key: str, record: dict[str, Any], *, then: Then | None = None, tag: Any = None
) -> tuple[bool, bool]:
    """Create the record ``key`` unless it exists, durable when this returns: (True if
    this call stored it, True if ``then`` was called with ``tag`` after that). Batched
    with the concurrent calls of this process; ``then`` runs once per batch in the
    leader, so a new delivery's run is indexed without a second queue."""
    data = json.dumps(record).encode()
    backend = store.backend
    # Not isinstance(backend, SharedCreate): a runtime protocol check costs tens of µs.
    if getattr(backend, "put_shared_if_absent", None) is None:
        return backend.put_if_absent(key, data), False
    item = _Pending(key, record, data, then, tag)
    store.deliveries.submit(item, functools.partial(_flush, store, backend))
    if item.error is not None:
        raise item.error
    return item.created, item.created and then is not None


def _flush(store: Store, backend: Backend, batch: list[_Pending]) -> None:
    """Make ``batch`` durable: per folder, in chunks of at most MAX_BATCH_BYTES; then
    hand the records it made to their ``then``."""
    try:
        folders: dict[str, list[_Pending]] = defaultdict(list)
        first: dict[str, _Pending] = {}
        for item in batch:
            if item.key in first:
                continue  # the same webhook id twice at once: the first one decides
            first[item.key] = item
            folders[item.key.rpartition("/")[0]].append(item)
        for items in folders.values():
            for chunk in _chunks(items):
                try:
                    _write(backend, chunk)
                except Exception as exc:
                    for item in chunk:
                        item.error = exc
        for item in batch:
            if first[item.key] is not item:
                item.error = first[item.key].error  # it reads the first one's record
            if item.created:
                # Test-only (MEMFS_TEST_FAULT): park the batch here, durable, unanswered.
                fault_points.reached(fault_points.DELIVERY_DURABLE)
        made: dict[Then, list[Any]] = defaultdict(list)
        for item in batch:
            if item.created and item.then is not None:
                made[item.then].append(item.tag)
        for then, tags in made.items():
            then(store, tags)
    except BaseException as exc:
        for item in batch:
            if not item.created and item.error is None:
                item.error = exc
        raise
    finally:
        for item in batch:
            item.done = True


def _chunks(items: list[_Pending]) -> list[list[_Pending]]:
    chunks: list[list[_Pending]] = []
    size = MAX_BATCH_BYTES + 1
    for item in items:
        if size + len(item.data) > MAX_BATCH_BYTES or len(chunks[-1]) >= MAX_BATCH:
            chunks.append([])
            size = 0
        chunks[-1].append(item)
        size += len(item.data)
    return chunks


def _write(backend: Backend, chunk: list[_Pending]) -> None:
    if len(chunk) == 1:
        chunk[0].created = backend.put_if_absent(chunk[0].key, chunk[0].data)
        return
    shared = typing.cast(SharedCreate, backend)  # put_record checked it has the method
    # The batch's JSON from each record's own (a name is a sha256 in hex: nothing to
    # escape), not the records encoded a second time: the bytes json.dumps would make.
    entries = b", ".join(
        b'"%s": %s' % (item.key.rpartition("/")[2].removesuffix(".json").encode(), item.data)
        for item in chunk
    )
    data = b'{"%s": {%s}}' % (_BATCH.encode(), entries)
    made = shared.put_shared_if_absent([item.key for item in chunk], data)
    for item, created in zip(chunk, made, strict=True):
        item.created = created
