"""Reading an agent's log from the backend in order: every entry's bytes read ahead by a
thread, each checked (no gap, names its own place, a known format) and decoded."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

from memfs.canonical import layout
from memfs.canonical.backend import Backend
from memfs.core.store import Store
from memfs.domain.commits import Commit, read_entry
from memfs.errors import CorruptionError, Damaged

Entry = tuple[str, str, dict[str, Any]]  # key, text, JSON document


def corrupt(file: str, message: str) -> CorruptionError:
    """A CorruptionError that says which file holds the damage."""
    exc = CorruptionError(message)
    exc.file = file  # type: ignore[attr-defined]
    return exc


def prefetched(
    get: Callable[[str], bytes], keys: Iterator[str], *, batch: int = 256
) -> Iterator[tuple[str, bytes]]:
    """(key, bytes) of ``keys`` in order, read ahead by a thread: the reads (system
    calls here, round trips on an object store) overlap the caller's work on the
    entries before them. At most two batches are held at a time."""
    chunks: queue.Queue[list[tuple[str, bytes]] | BaseException | None] = queue.Queue(2)
    stop = threading.Event()

    def read() -> None:
        try:
            chunk: list[tuple[str, bytes]] = []
            for key in keys:
                if stop.is_set():
                    return
                chunk.append((key, get(key)))
                if len(chunk) == batch:
                    chunks.put(chunk)
                    chunk = []
            chunks.put(chunk)
            chunks.put(None)
        except BaseException as exc:  # handed to the reader of the entries
            chunks.put(exc)

    reader = threading.Thread(target=read, name="memfs-prefetch", daemon=True)
    reader.start()
    try:
        while True:
            got = chunks.get()
            if got is None:
                return
            if isinstance(got, BaseException):
                raise got
            yield from got
    finally:
        stop.set()
        while reader.is_alive():  # unblock a reader waiting to put, then let it end
            with contextlib.suppress(queue.Empty):
                chunks.get_nowait()
            reader.join(0.01)


def _entry_reader(backend: Backend) -> Callable[[str], bytes]:
    """The backend's ``get`` with a damaged segment frame (``Damaged``) reported as the
    damaged entry it is, the way a one-file entry that fails to parse is."""

    def get(key: str) -> bytes:
        try:
            return backend.get(key)
        except Damaged as exc:
            raise corrupt(exc.file, f"log entry {exc.file} is unreadable: {exc.reason}") from None

    return get


def raw_log(store: Store, agent_id: str) -> Iterator[tuple[str, bytes]]:
    """(key, bytes) of every object under an agent's log, in key order, read ahead."""
    backend = store.backend
    return prefetched(_entry_reader(backend), backend.list(layout.log_prefix(agent_id)))


def entry_checker(agent_id: str) -> Callable[[str, bytes], Entry]:
    """A function of the log's (key, bytes) in order, from revision 1, giving each
    entry's (key, text, JSON document); it raises CorruptionError at a gap or at an
    entry that names another place. Pure apart from the revision it expects next."""
    expected = 1

    def check(key: str, data: bytes) -> Entry:
        nonlocal expected
        revision = layout.revision_of(key)
        if revision is None:
            raise corrupt(key, f"unexpected object {key} in the log")
        if revision != expected:
            raise corrupt(
                layout.log_key(agent_id, expected),
                f"log of {agent_id!r} jumps from {expected - 1} to {revision}",
            )
        try:
            text = data.decode()
            doc = read_entry(text, where=key)
        except UnicodeDecodeError as exc:
            raise corrupt(key, f"log entry {key} is unreadable: {exc}") from None
        except CorruptionError as exc:
            raise corrupt(key, exc.message) from None
        if doc.get("revision") != revision or doc.get("agentId") != agent_id:
            raise corrupt(
                key,
                f"log entry {key} names revision {doc.get('revision')} of {doc.get('agentId')!r}",
            )
        expected += 1
        return key, text, doc

    return check


def log_entries(store: Store, agent_id: str) -> Iterator[Entry]:
    """(key, text, JSON document) of every log entry of an agent in order; raises
    CorruptionError at a gap or at an entry that names another place."""
    check = entry_checker(agent_id)
    for key, data in raw_log(store, agent_id):
        yield check(key, data)


def read_log(store: Store, agent_id: str) -> Iterator[Commit]:
    """Every log entry of an agent in order; raises CorruptionError at a gap."""
    for key, _text, doc in log_entries(store, agent_id):
        yield Commit.from_doc(doc, where=key)
