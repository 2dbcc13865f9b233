"""Executing runs: claim an attempt, run the trigger's action, record how it ended.

Each server process runs one ``Runner`` loop. It picks runs that are queued, delayed
and due, or running under an owner that has died (a killed server): the dead
owner's attempt is recorded as interrupted, then the next attempt is claimed with
create-if-absent, so each attempt runs in exactly one process and never twice at
once. Failures retry with exponential backoff and jitter up to ``maxAttempts``.

Actions live in ``actions/``, one module each behind the protocol of ``actions/base``
(the runner asks its registry, by the trigger's ``action.type``): ``memory`` stores the
delivery as a memory; ``command`` runs a program in the sandbox. Every event the runner
appends is built by its constructor in ``domain/run_events``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from memfs.canonical.backend import Backend
from memfs.core import faults, leases, metrics, sandbox
from memfs.core import runs as runs_module
from memfs.core.actions.base import Action, Outcome, Registry
from memfs.core.actions.command import COMMANDS_DISABLED, CommandAction, attempt_key_id
from memfs.core.actions.memory import MemoryAction, memory_content, memory_path
from memfs.core.keys import KeyRing
from memfs.core.runs import Run, Runs
from memfs.core.store import Store
from memfs.core.triggers import Trigger, Triggers
from memfs.domain import run_events
from memfs.domain.commits import now_us
from memfs.errors import (
    Conflict,
    Forbidden,
    InvalidRequest,
    MemfsError,
    NotFound,
    PayloadTooLarge,
)

log = logging.getLogger("memfs.runner")

BACKOFF_CAP_S = 3600.0
# While new deliveries arrived within this many seconds, the runner yields to them
# (``Runner.ingesting``): deliveries and runs share the CPU, the disk and the index.
INGEST_QUIET_S = 0.5
# An agent's claimed runs are executed in batches of concurrency / WAVES (rounded up):
# a batch is sequential (its memory commits, in order) and records its ends together,
# so two batches in flight overlap one's commits with the other's claims and ends.
WAVES = 2
INTERRUPTIONS_FORGIVEN = 5  # bounded, so a command that kills its server can't loop
# Errors of a run's action that the same delivery would meet again on every attempt.
PERMANENT = (PayloadTooLarge, InvalidRequest, NotFound, Conflict, Forbidden)
# Names other modules (and tests) import from here, where they lived before actions/.
__all__ = ["COMMANDS_DISABLED", "Runner", "memory_content", "memory_path", "owner_record"]


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def owner_record() -> dict[str, Any]:
    pid = os.getpid()
    return {
        "host": socket.gethostname(),
        "bootId": sandbox.boot_id(),
        "pid": pid,
        "start": _start_time(pid),
    }


def owner_alive(owner: Mapping[str, Any] | None, backend: Backend | None = None) -> bool:
    """Whether the process that claimed an attempt still exists: on this host its pid
    tells; on another, its node lease in the shared bucket (core.leases)."""
    if owner is None:
        return False
    if owner.get("host") != socket.gethostname():
        node = owner.get("node")
        if backend is None or not isinstance(node, str):
            return True  # no lease to read: only its own host can tell
        return leases.alive(backend, node)
    if owner.get("bootId") != sandbox.boot_id():
        return False  # claimed before this machine rebooted
    pid = owner.get("pid")
    return isinstance(pid, int) and _start_time(pid) == owner.get("start")


def backoff_us(attempt: int, base_s: float) -> int:
    delay = min(BACKOFF_CAP_S, base_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5)
    return int(delay * 1_000_000)


class Runner:
    def __init__(
        self,
        store: Store,
        keys: KeyRing,
        *,
        base_url: str,
        concurrency: int,
        retry_base_s: float = 1.0,
        retention_hours: int = 72,
        command_grace_s: float = 5.0,
        allow_commands: bool = False,
        run_user: str = "nobody",
    ) -> None:
        self.allow_commands = allow_commands
        self.run_user = run_user
        self.store = store
        self.runs = Runs(store)
        self.triggers = Triggers(store.backend)
        self.keys = keys
        self.base_url = base_url
        self.retry_base_s = retry_base_s
        self.retention_us = retention_hours * 3600 * 1_000_000
        self.command_grace_s = command_grace_s
        self.slots = asyncio.Semaphore(concurrency)
        self.active: dict[str, asyncio.Task[None]] = {}
        self.wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None  # run_forever's
        self.last_delivery = float("-inf")  # time.monotonic() of the last new delivery
        self.owner = owner_record()
        # In a cluster (objects on S3, no working tree) servers on other hosts adopt a
        # dead server's attempts once its lease, renewed by this loop, has expired.
        self.lease = None if store.worktree else leases.Lease(store.backend, leases.node_id())
        if self.lease is not None:
            self.owner["node"] = self.lease.node
        self.concurrency = concurrency
        self.actions = Registry(
            [
                MemoryAction(store),
                CommandAction(
                    self.runs,
                    keys,
                    base_url=base_url,
                    allow_commands=allow_commands,
                    run_user=run_user,
                    grace_s=command_grace_s,
                ),
            ],
            default="memory",
        )

    def delivered(self) -> None:
        """A new delivery was accepted (called from any thread): its run is due.

        The loop is woken by the first delivery after a quiet spell only; while they
        keep arriving (``ingesting``) it polls on its tick only (not when a run ends)
        and starts one run per poll, so the executor's claims, events and memory
        commits never crowd out the deliveries' own batches. Runs still start (one
        per tick): yielding, not starving."""
        quiet = not self.ingesting()
        self.last_delivery = time.monotonic()
        if quiet and self._loop is not None:
            # asyncio.Event is not thread-safe: set it on the loop's own thread.
            self._loop.call_soon_threadsafe(self.wake.set)

    def ingesting(self) -> bool:
        """True while new deliveries arrive (one within INGEST_QUIET_S)."""
        return time.monotonic() - self.last_delivery < INGEST_QUIET_S

    async def run_forever(self, stop: asyncio.Event) -> None:
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self.runs.rescan)
        ticks = 0
        while not stop.is_set():
            if self.lease is not None:
                await self._renew(self.lease)
            if await self.poll_logged(collect=(ticks + 1) % 240 == 0):
                ticks += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=0.25)
            self.wake.clear()
        tasks = list(self.active.values())
        for task in tasks:
            task.cancel()
        # Wait for them: each stops its command (SIGTERM, then SIGKILL after the grace).
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _renew(self, lease: leases.Lease) -> None:
        try:
            await asyncio.to_thread(lease.renew)
        except Exception as exc:  # storage down: retried next tick, its 503s say why
            log.warning("runner lease renewal failed: %s", exc)
            if now_us() - lease.renewed_us > leases.TTL_S * 1_000_000:
                # Other servers may adopt our attempts now: stop them (never run twice).
                for task in list(self.active.values()):
                    task.cancel()

    async def poll_logged(self, *, collect: bool = False) -> bool:
        """One poll (and, with ``collect``, the retention sweep); a failure is logged
        and the loop goes on. False if it failed."""
        try:
            await self.poll()
            if collect:
                await asyncio.to_thread(self.runs.collect, now_us(), self.retention_us)
        except Exception as exc:
            if not faults.index_gone(exc):
                log.exception("runner poll failed")
                return False
            # Passing, and said once per poll: the rebuild brings the index back and
            # the next poll finds it; a traceback here would only bury the log.
            log.warning("runner poll skipped: the index is being rebuilt (%s)", exc)
            return False
        return True

    async def poll(self) -> None:
        free = self.concurrency - len(self.active)
        if self.ingesting():
            free = min(free, 1)  # yield to the deliveries arriving (see ``delivered``)
        if free <= 0:
            return
        # The due runs and their claims in one trip to a worker thread, where each was
        # a trip of its own (a run's hand-offs cost the event loop, which serves the
        # deliveries too, more than its claims: docs/benchmarks.md).
        loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._claim_due, free, frozenset(self.active), loop)

    def _claim_due(
        self, free: int, active: frozenset[str], loop: asyncio.AbstractEventLoop
    ) -> None:
        """Claim up to ``free`` of the due runs not in ``active``, oldest first, and
        start them on ``loop`` (each start is queued there before this call's answer,
        so ``poll`` returns with them in ``active``).

        The queued and due-again runs are claimed together (``Runs.claim_many``: their
        claims and ``claimed`` events share durable writes), and each agent's batch is
        started as one: its runs are executed in order and their ends recorded
        together (``_execute``). A running run (its owner may have died) is taken on
        its own, and started at once."""
        due = [run for run in self.runs.due(now_us(), 200) if run.run_id not in active]
        started = pos = 0
        while started < free and pos < len(due):
            batch: list[Run] = []
            while pos < len(due) and started + len(batch) < free:
                run, pos = due[pos], pos + 1
                if run.status != "running":
                    batch.append(run)
                    continue
                attempt = self._take(run)
                if attempt is not None:
                    started += 1
                    loop.call_soon_threadsafe(self._start, [(run, attempt)])
            won: dict[str, list[tuple[Run, int]]] = {}
            for run, claimed in zip(batch, self.runs.claim_many(batch, self.owner), strict=True):
                if claimed is None:
                    self._adopt_dead_claim(run)
                else:
                    started += 1
                    won.setdefault(run.agent_id, []).append((run, claimed))
            wave = max(1, -(-self.concurrency // WAVES))
            for pairs in won.values():
                for at in range(0, len(pairs), wave):
                    loop.call_soon_threadsafe(self._start, pairs[at : at + wave])

    def _start(self, pairs: list[tuple[Run, int]]) -> None:
        task = asyncio.create_task(self._execute(pairs))
        ids = [run.run_id for run, _ in pairs]
        for run_id in ids:
            self.active[run_id] = task
        task.add_done_callback(functools.partial(self._done, ids))

    def _done(self, run_ids: list[str], _task: asyncio.Task[None]) -> None:
        for run_id in run_ids:
            self.active.pop(run_id, None)

    def _take(self, run: Run) -> int | None:
        """Claim the next attempt of ``run`` if it is ours to run now."""
        if run.status == "running":
            owner = self.runs.owner(run)
            if owner_alive(owner, self.store.backend):
                return None
            dead = run.attempt
            run = self._finish(
                run,
                run.attempt,
                ok=False,
                exit_code=None,
                error=run_events.INTERRUPTED,
                expect="running",
            )
            self._discard_attempt(run, dead)
            if run.status != "queued" and not (
                run.status == "delayed" and (run.next_retry_at or 0) <= now_us()
            ):
                return None
        attempt = self.runs.claim(run, self.owner)
        if attempt is None:
            self._adopt_dead_claim(run)
        return attempt

    def _adopt_dead_claim(self, run: Run) -> None:
        """Record the claim of a process that died before its ``claimed`` event.

        A kill between winning the claim of attempt k and appending ``claimed`` would
        leave the run queued with attempt k unclaimable forever. Recording the claim
        makes it a running run with a dead owner: the next poll marks it interrupted
        and claims attempt k + 1.
        """
        attempt = run.attempt + 1
        owner = self.runs.owner(dataclasses.replace(run, attempt=attempt))
        if owner is None or owner_alive(owner, self.store.backend):
            return  # no claim, or its owner is alive and about to record it
        recorded = {k: v for k, v in owner.items() if k != "attempt"}

        def claimed(cur: Run | None) -> dict[str, Any] | None:
            if cur is None or cur.attempt >= attempt:
                return None
            return run_events.claimed(attempt, recorded)

        self.runs.append(run.agent_id, run.run_id, claimed)

    def _discard_attempt(self, run: Run, attempt: int) -> None:
        """Kill what is left of an attempt that died (its process group), revoke its key
        and remove its scratch folder."""
        group = self.runs.group(run, attempt)
        if group is not None:
            sandbox.kill_group(group, sandbox.boot_id())
            sandbox.remove_scratch(group.get("scratch"))
        with contextlib.suppress(MemfsError):
            self.keys.revoke(attempt_key_id(run.run_id, attempt))

    def _end(
        self,
        attempt: int,
        *,
        ok: bool,
        exit_code: int | None,
        error: str | None,
        expect: str,
        permanent: bool,
    ) -> tuple[runs_module.Make, list[bool]]:
        """The end event of ``attempt`` to append, and whether the one appended was
        this call's (set when it is decided)."""
        ours = [False]

        def make(cur: Run | None) -> dict[str, Any] | None:
            ours[0] = cur is not None and cur.status == expect and cur.attempt == attempt
            if cur is None or not ours[0]:
                return None
            if ok:
                return run_events.succeeded(attempt, exit_code)
            # An interrupted attempt (a shutdown or crash, not the action's fault) is not
            # counted against maxAttempts, up to INTERRUPTIONS_FORGIVEN of them, and is
            # retried at once.
            interrupted = run_events.is_interruption(error)
            allowed = cur.max_attempts + (INTERRUPTIONS_FORGIVEN if interrupted else 0)
            retry = attempt < allowed and not permanent
            retry_at = (
                now_us() + (0 if interrupted else backoff_us(attempt, self.retry_base_s))
                if retry
                else None
            )
            return run_events.failed(attempt, exit_code, error, retry_at)

        return make, ours

    def _output(self, run: Run, attempt: int, output: str, expect: str) -> None:
        self.runs.append(
            run.agent_id,
            run.run_id,
            lambda cur: (
                run_events.output(attempt, output)
                if cur is not None and cur.attempt == attempt and cur.status == expect
                else None
            ),
        )

    def _finish(
        self,
        run: Run,
        attempt: int,
        *,
        ok: bool,
        exit_code: int | None,
        error: str | None,
        output: str | None = None,
        expect: str = "running",
        permanent: bool = False,
    ) -> Run:
        make, ours = self._end(
            attempt, ok=ok, exit_code=exit_code, error=error, expect=expect, permanent=permanent
        )
        if output is not None:
            self._output(run, attempt, output, expect)
        result = self.runs.append(run.agent_id, run.run_id, make)
        assert result is not None
        if ours[0] and result.status == "delayed":
            # Once per failure, even when two workers found the same run interrupted.
            self.runs.note_retry(run.agent_id, run.run_id, attempt)
        return self.runs.get(run.agent_id, run.run_id)

    def _record(self, ends: list[tuple[Run, int, _Ended]]) -> None:
        """``_finish`` of each attempt, their end events appended together
        (``Runs.append_many``: a batch's ``succeeded`` events share one file)."""
        appends: list[runs_module.Append] = []
        flags: list[list[bool]] = []
        for run, attempt, end in ends:
            if end.output is not None:
                self._output(run, attempt, end.output, "running")
            make, ours = self._end(
                attempt,
                ok=end.ok,
                exit_code=end.exit_code,
                error=end.error,
                expect="running",
                permanent=end.permanent,
            )
            appends.append((run.agent_id, run.run_id, make))
            flags.append(ours)
        results = self.runs.append_many(appends)
        for (run, attempt, _), ours, result in zip(ends, flags, results, strict=True):
            if ours[0] and result is not None and result.status == "delayed":
                self.runs.note_retry(run.agent_id, run.run_id, attempt)

    async def _execute(self, pairs: list[tuple[Run, int]]) -> None:
        """Execute the claimed attempts ``pairs`` (runs of one agent, oldest first)."""
        held = 0
        try:
            for _ in pairs:
                await self.slots.acquire()
                held += 1
            # One trip to a worker thread reads what each attempt needs and, for an
            # action that is plain blocking work (memory), performs it, in order, and
            # records the ends together; only an action with a process to watch
            # (command) comes back to the loop to be awaited, then a second trip
            # records its end.
            halt = threading.Event()
            try:
                steps = await asyncio.to_thread(self._begin, pairs, halt)
            except asyncio.CancelledError:
                # Shutting down, or the lease lost: the thread finishes the attempt it
                # is in and starts no other of the batch (those are found interrupted
                # and retried, as an attempt cancelled on the loop is).
                halt.set()
                raise
            ends = [step for step in steps if isinstance(step, _Ended)]
            waiting = [
                (run, attempt, step)
                for (run, attempt), step in zip(pairs, steps, strict=True)
                if isinstance(step, _Prepared)
            ]
            if waiting:
                done = await asyncio.gather(*(self._perform(*item) for item in waiting))
                finished = [
                    (run, attempt, end)
                    for (run, attempt, _), end in zip(waiting, done, strict=True)
                ]
                await asyncio.to_thread(self._record, finished)
                ends += done
            for end in ends:
                metrics.run_attempt_done(end.action, end.ok, end.seconds)
        finally:
            for _ in range(held):
                self.slots.release()
        if not self.ingesting():  # else the next tick starts the next run
            self.wake.set()

    def _begin(
        self, pairs: list[tuple[Run, int]], halt: threading.Event | None = None
    ) -> list[_Ended | _Prepared]:
        """In a worker thread: for each attempt the trigger, the delivery and its body;
        a blocking action's attempt performed; then the ends of those recorded. Once
        ``halt`` is set no further attempt begins."""
        steps: list[_Ended | _Prepared] = []
        ended: list[tuple[Run, int, _Ended]] = []
        for run, attempt in pairs:
            if halt is not None and halt.is_set():
                break
            started, action = time.perf_counter(), "unknown"
            try:
                trigger = self.triggers.get(run.agent_id, run.trigger_id)
                delivery = self.runs.delivery(run)
                body = self.runs.body(delivery)
                chosen = self.actions.for_trigger(trigger)
                action = chosen.name
                # A ``BlockingAction`` (actions/base), told by its method: an isinstance
                # check of a runtime protocol costs tens of µs.
                blocking = getattr(chosen, "perform_blocking", None)
                if blocking is None:
                    steps.append(_Prepared(chosen, trigger, delivery, body, started))
                    continue
                end = _ended(action, blocking(run, attempt, trigger, delivery, body), started)
            except Exception as exc:
                end = _failed(action, run, attempt, exc, started)
            steps.append(end)
            ended.append((run, attempt, end))
        if ended:
            self._record(ended)
        return steps

    async def _perform(self, run: Run, attempt: int, step: _Prepared) -> _Ended:
        try:
            outcome = await step.action.perform(
                run, attempt, step.trigger, step.delivery, step.body
            )
        except asyncio.CancelledError:
            raise  # shutting down: the attempt will be found interrupted and retried
        except Exception as exc:
            return _failed(step.action.name, run, attempt, exc, step.started)
        return _ended(step.action.name, outcome, step.started)


