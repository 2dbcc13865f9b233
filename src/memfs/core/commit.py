"""Committing: plan on the index's head, publish log entry N+1 with no index lock
held, then index it in a group commit the Store shares among concurrent callers.

One commit, in order:

1. **Plan** on one read (``plan_head``: one SQLite statement for the agent's head,
   revision N and last timestamp, and the planner's path states), and the timestamp
   ``ts = max(now, last_ts + 1, clock + 1)``;
   the entry encoded. A batch at a time (``Committer.planning``): while a commit is
   being planned, the callers arriving queue, and one thread plans every commit
   waiting in ONE read session, so that 16 writers' planning is not 16 threads'
   (docs/benchmarks.md, "Batched planning, fewer runnable threads, the tree file's
   create"); a caller that finds nobody planning plans its own on its thread, with
   no queue (``WakingGroupCommit.lead_alone``).
2. **Publish**, on the caller's own thread again: the working-tree files handed to
   the stager's thread (``tree_commit.Stager``), contents over 16 KiB as blobs, then
   create log entry N+1 with create-if-absent (``_publish_entry``) — the commit point —
   while *no* index write lock is held, so concurrent commits of different agents
   overlap their fsyncs (or their S3 PUTs), and a commit's fsync overlaps its tree
   file's staging. Losing that race (another writer took N+1) catches the index up from
   the log and plans again on the new head (``cas.retry_lost_races``), so
   preconditions are re-checked. Won, the staging is waited for on this thread
   (``_place_tree``), not in the flush.
3. **Index** the durable entry through ``Committer.group`` (``core.group_commit``):
   the leader applies every queued entry, and any entry of that agent the index has not
   seen yet, in timestamp order, in ONE write transaction. ``visible_at`` is taken there
   from the index clock (``max(clock + 1, ts)``: its timestamp unless the clock passed
   it meanwhile), so a commit is visible later than every ``readTimestamp`` answered
   before it became visible; the staged tree files are
   published inside the flush, before the transaction commits (see the design notes:
   a tree behind an up-to-date index is never repaired).
4. **Acknowledge** the caller once its own entry is durable *and* the batch holding it
   is committed in the index (read-after-write). An index that fails after the entry is
   durable does not undo it: the commit is acknowledged, the index catches up from the
   log at the next write or ``memfs serve`` start.

Commits of one agent in one process take turns (a per-agent mutex from planning to
acknowledgement): the second would otherwise plan on a head that misses the first's
still-queued entry and lose its race every time. Other processes and nodes meet on the
log's create-if-absent, as before.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from memfs.canonical import layout
from memfs.canonical.backend import Backend, MissingObject
from memfs.core import cas, fault_points
from memfs.core.group_commit import GroupCommit, WakingGroupCommit
from memfs.core.planner import Move, Op, Plan, paths_read, written_row
from memfs.core.planner import plan as plan_commit
from memfs.core.tree_commit import Stager, TreeCommit
from memfs.core.tree_commit import publish as publish_tree
from memfs.derived.index import AgentRow, MemoryRow
from memfs.derived.index.base import ReadSession, WatchedIndex, WriteSession
from memfs.derived.worktree import NoTree, WorkTree
from memfs.domain.commits import Commit, now_us
from memfs.domain.records import PathState
from memfs.errors import Conflict, CorruptionError, Damaged, MemfsError, NotFound

# The store's own messages: they keep the logger name operators configured.
log = logging.getLogger("memfs.store")

RACE_RETRIES = 50
# How long an asOf pin waits for this process's commits in flight (a disk that hangs
# must not hang inspect: past it, such a commit is stamped after the pin instead).
SETTLE_S = 10.0
# Working trees kept open (``Committer.tree``): each holds up to folders.LIMIT fds.
TREES_KEPT = 16


@dataclass(frozen=True)
class CommitResult:
    """What a write did: ``commit`` is None when nothing changed (an idempotent retry)."""

    revision: int
    commit: Commit | None
    row: MemoryRow | None = None  # the memory asked for by ``read_back``, after the commit


# ``base.NextCommit.apply_next_commit``, as the flush finds it on a write session.
_ApplyNext = Callable[[Commit, str, dict[str, bytes], bytes], "int | None"]


def _applied_next(ix: WriteSession, apply_next: _ApplyNext, item: _Queued) -> bool:
    """``item`` applied as its agent's next commit, its read-back row read (True);
    False when the agent's row is not the one it was planned on (nothing written)."""
    commit = item.commit
    if apply_next(commit, item.store_id, item.plan.contents, item.entry) is None:
        return False
    if item.written is None:
        item.row = _read(ix, commit.agent_id, item.read_back)
    return True


