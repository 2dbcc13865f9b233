"""Deliveries and runs: exactly one run per (trigger, webhook-id), driven to an end.

Canonical objects, all create-if-absent under ``agents/<dir>/.memfs/``:
  deliveries/<triggerId>/<sha256(webhook-id)>.json  the dedupe record: first one wins;
                                                    it holds the body and the run id,
                                                    and it is the run's first event
  runs/<runId>.e<n:06>.json                          the run's steps 2, 3, …, in order
                                                    (step 1 only once the record is
                                                    collected, see ``collect``)
  runs/<runId>.c<attempt:04>.json                    who executes attempt k: one winner
  runs/<runId>.g<attempt:04>.json                    the process group attempt k started

(flat in one folder: a new folder per run would cost a directory fsync per level).

A unique delivery therefore writes ONE durable record, and concurrent deliveries of a
process share one durability point for theirs (``core/delivery_records.py``: one
fsync'd file per batch, hard-linked under each record's name). The run's
``created`` event is a function of the record (``run_events.created``), so the record is
read as event 1 for as long as it exists. Before ``collect`` deletes a record it
publishes that event as ``runs/<runId>.e000001.json`` (the same bytes from any
collector, create-if-absent), so the run stays rebuildable from files afterwards; a
crash between the two leaves both, which read alike.

A run's state is the fold of its events (``run_events.fold``, pure, with one
constructor per event); the index keeps that fold in the
``runs`` table and every event in ``run_steps`` (for inspect's log). Appending an
event happens under the index's write lock after catching up with the backend, so
a check-then-append (e.g. "still running? then mark interrupted") is atomic per node.
Concurrent new deliveries of one process are indexed together in one transaction by
the flush that made their records durable (``_index_made``); records found without a
run (a crash, a rescan) go through the registration queue (``Store.registrations``).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from memfs.canonical import identity, layout
from memfs.canonical.backend import MissingObject
from memfs.core import cas
from memfs.core.delivery_records import put_record, record_of
from memfs.core.store import Store
from memfs.derived import index
from memfs.derived.index.base import ReadSession, WriteSession
from memfs.domain import run_events
from memfs.domain.commits import format_ts, now_us
from memfs.domain.shapes import RUN
from memfs.errors import Conflict, InvalidRequest, NotFound

TERMINAL = ("succeeded", "failed")
STATUSES = ("queued", "running", "succeeded", "failed", "delayed")
OUTPUT_CAP = 64 * 1024


@dataclass(frozen=True)
class Run:
    agent_id: str
    run_id: str
    trigger_id: str
    webhook_id: str
    status: str
    attempt: int
    max_attempts: int
    next_retry_at: int | None
    created_at: int
    started_at: int | None
    finished_at: int | None
    exit_code: int | None
    output: str | None
    error: str | None
    events: int
    delivery_key: str | None

    def to_json(self) -> dict[str, Any]:
        def ts(v: int | None) -> str | None:
            return format_ts(v) if v is not None else None

        return RUN.build(
            self.run_id,
            self.agent_id,
            self.trigger_id,
            self.webhook_id,
            self.status,
            self.attempt,
            self.max_attempts,
            ts(self.next_retry_at),
            ts(self.created_at),
            ts(self.started_at),
            ts(self.finished_at),
            self.exit_code,
            self.output,
            self.error,
        )


# The delivery records this process has read, per store: key -> (its run id, the
# identity of the record's file when it was read). A sender's retries are then
# answered with one lstat and the run's row instead of reading and parsing the record
# (a whole batch file for a record made in a batch: core/delivery_records.py). Exact,
# not a time window: a record never changes while it exists, and a new one under the
# same key (after collection or erasure, by any process) is a new file, so a
# different identity; the run's row must also still name the key (collection forgets
# it, erasure removes the row). Bounded: emptied when full, refilled by the ids still
# being retried. With them, the run as its row last read (``known_now``).
KNOWN_MAX = 4096
_Known = tuple[str, identity.Identity, Run]
_KNOWN: weakref.WeakKeyDictionary[Store, dict[str, _Known]] = weakref.WeakKeyDictionary()


def _known_ids(store: Store) -> dict[str, _Known]:
    known = _KNOWN.get(store)
    if known is None:
        known = _KNOWN.setdefault(store, {})
    return known


def _prefix(agent_id: str) -> str:
    return layout.agent_prefix(agent_id)


def delivery_key(agent_id: str, trigger_id: str, webhook_id: str) -> str:
    digest = hashlib.sha256(webhook_id.encode()).hexdigest()
    return f"{_prefix(agent_id)}deliveries/{trigger_id}/{digest}.json"


def event_key(agent_id: str, run_id: str, seq: int) -> str:
    return f"{_prefix(agent_id)}runs/{run_id}.e{seq:06d}.json"


def claim_key(agent_id: str, run_id: str, attempt: int) -> str:
    return f"{_prefix(agent_id)}runs/{run_id}.c{attempt:04d}.json"


def group_key(agent_id: str, run_id: str, attempt: int) -> str:
    """The process group (and scratch folder) of a started command attempt, so the
    worker that finds the attempt's owner dead can kill what it left running."""
    return f"{_prefix(agent_id)}runs/{run_id}.g{attempt:04d}.json"