@dataclasses.dataclass(frozen=True)
class _Prepared:
    """What an attempt of an action awaited on the loop needs."""

    action: Action
    trigger: Trigger
    delivery: dict[str, Any]
    body: bytes
    started: float  # time.perf_counter() when the attempt began


@dataclasses.dataclass(frozen=True)
class _Ended:
    """How an attempt ended, as the runner records it."""

    action: str  # the metrics label
    ok: bool
    exit_code: int | None = None
    error: str | None = None
    output: str | None = None
    permanent: bool = False
    seconds: float = 0.0  # how long the attempt took (the metrics' duration)


def _ended(action: str, outcome: Outcome, started: float) -> _Ended:
    return _Ended(
        action,
        outcome.ok,
        outcome.exit_code,
        outcome.error,
        outcome.output,
        seconds=time.perf_counter() - started,
    )


def _failed(action: str, run: Run, attempt: int, exc: Exception, started: float) -> _Ended:
    """The end of an attempt whose action (or its reading) raised ``exc``."""
    seconds = time.perf_counter() - started
    if isinstance(exc, PERMANENT):
        # Retrying can't help (too large, invalid, agent erased): fail at once.
        message = f"{exc.message} (permanent: not retried)"
        return _Ended(action, False, error=message, permanent=True, seconds=seconds)
    if isinstance(exc, MemfsError):
        return _Ended(action, False, error=exc.message, seconds=seconds)
    # A run must end, whatever its action did.
    log.error("run %s attempt %d crashed", run.run_id, attempt, exc_info=exc)
    return _Ended(action, False, error=f"internal error: {type(exc).__name__}", seconds=seconds)