class Host(Protocol):
    """What the commit machinery needs of its Store (a protocol: no import cycle)."""

    data_dir: Path
    worktree: bool
    backend: Backend
    index: WatchedIndex
    memory_bytes: int
    on_commit: Callable[[], None] | None

    def _read_blob(self, ix: ReadSession, agent_id: str, sha256: str) -> bytes: ...
    def record_damage(self, exc: Damaged) -> None: ...


def verified(agent_id: str, sha256: str, data: bytes, where: str) -> bytes:
    """``data`` if it hashes to ``sha256``; Damaged naming ``where`` otherwise."""
    if hashlib.sha256(data).hexdigest() != sha256:
        raise Damaged(agent_id, where, f"content does not match its sha256 {sha256[:12]}…")
    return data


def require_agent(ix: ReadSession, agent_id: str) -> AgentRow:
    """The agent's row; NotFound if there is none, Damaged if it was found damaged."""
    row = ix.agent(agent_id)
    return sound(agent_id, row, ix.damage(agent_id) if row is not None else None)


def sound(agent_id: str, row: AgentRow | None, damage: tuple[str, str] | None) -> AgentRow:
    """``row`` if the agent exists and is sound (see ``require_agent``), for the row and
    damage a caller read itself."""
    if row is None:
        raise NotFound(
            f"agent {agent_id!r} does not exist; create it with "
            f"'memfs agents create {agent_id}' or PUT /v1/agents/{{agentId}}",
            field="agentId",
        )
    if damage is not None:
        exc = Damaged(agent_id, *damage)
        exc.known = True
        raise exc
    return row


class _States:
    """The planner's reads (``planner.States``) of one agent, inside the caller's session."""

    def __init__(self, ix: ReadSession, agent_id: str, content: Callable[[str], bytes]) -> None:
        self.ix, self.agent_id, self.content = ix, agent_id, content

    def path_states(self, paths: Sequence[str]) -> dict[str, PathState]:
        return self.ix.path_states(self.agent_id, paths)


def _read(ix: ReadSession, agent_id: str, path: str | None) -> MemoryRow | None:
    return ix.memory(agent_id, path) if path is not None else None


@dataclass(eq=False)
class _Queued:
    """A durable log entry waiting for its group commit (``group_commit.Queued``)."""

    commit: Commit
    entry: bytes
    plan: Plan
    tree: TreeCommit
    store_id: str
    read_back: str | None
    written: MemoryRow | None  # the read-back row as the commit writes it (written_row)
    done: bool = False
    indexed: bool = False  # the flush committed it (or found it already indexed)
    row: MemoryRow | None = None  # the read-back row, read inside the flush
    error: Exception | None = None  # why the flush could not index it
    gone: bool = False  # the agent was erased (or erased and made again) meanwhile


@dataclass(eq=False)
class _Request:
    """A commit attempt waiting to be planned (``Committer.planning``, a
    ``group_commit.Queued``): the planning thread sets ``answer`` (nothing to write),
    ``error``, or ``planned`` (its entry encoded, to be made durable by its caller)."""

    agent_id: str
    ops: Sequence[Op]
    attempt: int
    actor: str
    message: str
    agent_name: str | None
    read_back: str | None
    done: bool = False
    answer: CommitResult | cas.Lost | None = None
    error: Exception | None = None
    row: AgentRow | None = None  # the agent's head it was planned on
    plan: Plan | None = None
    ts: int = 0
    planned: _Queued | None = None