def _event_bytes(event: dict[str, Any]) -> bytes:
    return json.dumps(event, ensure_ascii=False, sort_keys=True).encode()


_NAMES = index.RUN_FIELDS

# What ``append`` is given: the event to append to a run as it stands (None: nothing).
Make = Callable[["Run | None"], "dict[str, Any] | None"]


def _apply(
    ix: WriteSession,
    agent_id: str,
    run_id: str,
    seq: int,
    event: dict[str, Any],
    row: Run | None,
    *,
    visible_at: int | None = None,
) -> Run:
    """Index event ``seq`` of a run whose indexed state (in this transaction) is ``row``.

    ``visible_at``: the time a batch of new runs becomes visible, read from the clock
    once for the whole transaction, which the caller raises the clock to once."""
    if row is not None and row.events >= seq:
        return row  # applied already
    own_clock = visible_at is None
    if visible_at is None:
        visible_at = max(now_us(), ix.clock() + 1)
    current: dict[str, Any] = (
        {k: getattr(row, k) for k in _NAMES}
        if row
        else {"agent_id": agent_id, "run_id": run_id, "events": 0}
    )
    new = run_events.fold(current, event)
    values: list[Any] = [new.get(c) for c in _NAMES]
    ix.put_run(values)
    detail = {k: v for k, v in event.items() if k not in ("type", "at")}
    ix.add_run_step(
        agent_id,
        run_id,
        seq,
        int(event["at"]),
        visible_at,
        event["type"],
        int(event.get("attempt", new.get("attempt", 0))),
        json.dumps(detail, ensure_ascii=False),
    )
    if own_clock:
        ix.raise_clock(visible_at)
    return Run(*values)


def get_row(ix: ReadSession, agent_id: str, run_id: str) -> Run | None:
    row = ix.run_row(agent_id, run_id)
    return Run(*row) if row else None


# One ``append`` of ``append_many``: (agent id, run id, make).
Append = tuple[str, str, Make]


@dataclass
class _Registration:
    agent_id: str
    key: str
    record: dict[str, Any]
    run: Run | None = None
    error: BaseException | None = None
    done: bool = field(default=False)
    new: bool = False  # the record was made by this process's flush just now