@dataclass
class _Turns:
    """Per-agent mutexes, made on demand and dropped when nobody holds or waits.

    ``take``/``give`` rather than a generator context manager: the commit path paid
    a dozen of those per write, a few microseconds each."""

    mutex: threading.Lock = field(default_factory=threading.Lock)
    locks: dict[str, tuple[threading.Lock, int]] = field(default_factory=dict)

    def take(self, agent_id: str) -> threading.Lock:
        """Wait for the agent's turn; hand the answer back to ``give``."""
        with self.mutex:
            lock, users = self.locks.get(agent_id, (None, 0))
            if lock is None:
                lock = threading.Lock()
            self.locks[agent_id] = (lock, users + 1)
        try:
            lock.acquire()
        except BaseException:
            self._leave(agent_id, lock)
            raise
        return lock

    def give(self, agent_id: str, lock: threading.Lock) -> None:
        lock.release()
        self._leave(agent_id, lock)

    def _leave(self, agent_id: str, lock: threading.Lock) -> None:
        with self.mutex:
            _, users = self.locks[agent_id]
            if users == 1:
                del self.locks[agent_id]
            else:
                self.locks[agent_id] = (lock, users - 1)


class Committer:
    """The commit machinery of one Store (``Store.commits``)."""

    def __init__(self, store: Host) -> None:
        self.store = store
        # Concurrent commits of this process are planned by one thread in one read
        # session, then share one index transaction.
        self.planning: WakingGroupCommit[_Request] = WakingGroupCommit()
        # False: each caller plans alone, in its own session (the path before batches;
        # ``scripts/bench_writers.py --compare-planning`` measures one against the other).
        self.plan_in_batches = True
        self.group: GroupCommit[_Queued] = GroupCommit()
        self._turns = _Turns()
        # Timestamps of this process's commits planned but not yet indexed (``settle``).
        self._in_flight: dict[int, int] = {}
        self._settled = threading.Condition(threading.Lock())
        self._settling = 0  # callers waiting in settle: _land wakes nobody when none
        self._trees: dict[str, WorkTree] = {}
        self._trees_lock = threading.Lock()
        # Stages the tree files of a commit while its caller makes the entry durable
        # (False: the caller stages them first, the path before; ``scripts/
        # bench_writers.py --compare-staging`` measures one against the other).
        self._stager = Stager()
        self.stage_beside = True
        # True: the tree files renamed into place before the index transaction, out of
        # its write lock (``_place_tree``). Off: measured, not kept (see _place_tree).
        self.tree_before_index = False

    def settle(self, as_of: int, timeout: float = SETTLE_S) -> None:
        """Wait until no commit of this process stamped at or before ``as_of`` is still
        on its way to the index (an ``asOf`` pin about to raise the clock past it)."""
        with self._settled:
            self._settling += 1
            try:
                self._settled.wait_for(
                    lambda: not any(ts <= as_of for ts in self._in_flight), timeout
                )
            finally:
                self._settling -= 1

    def _fly(self, ts: int) -> None:
        """A commit stamped ``ts`` is on its way to the index (until ``_land``)."""
        with self._settled:
            self._in_flight[ts] = self._in_flight.get(ts, 0) + 1

    def _land(self, ts: int) -> None:
        with self._settled:
            left = self._in_flight.pop(ts) - 1
            if left:
                self._in_flight[ts] = left
            if self._settling:  # an asOf pin is waiting (rare): it checks again
                self._settled.notify_all()

    # ---- one commit ----------------------------------------------------------------

    def commit(
        self,
        agent_id: str,
        ops: Sequence[Op],
        *,
        actor: str,
        message: str,
        agent_name: str | None = None,
        read_back: str | None = None,
    ) -> CommitResult:
        """Commit ``ops`` (validated); with ``read_back``, also the index row that path
        has afterwards (as the commit wrote it, or read in the flush's transaction)."""
        self.refuse_symlinks(agent_id, ops)
        attempt = functools.partial(
            self._commit_once, agent_id, ops, actor=actor, message=message,
            agent_name=agent_name, read_back=read_back,
        )
        conflict = functools.partial(Conflict, "too many concurrent writers; try again")
        turn = self._turns.take(agent_id)
        try:
            return cas.retry_lost_races(attempt, tries=RACE_RETRIES, conflict=conflict)
        finally:
            self._turns.give(agent_id, turn)

    def _commit_once(
        self,
        agent_id: str,
        ops: Sequence[Op],
        attempt: int,
        *,
        actor: str,
        message: str,
        agent_name: str | None,
        read_back: str | None,
    ) -> CommitResult | cas.Lost:
        """One attempt (attempt 0 plans on the index's head; a later one first catches
        the index up from the log): ``cas.LOST`` when another writer took entry N + 1
        first, or when an answer that writes nothing was judged on a stale head.

        The attempt is planned on this thread when nobody else is planning (the single
        writer's case), else it queues to be planned (``planning``): one thread plans
        every commit waiting, in one read session, and encodes their entries; each
        caller then stages
        its tree files and makes its entry durable on its own thread (the fdatasyncs of
        a batch overlap, with the GIL released) and queues it to be indexed."""
        req = _Request(agent_id, ops, attempt, actor, message, agent_name, read_back)
        if self.plan_in_batches:
            planning = self.planning
            if planning.lead_alone():
                # Nobody else plans: this caller plans its own, with no batch around
                # it (a single writer's fast path); commits arriving meanwhile queue.
                try:
                    self._plan_alone(req)
                finally:
                    planning.end_alone()
            else:
                planning.submit(req, self._plan_batch)
        if req.error is not None:
            raise req.error
        if req.answer is not None:
            return req.answer
        if req.planned is None:
            # The batch's session failed (or its planner was interrupted): plan alone, on
            # this thread, so this caller gets the error of its own session, if any.
            self._plan_alone(req)
            if req.answer is not None:
                return req.answer
        planned = req.planned
        assert planned is not None
        try:
            return self._publish(planned)
        finally:
            self._land(planned.commit.ts)

    # ---- planning, a batch at a time -------------------------------------------------

    def _plan_batch(self, batch: list[_Request]) -> None:
        """Plan ``batch`` (commits of different agents: an agent's commits take turns)
        in one read session on one thread; each request gets its answer, its error, or
        its planned entry. A failing session leaves requests unplanned: their callers
        plan alone (``_plan_alone``)."""
        try:
            for req in batch:
                if req.attempt:
                    try:
                        self.catch_up_agent(req.agent_id)
                    except Exception as exc:
                        req.error = exc
            todo = [req for req in batch if req.error is None]
            index = self.store.index
            # One commit's planning read is one statement (``plan_head``): no read
            # transaction around it. Several share one (a statement in a transaction
            # costs SQLite less than one in autocommit).
            try:
                session = index.statement_session() if len(todo) == 1 else index.read_session()
                with session as ix:
                    for req in todo:
                        try:
                            self._plan_one(ix, req)
                        except Exception as exc:
                            req.error = exc
            except Exception:
                for req in todo:
                    req.error = req.answer = req.plan = None
                return
            for req in todo:
                if req.plan is not None:
                    try:
                        self._stage(req)
                    except Exception as exc:
                        req.error = exc
        finally:
            for req in batch:
                req.done = True

    def _plan_alone(self, req: _Request) -> None:
        """``_plan_batch`` of one request, on its caller's thread, errors raised."""
        if req.attempt:
            self.catch_up_agent(req.agent_id)
        with self.store.index.statement_session() as ix:
            self._plan_one(ix, req)
        if req.plan is not None:
            self._stage(req)

    def _plan_one(self, ix: ReadSession, req: _Request) -> None:
        """Plan ``req`` on the index's head: its ``answer`` when it writes nothing (or
        was judged on a stale head: ``cas.LOST``), else its ``plan``, ``row`` and ``ts``."""
        store, agent_id = self.store, req.agent_id
        # The planning read: the agent's head and every path's state in one statement
        # (one snapshot). Whatever planning reads after it (a renamed content, by its
        # sha256) needs no snapshot of its own: a head gone stale meanwhile loses the
        # race for entry N + 1, and is planned again.
        head = ix.plan_head(agent_id, paths_read(req.ops))
        row = sound(agent_id, head.agent, head.damage)
        content = functools.partial(store._read_blob, ix, agent_id)
        try:
            plan = plan_commit(
                req.ops,
                _States(ix, agent_id, content),
                memory_bytes=store.memory_bytes,
                read=head.states,
            )
        except MemfsError:
            # Creating the entry is the probe for entries past the index's head;
            # a refusal writes nothing, so it looks, and is judged again if stale.
            if self._has_entry(agent_id, row.revision + 1):
                req.answer = cas.LOST
                return
            raise
        if not plan.changes and req.agent_name is None:
            if self._has_entry(agent_id, row.revision + 1):
                req.answer = cas.LOST
            elif req.read_back in plan.rows:  # read at the head's snapshot (a Put's path)
                req.answer = CommitResult(row.revision, None, plan.rows[req.read_back])
            else:
                req.answer = CommitResult(row.revision, None, _read(ix, agent_id, req.read_back))
            return
        req.row, req.plan = row, plan
        req.ts = max(now_us(), row.last_ts + 1, head.clock + 1)

    def _stage(self, req: _Request) -> None:
        """The planned commit: its entry encoded, its read-back row, its tree files to
        stage (by the caller), and its timestamp in flight until the caller lands it."""
        row, plan = req.row, req.plan
        assert row is not None and plan is not None
        commit = Commit(
            agent_id=req.agent_id,
            revision=row.revision + 1,
            ts=req.ts,
            actor=req.actor,
            message=req.message,
            changes=tuple(plan.changes),
            agent_name=req.agent_name,
        )
        tree = TreeCommit(self.tree(req.agent_id), commit, plan.contents)
        written = written_row(plan, commit, req.read_back)
        req.planned = _Queued(
            commit, commit.to_bytes(), plan, tree, row.store_id, req.read_back, written
        )
        self._fly(req.ts)

    # ---- publishing, on the caller's own thread -----------------------------------------

    def _publish(self, item: _Queued) -> CommitResult | cas.Lost:
        """Make the planned commit's entry durable, then have it indexed (steps 2-4)."""
        store, commit, plan, tree = self.store, item.commit, item.plan, item.tree
        agent_id = commit.agent_id
        try:
            # The new tree files are made while the entry is (nobody sees them until
            # _place_tree renames them into place; a lost race or a failure removes
            # them, or cancels a staging not begun): on the stager's thread when this
            # is the only commit in flight; with others in flight the cores are busy
            # with them already, and handing over cost each commit two more context
            # switches for nothing (docs/benchmarks.md).
            if self.stage_beside and len(self._in_flight) <= 1:
                tree.stage_beside(self._stager)
            else:
                tree.stage()
            for change in plan.changes:
                if change.after is not None and change.content is None:
                    key = layout.blob_key(agent_id, change.after)
                    store.backend.put_if_absent(key, plan.contents[change.after])
            won = self._publish_entry(layout.log_key(agent_id, commit.revision), item.entry)
        except BaseException:
            tree.discard()
            raise
        if not won:
            tree.discard()
            return cas.LOST
        # From here the commit stands, whatever happens to the index (the log is the truth).
        fault_points.reached(fault_points.AFTER_DURABLE)
        self._place_tree(tree)
        fault_points.reached(fault_points.AFTER_TREE)
        self.group.submit(item, self._flush)
        if item.gone:
            raise NotFound(f"agent {agent_id!r} was erased meanwhile", field="agentId")
        if store.on_commit is not None:
            store.on_commit()
        if not item.indexed:
            if isinstance(item.error, Damaged):
                store.record_damage(item.error)
            log.warning(
                "r%d of %r is committed but not indexed (%s); the index catches up",
                commit.revision,
                agent_id,
                item.error,
            )
            return CommitResult(commit.revision, commit, item.written)
        return CommitResult(commit.revision, commit, item.written or item.row)

    def _place_tree(self, tree: TreeCommit) -> None:
        """Wait for the commit's staged tree files (most often made already) on this
        thread, once its entry is durable, not in the flush, which holds the index's
        write lock; the flush renames them into place before its transaction commits.

        ``tree_before_index``: renamed here too, before the commit queues to be
        indexed. A crash then leaves the tree AHEAD of the index, at the version the log
        holds, which the catch-up keeps and the next commit replaces (tested). Not kept:
        the index's write lock is also what orders two processes' renames of one
        agent's file (two ``memfs serve`` workers, or a CLI beside a server). Outside
        it, a process stalled between its entry and its rename can rename version N
        over the N + 1 another process caught up and committed meanwhile, setting N + 1
        aside as a hand edit; and the rate it bought was within this machine's noise
        (docs/benchmarks.md, "The working tree off a commit's critical path")."""
        try:
            if self.tree_before_index:
                tree.publish()
            else:
                tree.settle()
        except Exception as exc:  # derived: the commit stands (the flush writes it)
            log.warning("working tree of %s not updated: %s", tree.commit.agent_id, exc)

    def _publish_entry(self, key: str, entry: bytes) -> bool:
        """Create log entry N+1 with create-if-absent: the commit point. No index lock
        is held: concurrent commits of other agents wait on the disk (or S3) at once."""
        return self.store.backend.put_if_absent(key, entry)

    # ---- the group commit ------------------------------------------------------------

    def _flush(self, batch: list[_Queued]) -> None:
        """Index ``batch`` in one transaction; if it fails, each entry alone, so one
        agent's trouble (damage found catching up) leaves the others indexed."""
        try:
            try:
                self._index(batch)
            except Exception as exc:
                if len(batch) == 1:
                    batch[0].error = exc
                    batch[0].tree.discard()
                    return
                for item in batch:
                    try:
                        self._index([item])
                    except Exception as one:
                        item.error = one
                        item.tree.discard()
        finally:
            for item in batch:
                item.done = True

    def _index(self, batch: list[_Queued]) -> None:
        """One write transaction applying ``batch`` (and the entries before each that
        the index lacks) in revision order; tree files published before it commits
        (unless ``_place_tree`` placed them already: ``tree_before_index``)."""
        # In timestamp order (an agent's revisions are too): each is then made visible
        # at its own timestamp, unless the clock passed it meanwhile (see _visible_at).
        order = sorted(batch, key=lambda q: (q.commit.ts, q.commit.agent_id))
        applied: list[_Queued] = []
        with self.store.index.write_session() as ix:
            # An engine whose write lock covers every agent (SQLite) may apply a commit
            # with its agent's row checked inside the commits row's INSERT
            # (``base.NextCommit``): the row is read below only when that misses.
            apply_next: _ApplyNext | None = getattr(ix, "apply_next_commit", None)
            # Else every agent's row first, in one call (``agent_rows``): PostgreSQL
            # takes every agent's lock there, in one order for every server (two
            # servers' batches naming x, y and y, x would deadlock otherwise). Each row
            # is used as read here: a batch holds one commit per agent, its commits
            # taking turns, and a second one would read its row afresh.
            heads = (
                ix.agent_rows(sorted({q.commit.agent_id for q in batch}))
                if apply_next is None
                else {}
            )
            for item in order:
                if apply_next is not None and _applied_next(ix, apply_next, item):
                    applied.append(item)
                    continue
                commit = item.commit
                agent_id = commit.agent_id
                row = heads.pop(agent_id) if agent_id in heads else ix.agent(agent_id)
                if row is None or row.store_id != item.store_id:
                    item.gone = True
                    continue
                if row.revision < commit.revision - 1:
                    # Entries before ours that the index lacks (rare: a rebuilt index):
                    # a path this commit's tree already holds is newer than theirs.
                    placed = item.tree.placed()
                    row = self._catch_up(ix, row, until=commit.revision - 1, placed=placed)
                if row.revision < commit.revision:
                    # Its timestamp, unless the clock passed it while the entry was made
                    # (another commit, an asOf pin): every readTimestamp answered before
                    # this transaction is at most the clock, so the commit is visible
                    # only after all of them.
                    visible_at = max(ix.clock() + 1, commit.ts)
                    if ix.apply_commit(commit, visible_at, item.plan.contents, item.entry):
                        applied.append(item)
                if item.written is None:
                    item.row = _read(ix, commit.agent_id, item.read_back)
            # Before the transaction commits (see the module doc): a tree published
            # after it could be left stale by a crash, with nothing to repair it. Placed
            # already (``tree_before_index``): then this does nothing.
            for item in applied:
                item.tree.publish()
        for item in order:
            if item.gone:
                self._forget(item)
            else:
                item.indexed = True
            if item not in applied:
                item.tree.discard()  # indexed before (a catch-up), tree included

    def _forget(self, item: _Queued) -> None:
        """The agent was erased while ``item``'s entry was being made: the entry is a
        leftover of the erase (fsck reports one, and creating the agent removes it).
        Its tree files, placed before the flush, are removed too."""
        item.tree.discard()
        item.tree.withdraw()
        try:
            self.store.backend.delete(layout.log_key(item.commit.agent_id, item.commit.revision))
        except Exception as exc:  # a leftover either way
            log.warning("could not remove a leftover log entry: %s", exc)

    # ---- catching up -------------------------------------------------------------------

    def catch_up_agent(self, agent_id: str) -> None:
        """Apply the agent's log entries past the index's head, in their own transaction."""
        with self.store.index.write_session() as ix:
            row = ix.agent(agent_id)
            if row is not None:
                self._catch_up(ix, row)

    def catch_up(self, ix: WriteSession, row: AgentRow) -> AgentRow:
        """Apply log entries past the index's revision (left by a crashed writer, another
        process or node); the agent's row afterwards (``row`` itself if none)."""
        return self._catch_up(ix, row)

    def _catch_up(
        self,
        ix: WriteSession,
        row: AgentRow,
        until: int | None = None,
        placed: frozenset[str] = frozenset(),
    ) -> AgentRow:
        revision = row.revision
        while until is None or revision < until:
            key = layout.log_key(row.agent_id, revision + 1)
            try:
                data = self.store.backend.get(key)
            except MissingObject:
                break
            try:
                commit = Commit.from_bytes(data, where=key)
                if commit.agent_id != row.agent_id or commit.revision != revision + 1:
                    raise CorruptionError(
                        f"names revision {commit.revision} of {commit.agent_id!r}"
                    )
                contents = self.contents(commit, key)
            except CorruptionError as exc:
                raise Damaged(row.agent_id, key, exc.message) from None
            visible_at = max(now_us(), ix.clock() + 1, commit.ts)
            self.record(ix, commit, visible_at, contents, data, placed)
            revision += 1
        if revision == row.revision:
            return row
        fresh = ix.agent(row.agent_id)
        assert fresh is not None
        return fresh

    def record(
        self,
        ix: WriteSession,
        commit: Commit,
        visible_at: int,
        contents: dict[str, bytes],
        entry: bytes,
        placed: frozenset[str] = frozenset(),
    ) -> None:
        """Index a log entry read back from the log, and bring the tree to it (but for
        the ``placed`` paths, which a later commit's tree files hold already)."""
        if ix.apply_commit(commit, visible_at, contents, entry):
            tree = self.tree(commit.agent_id)
            # Outside a commit's own checks: the kept folders may be long unchecked.
            tree.recheck()
            publish_tree(tree, commit, contents, None, skip=placed)

    def _has_entry(self, agent_id: str, revision: int) -> bool:
        return self.store.backend.exists(layout.log_key(agent_id, revision))

    def contents(self, commit: Commit, where: str) -> dict[str, bytes]:
        """The contents ``commit`` (log entry ``where``) writes, each checked."""
        contents: dict[str, bytes] = {}
        agent_id = commit.agent_id
        for change in commit.changes:
            if change.after is None:
                continue
            if change.content is not None:
                data = change.content.encode()
                contents[change.after] = verified(agent_id, change.after, data, where)
                continue
            key = layout.blob_key(agent_id, change.after)
            try:
                data = self.store.backend.get(key)
            except MissingObject:
                raise Damaged(agent_id, key, "content is missing") from None
            contents[change.after] = verified(agent_id, change.after, data, key)
        return contents

    # ---- the working tree ----------------------------------------------------------------

    def refuse_symlinks(self, agent_id: str, ops: Sequence[Op]) -> None:
        """A symlink on the way to a path a commit touches (or as the agent's folder or
        its .memfs) is refused before anything is written: memfs never follows one."""
        tree = self.tree(agent_id)
        tree.recheck()  # the folders kept open since the last commit, checked again
        tree.check_beside(".memfs")
        for op in ops:
            for path in (op.src, op.dst) if isinstance(op, Move) else (op.path,):
                tree.check(path)

    def tree(self, agent_id: str) -> WorkTree:
        """The agent's working tree, kept (with its open folders) for the next commit:
        reopening every folder of the way was most of a commit's system calls."""
        if not self.store.worktree:
            return NoTree(layout.worktree_root(self.store.data_dir, agent_id))
        with self._trees_lock:
            tree = self._trees.pop(agent_id, None)
            if tree is None:
                tree = WorkTree(layout.worktree_root(self.store.data_dir, agent_id))
                if len(self._trees) >= TREES_KEPT:
                    # The least recently used one (a dict keeps insertion order).
                    self._trees.pop(next(iter(self._trees))).close()
            self._trees[agent_id] = tree
            return tree

    def close(self) -> None:
        """Close the kept trees' folders (``Store.close``)."""
        self._stager.stop()
        with self._trees_lock:
            trees, self._trees = list(self._trees.values()), {}
        for tree in trees:
            tree.close()