class Runs:
    """Deliveries, run events and claims of every agent in a store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.backend = store.backend

    # ---- events ------------------------------------------------------------------

    def _follow(
        self, ix: WriteSession, agent_id: str, run_id: str, row: Run | None
    ) -> Run | None:
        """Apply the run's event files after ``row`` (its indexed state) to the index."""
        seq = row.events if row else 0
        while True:
            try:
                data = self.backend.get(event_key(agent_id, run_id, seq + 1))
            except MissingObject:
                return row
            row = _apply(ix, agent_id, run_id, seq + 1, json.loads(data), row)
            seq += 1

    def _catch_up(self, ix: WriteSession, agent_id: str, run_id: str) -> Run | None:
        return self._follow(ix, agent_id, run_id, get_row(ix, agent_id, run_id))

    def append(
        self,
        agent_id: str,
        run_id: str,
        make: Callable[[Run | None], dict[str, Any] | None],
    ) -> Run | None:
        """Append the event ``make(current run)`` returns (None: nothing to append).

        Optimistic, like a commit: ``make`` sees the run after its n events, and the
        event is published as event n + 1 with create-if-absent (``cas.append_next``),
        so of two racing appenders exactly one wins and the other decides again on the
        new state. The durable write happens outside the index's write lock (which
        other writers, deliveries among them, would otherwise wait on through its
        fsyncs); the lock is taken only to index the event.
        """

        def read() -> Run | None:
            row = self._current(agent_id, run_id)
            if row is None:  # unknown to the index, or an event file not indexed yet
                with self.store.index.write_session() as ix:
                    row = self._catch_up(ix, agent_id, run_id)
            return row

        def decide(row: Run | None) -> cas.Done[Run | None] | cas.Next[Run | None]:
            event = make(row)
            if event is None or row is None:
                # An unknown run gets no event: its event 1 is its delivery record.
                return cas.Done(row)
            event.setdefault("at", now_us())
            seq = row.events + 1
            return cas.Next(
                event_key(agent_id, run_id, seq),
                _event_bytes(event),
                functools.partial(self._index_won, agent_id, run_id, seq, event),
            )

        return cas.append_next(
            read,
            decide,
            self.backend.put_if_absent,
            tries=50,
            conflict=lambda: Conflict("run changed concurrently too often; retry"),
        )

    def append_many(self, items: list[Append]) -> list[Run | None]:
        """``append`` of each (agent id, run id, make), each item decided alone, their
        events made durable together: events of one agent's runs with the same bytes
        (a batch's claims or ends: the same event at one ``at``) share one file,
        hard-linked under each event's name (``_put_all``), and the winners are
        indexed in one transaction. An event that lost its name to a racing appender
        is decided again on the new state, on its own (``append``)."""
        at = now_us()
        results: list[Run | None] = [None] * len(items)
        pending: list[tuple[int, str, bytes, int, dict[str, Any]]] = []
        for i, (agent_id, run_id, make) in enumerate(items):
            row = self._current(agent_id, run_id)
            if row is None:
                with self.store.index.write_session() as ix:
                    row = self._catch_up(ix, agent_id, run_id)
            event = make(row)
            if event is None or row is None:
                results[i] = row
                continue
            event.setdefault("at", at)
            seq = row.events + 1
            pending.append((i, event_key(agent_id, run_id, seq), _event_bytes(event), seq, event))
        made = self._put_all([(key, data) for _, key, data, _, _ in pending])
        if any(made):
            with self.store.index.write_session() as ix:
                for (i, _, _, seq, event), won in zip(pending, made, strict=True):
                    if won:
                        agent_id, run_id, _ = items[i]
                        current = get_row(ix, agent_id, run_id)
                        if current is not None and current.events == seq - 1:
                            current = _apply(ix, agent_id, run_id, seq, event, current)
                        results[i] = self._follow(ix, agent_id, run_id, current)
        for (i, _, _, _, _), won in zip(pending, made, strict=True):
            if not won:
                results[i] = self.append(*items[i])
        return results

    def _put_all(self, items: list[tuple[str, bytes]]) -> list[bool]:
        """``put_if_absent`` of each (key, data), all durable on return; the keys of one
        folder with the same bytes as ONE file linked under each name, one file fsync
        and one folder fsync for them all (``put_shared_if_absent``, create-if-absent
        per name, as the deliveries' batches). A backend without it (S3) puts each."""
        shared = getattr(self.backend, "put_shared_if_absent", None)
        made = [False] * len(items)
        groups: dict[tuple[str, bytes], list[int]] = {}
        for i, (key, data) in enumerate(items):
            groups.setdefault((key.rpartition("/")[0], data), []).append(i)
        for (_, data), members in groups.items():
            if shared is None or len(members) == 1:
                for i in members:
                    made[i] = self.backend.put_if_absent(items[i][0], data)
            else:
                names = [items[i][0] for i in members]
                for i, won in zip(members, shared(names, data), strict=True):
                    made[i] = won
        return made

    def _index_won(self, agent_id: str, run_id: str, seq: int, event: dict[str, Any]) -> Run:
        """Index event ``seq``, just published by this writer, and any after it."""
        with self.store.index.write_session() as ix:
            current = get_row(ix, agent_id, run_id)
            if current is not None and current.events == seq - 1:
                current = _apply(ix, agent_id, run_id, seq, event, current)
            run = self._follow(ix, agent_id, run_id, current)
        assert run is not None
        return run

    def retry(self, agent_id: str, run_id: str) -> Run:
        """Give a failed run one more attempt (queued again); Conflict for any other run."""
        current = self.get(agent_id, run_id)
        if current.status == "failed" and (
            current.delivery_key is None or not self.backend.exists(current.delivery_key)
        ):
            raise Conflict(
                f"run {run_id!r} can't be retried: its delivery was collected after the "
                "retention period",
                field="runId",
            )

        def requeue(cur: Run | None) -> dict[str, Any] | None:
            if cur is None or cur.status != "failed":
                return None
            return run_events.requeued(cur.attempt, cur.attempt + 1)

        run = self.append(agent_id, run_id, requeue) if current.status == "failed" else current
        if run is None or run.status != "queued" or current.status != "failed":
            status = run.status if run is not None else current.status
            raise Conflict(f"run is {status}; only a failed run can be retried", field="runId")
        return run

    def _current(self, agent_id: str, run_id: str) -> Run | None:
        """The run as indexed, if no event file is newer (no write lock needed)."""
        # One statement reads one snapshot: no BEGIN/COMMIT around it (every retry of a
        # delivered id comes here).
        with self.store.index.statement_session() as ix:
            row = get_row(ix, agent_id, run_id)
        if row is not None and not self.backend.exists(event_key(agent_id, run_id, row.events + 1)):
            return row
        return None

    def get(self, agent_id: str, run_id: str) -> Run:
        row = self._current(agent_id, run_id)
        if row is None:
            with self.store.index.write_session() as ix:
                row = self._catch_up(ix, agent_id, run_id)
        if row is None:
            raise NotFound(f"run {run_id!r} of agent {agent_id!r} does not exist", field="runId")
        return row

    # ---- deliveries ------------------------------------------------------------------

    def deliver(
        self,
        agent_id: str,
        trigger_id: str,
        webhook_id: str,
        body: bytes,
        content_type: str,
        max_attempts: int,
    ) -> tuple[Run, bool]:
        """The run of this webhook id: created now (True) or the one that exists (False)."""
        known = self.known(agent_id, trigger_id, webhook_id)
        if known is not None:
            return known, False
        return self.create(agent_id, trigger_id, webhook_id, body, content_type, max_attempts)

    def known(
        self, agent_id: str, trigger_id: str, webhook_id: str, *, wait: bool = True
    ) -> Run | None:
        """The run of an id delivered before, if any: a retry is answered from its record
        without writing (and fsyncing) a temp file that put_if_absent would throw away.

        With ``wait=False`` it only reads (no lock, no fsync: cheap enough for the
        server's event loop) and answers None also for a record whose run is not indexed
        yet (its first delivery is a moment from doing so): ``deliver`` then waits."""
        key = delivery_key(agent_id, trigger_id, webhook_id)
        known = _known_ids(self.store)
        seen = known.get(key)
        if seen is not None:
            if identity.of(self.backend, key) == seen[1]:
                run = self._current(agent_id, seen[0])
                if run is not None and run.delivery_key == key:
                    if run is not seen[2]:
                        known[key] = (seen[0], seen[1], run)  # its state now, for known_now
                    return run
            known.pop(key, None)  # collected, erased, or not indexed yet: read it
        # The identity before the read: if the file is replaced in between, the bytes
        # are the new file's and the identity the old one's, so the next check misses.
        ident = identity.of(self.backend, key)
        try:
            data = self.backend.get(key)
        except MissingObject:
            return None
        record = record_of(key, data)
        run = self._current(agent_id, record["runId"])
        if run is None and wait:
            run = self.register(agent_id, key, record)
        if run is not None and ident is not None and run.delivery_key == key:
            if len(known) >= KNOWN_MAX:
                known.clear()
            known[key] = (run.run_id, ident, run)
        return run

    def known_now(self, agent_id: str, trigger_id: str, webhook_id: str) -> Run | None:
        """The run of an id this process answered before, as ``known`` found it, if that
        is still its state: no read, no statement, no lock (an ``lstat`` and a ``stat``),
        so an event loop may ask. None: not known here, or something changed (ask
        ``known``).

        Exact, not a time window: the record is the same file (``known``'s check), and
        a run's row is the fold of its event files, which are created in sequence and
        never removed while the agent exists, so with no event ``events + 1`` the row
        still says what it said (``_current`` answers the row on the same test). The
        one change to a row without an event, collection forgetting its key, comes
        after the record's deletion, which the identity sees."""
        key = delivery_key(agent_id, trigger_id, webhook_id)
        seen = _known_ids(self.store).get(key)
        if seen is None:
            return None
        run = seen[2]
        if identity.of(self.backend, key) != seen[1] or self.backend.exists(
            event_key(agent_id, run.run_id, run.events + 1)
        ):
            return None
        return run

    def create(
        self,
        agent_id: str,
        trigger_id: str,
        webhook_id: str,
        body: bytes,
        content_type: str,
        max_attempts: int,
    ) -> tuple[Run, bool]:
        """Create the delivery record (the one durable file of a new delivery) and index
        its run; when a racing delivery of the same id created it first, its run.

        Create-if-absent of the record's name decides between racing deliveries
        (threads, workers, processes).
        """
        key = delivery_key(agent_id, trigger_id, webhook_id)
        record = {
            "webhookId": webhook_id,
            "triggerId": trigger_id,
            "runId": "run_" + uuid.uuid4().hex,
            "receivedAt": now_us(),
            "contentType": content_type,
            "maxAttempts": max_attempts,
            "body": base64.b64encode(body).decode(),
        }
        # Durable together with the records of concurrent deliveries (one fsync'd file
        # for the batch, one hard link per record: core/delivery_records.py), and
        # indexed by the same flush, right after (``_index_made``).
        item = _Registration(agent_id, key, record, new=True)
        created, indexed = put_record(self.store, key, record, then=_index_made, tag=item)
        if created:
            if not indexed:  # a backend without shared creates (S3): indexed here
                return self.register(agent_id, key, record), True
            if item.error is not None:
                raise item.error
            assert item.run is not None
            return item.run, True
        won = record_of(key, self.backend.get(key))  # a racing delivery of the same id
        run = self._current(agent_id, won["runId"])
        return (run if run is not None else self.register(agent_id, key, won)), False

    def register(self, agent_id: str, key: str, record: dict[str, Any]) -> Run:
        """Index the run of a delivery record (idempotent; batched with concurrent ones)."""
        item = _Registration(agent_id, key, record)
        self.store.registrations.submit(item, self._register_batch)
        if item.error is not None:
            raise item.error
        assert item.run is not None
        return item.run

    def _register_in(self, ix: WriteSession, item: _Registration, visible_at: int) -> Run:
        run_id = item.record["runId"]
        row = get_row(ix, item.agent_id, run_id)
        if row is None and item.new:
            # A record this process just made, under a run id it just drew: no event
            # file can exist yet (events are appended to indexed runs only, and event 1
            # is published by collection, of finished runs), so none is looked for.
            # Visible with the transaction's other new runs, at one clock reading
            # (past the clock at its start: no reader is pinned there yet).
            event = run_events.created(item.key, item.record)
            return _apply(ix, item.agent_id, run_id, 1, event, None, visible_at=visible_at)
        if row is None:
            try:  # published by collect (or by memfs before records were event 1)
                first = json.loads(self.backend.get(event_key(item.agent_id, run_id, 1)))
            except MissingObject:
                first = run_events.created(item.key, item.record)
            row = _apply(ix, item.agent_id, run_id, 1, first, None)
        run = self._follow(ix, item.agent_id, run_id, row)
        assert run is not None
        return run

    def _register_batch(self, batch: list[_Registration]) -> None:
        try:
            try:
                with self.store.index.write_session() as ix:
                    visible_at = max(now_us(), ix.clock() + 1)
                    runs = [self._register_in(ix, item, visible_at) for item in batch]
                    ix.raise_clock(visible_at)
                for item, run in zip(batch, runs, strict=True):
                    item.run = run
                return
            except Exception as exc:
                if len(batch) == 1:
                    batch[0].error = exc
                    return
            # One bad registration must not fail the others: one transaction each.
            for item in batch:
                try:
                    with self.store.index.write_session() as ix:
                        visible_at = max(now_us(), ix.clock() + 1)
                        item.run = self._register_in(ix, item, visible_at)
                        ix.raise_clock(visible_at)
                except Exception as exc:
                    item.error = exc
        except BaseException as exc:
            for item in batch:
                if item.run is None and item.error is None:
                    item.error = exc
            raise
        finally:
            for item in batch:
                item.done = True

    def delivery(self, run: Run) -> dict[str, Any]:
        if run.delivery_key is None:
            raise NotFound("the delivery of this run was collected", field="runId")
        try:
            record = record_of(run.delivery_key, self.backend.get(run.delivery_key))
        except MissingObject:
            raise NotFound("the delivery of this run was collected", field="runId") from None
        return record

    def body(self, record: dict[str, Any]) -> bytes:
        return base64.b64decode(record["body"])

    # ---- claims ----------------------------------------------------------------------

    def claim(self, run: Run, owner: dict[str, Any]) -> int | None:
        """Claim the next attempt of a runnable run; its number, or None if someone else did."""
        attempt = run.attempt + 1
        key = claim_key(run.agent_id, run.run_id, attempt)
        # Another worker's claim is seen without writing (and fsyncing) a temp file
        # that put_if_absent would throw away; put_if_absent still decides the race.
        if self.backend.exists(key) or not self.backend.put_if_absent(
            key, json.dumps({**owner, "attempt": attempt}).encode()
        ):
            return None

        if run.status == "delayed":
            # An interrupted attempt is retried at once: this claim can come before the
            # failing worker noted the retry, so whoever comes first notes it, once.
            self.note_retry(run.agent_id, run.run_id, run.attempt)

        self.append(run.agent_id, run.run_id, _claimed(attempt, owner))
        return attempt

    def claim_many(self, runs: list[Run], owner: dict[str, Any]) -> list[int | None]:
        """``claim`` of each run (runnable, of one or more agents), the claims and their
        ``claimed`` events made durable together: a batch's claims of the same attempt
        number in one agent's folder are the same bytes, so ONE file linked under each
        claim's name (create-if-absent per name: each attempt is still won by exactly
        one claimer, against other threads, workers and servers), then their events
        likewise (``append_many``). The attempt each got, or None where someone else
        claimed it."""
        attempts: list[int | None] = [None] * len(runs)
        todo: list[tuple[int, str, bytes]] = []
        for i, run in enumerate(runs):
            attempt = run.attempt + 1
            key = claim_key(run.agent_id, run.run_id, attempt)
            if not self.backend.exists(key):  # as ``claim``: a claim seen is not written
                todo.append((i, key, json.dumps({**owner, "attempt": attempt}).encode()))
        made = self._put_all([(key, data) for _, key, data in todo])
        won = [i for (i, _, _), created in zip(todo, made, strict=True) if created]
        for i in won:
            run = runs[i]
            attempts[i] = run.attempt + 1
            if run.status == "delayed":
                self.note_retry(run.agent_id, run.run_id, run.attempt)
        self.append_many(
            [(runs[i].agent_id, runs[i].run_id, _claimed(runs[i].attempt + 1, owner)) for i in won]
        )
        return attempts

    def note_retry(self, agent_id: str, run_id: str, attempt: int) -> None:
        """Append ``retry_scheduled`` for ``attempt``'s failure unless it is there: once
        per failure, whether the failing worker or the next claimer gets here first."""

        def scheduled(cur: Run | None) -> dict[str, Any] | None:
            if cur is None or cur.status != "delayed" or cur.attempt != attempt:
                return None
            last = json.loads(self.backend.get(event_key(agent_id, run_id, cur.events)))
            if last.get("type") != "failed":
                return None  # noted already
            return run_events.retry_scheduled(attempt, cur.next_retry_at)

        self.append(agent_id, run_id, scheduled)

    def record_group(self, run: Run, attempt: int, record: dict[str, Any]) -> None:
        self.backend.put_if_absent(
            group_key(run.agent_id, run.run_id, attempt), json.dumps(record).encode())

    def group(self, run: Run, attempt: int) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = json.loads(
                self.backend.get(group_key(run.agent_id, run.run_id, attempt)))
            return data
        except (MissingObject, ValueError):
            return None

    def owner(self, run: Run) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = json.loads(
                self.backend.get(claim_key(run.agent_id, run.run_id, run.attempt)))
            return data
        except MissingObject:
            return None

    # ---- queries -------------------------------------------------------------------

    def due(self, now: int, limit: int) -> list[Run]:
        """The oldest ``limit`` runs with work to look at: queued, running (their owner
        may have died), and delayed ones whose retry time has come.

        One query per status, each read in creation order from an index, then merged
        (``index.due_run_rows`` says why)."""
        with self.store.index.read_session() as ix:
            rows = ix.due_run_rows(now, limit)
        runs = sorted((Run(*r) for r in rows), key=lambda run: run.created_at)
        return runs[:limit]

    def list(
        self,
        agent_id: str,
        *,
        trigger_id: str | None,
        status: str | None,
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[Run]:
        if status is not None and status not in STATUSES:
            raise InvalidRequest(f"status must be one of {', '.join(STATUSES)}", field="status")
        with self.store.index.read_session() as ix:
            rows = ix.run_rows(
                agent_id, trigger_id=trigger_id, status=status, after=after, limit=limit
            )
        return [Run(*r) for r in rows]

    def counts(self, agent_id: str) -> dict[str, Any]:
        with self.store.index.read_session() as ix:
            return ix.run_counts(agent_id)

    def rescan(self) -> int:
        """Index every delivery and run event the index lacks (after a crash or reindex)."""
        found = 0
        for agent in self.store.iter_agents():
            base = f"{_prefix(agent.agent_id)}deliveries/"
            for key in self.backend.list(base):
                try:
                    record = record_of(key, self.backend.get(key))
                except MissingObject:
                    continue
                self.register(agent.agent_id, key, record)
                found += 1
            runs_base = f"{_prefix(agent.agent_id)}runs/"
            seen: set[str] = set()
            for key in self.backend.list(runs_base):
                run_id = key[len(runs_base) :].split(".", 1)[0]
                if run_id not in seen:
                    seen.add(run_id)
                    with self.store.index.write_session() as ix:
                        self._catch_up(ix, agent.agent_id, run_id)
        return found

    def collect(self, now: int, retention_us: int) -> int:
        """Delete delivery records of finished runs older than the retention.

        A record is its run's event 1: that event is first published as its own file
        (create-if-absent, durable, the same bytes from any collector), then the record
        is deleted, so a crash at any point leaves the run rebuildable from files.
        """
        with self.store.index.read_session() as ix:
            rows = ix.finished_deliveries(now - retention_us)
        for agent_id, run_id, key in rows:
            try:
                record: dict[str, Any] | None = record_of(key, self.backend.get(key))
            except MissingObject:
                record = None  # another collector deleted it, after publishing event 1
            # Only this run's record goes: after a reindex the row of a run collected
            # before names its key again, where a later delivery of the same webhook id
            # may have made a new record (another run's, maybe still queued).
            if record is not None and record.get("runId") == run_id:
                first = event_key(agent_id, run_id, 1)
                if not self.backend.exists(first):
                    self.backend.put_if_absent(first, _event_bytes(run_events.created(key, record)))
                self.backend.delete(key)
            with self.store.index.write_session() as ix:
                ix.forget_delivery(agent_id, run_id)
        return len(rows)


def _claimed(attempt: int, owner: dict[str, Any]) -> Make:
    """The ``claimed`` event of ``attempt``, unless the run is past it."""

    def claimed(cur: Run | None) -> dict[str, Any] | None:
        if cur is None or cur.attempt >= attempt:
            return None
        return run_events.claimed(attempt, owner)

    return claimed


def _index_made(store: Store, items: list[_Registration]) -> None:
    """Index the runs of delivery records a flush just made durable, in one transaction
    (``Runs._register_batch``: errors are noted per item, never raised here)."""
    Runs(store)._register_batch(items)


def check_run_id(value: str) -> str:
    """A run id names folders: ``run_`` and up to 60 letters and digits."""
    if not value.startswith("run_") or len(value) > 64 or not value[4:].isalnum():
        raise InvalidRequest(
            f"invalid run id {value!r}: run ids look like run_<hex>", field="runId"
        )
    return value


def cap_output(data: bytes) -> str:
    text = data[:OUTPUT_CAP].decode("utf-8", errors="replace")
    if len(data) > OUTPUT_CAP:
        text += f"\n[output truncated: {len(data)} bytes, kept {OUTPUT_CAP}]"
    return text
