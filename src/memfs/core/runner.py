"""Executing runs: claim an attempt, run the trigger's action, record how it ended.

Each server process runs one ``Runner`` loop. It picks runs that are queued, delayed
and due, or running under an owner that has died (a killed server): the dead
owner's attempt is recorded as interrupted, then the next attempt is claimed with
create-if-absent, so each attempt runs in exactly one process and never twice at
once. Failures retry with exponential backoff and jitter up to ``maxAttempts``.

Actions: ``memory`` stores the delivery as a memory (actor ``run:<id>``);
``command`` (only with ``MEMFS_ALLOW_COMMANDS``) runs a program in the sandbox of
``sandbox.py`` with the body on stdin, a scratch folder per attempt, a key limited to
the agent's memories for the run's life, captured (capped) output, and a timeout that
kills the whole group.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import functools
import logging
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiofiles

from memfs.core import metrics, sandbox
from memfs.core.keys import KeyRing
from memfs.core.runs import Run, Runs, cap_output
from memfs.core.store import Store
from memfs.core.triggers import Trigger, Triggers
from memfs.domain import paths
from memfs.domain.commits import format_ts, now_us
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
INTERRUPTIONS_FORGIVEN = 5  # bounded, so a command that kills its server can't loop
# Errors of a run's action that the same delivery would meet again on every attempt.
PERMANENT = (PayloadTooLarge, InvalidRequest, NotFound, Conflict, Forbidden)
COMMANDS_DISABLED = (
    "command actions are disabled on this server: start it with MEMFS_ALLOW_COMMANDS=1"
    " (memfs serve --allow-commands) to run them"
)


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


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
        "bootId": _boot_id(),
        "pid": pid,
        "start": _start_time(pid),
    }


def owner_alive(owner: Mapping[str, Any] | None) -> bool:
    """Whether the process that claimed an attempt still exists (this host only)."""
    if owner is None:
        return False
    if owner.get("host") != socket.gethostname():
        return True  # another node: only a lease could tell (single node for now)
    if owner.get("bootId") != _boot_id():
        return False  # claimed before this machine rebooted
    pid = owner.get("pid")
    return isinstance(pid, int) and _start_time(pid) == owner.get("start")


def backoff_us(attempt: int, base_s: float) -> int:
    delay = min(BACKOFF_CAP_S, base_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.5)
    return int(delay * 1_000_000)


async def _stop_group(proc: asyncio.subprocess.Process, grace_s: float) -> None:
    """SIGTERM a command's process group, SIGKILL it if still there after ``grace_s``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # what the command left behind, too
    await proc.wait()


def memory_content(trigger: Trigger, delivery: dict[str, Any], body: bytes) -> bytes:
    """A delivery as a memory: frontmatter with the prompt and delivery facts, then the body."""
    import yaml

    media = str(delivery.get("contentType") or "application/octet-stream")
    meta = {
        "description": f"webhook {delivery['webhookId']} for trigger {trigger.trigger_id}",
        "prompt": trigger.prompt,
        "webhookId": delivery["webhookId"],
        "triggerId": trigger.trigger_id,
        "contentType": media,
        "receivedAt": format_ts(int(delivery["receivedAt"])),
    }
    head = "---\n" + yaml.safe_dump(meta, allow_unicode=True, sort_keys=False) + "---\n"
    try:
        text = body.decode("utf-8")
        if "\x00" in text:
            raise UnicodeDecodeError("utf-8", body, 0, 1, "NUL")
    except UnicodeDecodeError:
        encoded = base64.encodebytes(body).decode()
        text = f"Binary body ({media}, {len(body)} bytes), base64:\n\n```base64\n{encoded}```\n"
    return (head + text).encode()


def memory_path(trigger: Trigger, webhook_id: str) -> str:
    """Where a delivery is stored: distinct webhook ids always give distinct paths."""
    template = str(trigger.action.get("path"))
    return paths.memory_path(
        template.replace("{triggerId}", paths.id_segment(trigger.trigger_id)).replace(
            "{webhookId}", paths.id_segment(webhook_id)
        )
    )


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
        self.owner = owner_record()
        self.concurrency = concurrency

    async def run_forever(self, stop: asyncio.Event) -> None:
        await asyncio.to_thread(self.runs.rescan)
        ticks = 0
        while not stop.is_set():
            try:
                await self.poll()
                ticks += 1
                if ticks % 240 == 0:
                    await asyncio.to_thread(self.runs.collect, now_us(), self.retention_us)
            except Exception:
                log.exception("runner poll failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=0.25)
            self.wake.clear()
        tasks = list(self.active.values())
        for task in tasks:
            task.cancel()
        # Wait for them: each stops its command (SIGTERM, then SIGKILL after the grace).
        await asyncio.gather(*tasks, return_exceptions=True)

    async def poll(self) -> None:
        free = self.concurrency - len(self.active)
        if free <= 0:
            return
        for run in await asyncio.to_thread(self.runs.due, now_us(), 200):
            if free <= 0:
                break
            if run.run_id in self.active:
                continue
            attempt = await asyncio.to_thread(self._take, run)
            if attempt is None:
                continue
            free -= 1
            task = asyncio.create_task(self._execute(run, attempt))
            self.active[run.run_id] = task
            task.add_done_callback(functools.partial(self._done, run.run_id))

    def _done(self, run_id: str, _task: asyncio.Task[None]) -> None:
        self.active.pop(run_id, None)

    def _take(self, run: Run) -> int | None:
        """Claim the next attempt of ``run`` if it is ours to run now."""
        if run.status == "running":
            owner = self.runs.owner(run)
            if owner_alive(owner):
                return None
            dead = run.attempt
            run = self._finish(
                run,
                run.attempt,
                ok=False,
                exit_code=None,
                error="interrupted: the process running it stopped",
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
        if owner is None or owner_alive(owner):
            return  # no claim, or its owner is alive and about to record it
        recorded = {k: v for k, v in owner.items() if k != "attempt"}

        def claimed(cur: Run | None) -> dict[str, Any] | None:
            if cur is None or cur.attempt >= attempt:
                return None
            return {"type": "claimed", "attempt": attempt, "owner": recorded}

        self.runs.append(run.agent_id, run.run_id, claimed)

    def _discard_attempt(self, run: Run, attempt: int) -> None:
        """Kill what is left of an attempt that died (its process group), revoke its key
        and remove its scratch folder."""
        group = self.runs.group(run, attempt)
        if group is not None:
            sandbox.kill_group(group, _boot_id())
            sandbox.remove_scratch(group.get("scratch"))
        with contextlib.suppress(MemfsError):
            self.keys.revoke(_attempt_key_id(run.run_id, attempt))

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
        ours = [False]  # whether the end event appended is this call's

        def make(cur: Run | None) -> dict[str, Any] | None:
            ours[0] = cur is not None and cur.status == expect and cur.attempt == attempt
            if cur is None or not ours[0]:
                return None
            if ok:
                return {"type": "succeeded", "attempt": attempt, "exitCode": exit_code}
            # An interrupted attempt (a shutdown or crash, not the action's fault) is not
            # counted against maxAttempts, up to INTERRUPTIONS_FORGIVEN of them.
            interrupted = "interrupted" in (error or "")
            allowed = cur.max_attempts + (INTERRUPTIONS_FORGIVEN if interrupted else 0)
            retry = attempt < allowed and not permanent
            return {
                "type": "failed",
                "attempt": attempt,
                "exitCode": exit_code,
                "error": error,
                "nextRetryAt": now_us()
                + (
                    backoff_us(attempt, self.retry_base_s)
                    if "interrupted" not in (error or "")
                    else 0
                )
                if retry
                else None,
            }

        if output is not None:
            self.runs.append(
                run.agent_id,
                run.run_id,
                lambda cur: (
                    {"type": "output", "attempt": attempt, "output": output}
                    if cur is not None and cur.attempt == attempt and cur.status == expect
                    else None
                ),
            )
        result = self.runs.append(run.agent_id, run.run_id, make)
        assert result is not None
        if ours[0] and result.status == "delayed":
            retry_at = result.next_retry_at

            def scheduled(cur: Run | None) -> dict[str, Any] | None:
                # Once per failure, even when two workers found the same run interrupted.
                if cur is None or cur.status != "delayed" or cur.attempt != attempt:
                    return None
                return {"type": "retry_scheduled", "attempt": attempt, "nextRetryAt": retry_at}

            self.runs.append(run.agent_id, run.run_id, scheduled)
        return self.runs.get(run.agent_id, run.run_id)

    async def _execute(self, run: Run, attempt: int) -> None:
        async with self.slots:
            ok, code, error, output = False, None, None, None
            started, action = time.perf_counter(), "unknown"
            permanent = False
            try:
                trigger = await asyncio.to_thread(self.triggers.get, run.agent_id, run.trigger_id)
                delivery = await asyncio.to_thread(self.runs.delivery, run)
                body = self.runs.body(delivery)
                action = "command" if trigger.action.get("type") == "command" else "memory"
                if action == "command":
                    ok, code, error, output = await self._command(
                        run, attempt, trigger, delivery, body
                    )
                else:
                    await asyncio.to_thread(self._memory, run, trigger, delivery, body)
                    ok = True
            except PERMANENT as exc:
                # Retrying can't help (too large, invalid, agent erased): fail at once.
                error, permanent = f"{exc.message} (permanent: not retried)", True
            except MemfsError as exc:
                error = exc.message
            except asyncio.CancelledError:
                raise  # shutting down: the attempt will be found interrupted and retried
            except Exception as exc:  # a run must end, whatever its action did
                log.exception("run %s attempt %d crashed", run.run_id, attempt)
                error = f"internal error: {type(exc).__name__}"
            metrics.run_attempt_done(action, ok, time.perf_counter() - started)
            await asyncio.to_thread(
                functools.partial(
                    self._finish,
                    run,
                    attempt,
                    ok=ok,
                    exit_code=code,
                    error=error,
                    output=output,
                    permanent=permanent,
                )
            )
            self.wake.set()

    def _memory(self, run: Run, trigger: Trigger, delivery: dict[str, Any], body: bytes) -> None:
        content = memory_content(trigger, delivery, body)
        self.store.write(
            run.agent_id,
            memory_path(trigger, run.webhook_id),
            content,
            actor=f"run:{run.run_id}",
            message=f"webhook {run.webhook_id} via trigger {trigger.trigger_id}",
        )

    async def _command(
        self, run: Run, attempt: int, trigger: Trigger, delivery: dict[str, Any], body: bytes
    ) -> tuple[bool, int | None, str | None, str]:
        if not self.allow_commands:
            # A command trigger written while commands were enabled (or by the CLI):
            # the server still refuses to execute it.
            return False, None, COMMANDS_DISABLED, ""
        timeout = int(trigger.action.get("timeoutSeconds", 60))
        who = sandbox.run_as(self.run_user)
        workdir = await asyncio.to_thread(sandbox.scratch_dir, who)
        body_file = workdir / "delivery.body"
        # Up to MEMFS_WEBHOOK_BODY_BYTES written from the event loop: aiofiles keeps
        # the loop free while the bytes reach the file.
        async with aiofiles.open(body_file, "wb") as handle:
            await handle.write(body)
        sandbox.give(body_file, who)
        key_id = _attempt_key_id(run.run_id, attempt)
        _key, secret = await asyncio.to_thread(
            self.keys.create,
            key_id,
            ["memories:read", "memories:write", f"agents:{run.agent_id}"],
            f"run {run.run_id} attempt {attempt}",
            actor=f"run:{run.run_id}",
        )
        env = sandbox.child_env(
            {
                "MEMFS_URL": self.base_url,
                "MEMFS_TOKEN": secret,
                "MEMFS_AGENT_ID": run.agent_id,
                "MEMFS_RUN_ID": run.run_id,
                "MEMFS_TRIGGER_ID": run.trigger_id,
                "MEMFS_WEBHOOK_ID": run.webhook_id,
                "MEMFS_PROMPT": trigger.prompt,
                "MEMFS_CONTENT_TYPE": str(delivery.get("contentType") or ""),
                "MEMFS_ATTEMPT": str(attempt),
                "MEMFS_BODY_FILE": str(body_file),
            },
            workdir,
        )
        try:
            # stdin is the body file, not a pipe fed by communicate(): a program that exits
            # without reading its stdin would make that write fail (uvloop raises
            # RuntimeError on the closed pipe) and a successful run would end as crashed.
            with open(body_file, "rb") as stdin:
                proc = await asyncio.create_subprocess_exec(
                    *trigger.action["argv"],
                    stdin=stdin,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.STDOUT,
                    cwd=workdir,
                    env=env,
                    **sandbox.popen_args(who, os.getpid(), timeout),
                )
        except (OSError, subprocess.SubprocessError) as exc:
            await asyncio.to_thread(self.keys.revoke, key_id)
            sandbox.remove_scratch(workdir)
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            return False, None, f"could not start {trigger.action['argv'][0]!r}: {reason}", ""
        # The child leads its own group (a new session): pgid == pid. Recorded so that a
        # worker finding this server dead kills what the attempt forked.
        await asyncio.to_thread(
            self.runs.record_group,
            run,
            attempt,
            {"pgid": proc.pid, "bootId": _boot_id(), "scratch": str(workdir)},
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), timeout=timeout)
            code = proc.returncode
            ok = code == 0
            error = None if ok else f"exit code {code}"
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out = b""
            with contextlib.suppress(Exception):
                out = await asyncio.wait_for(proc.stdout.read(), 5) if proc.stdout else b""
            await proc.wait()
            ok, code, error = False, None, f"timed out after {timeout} s; process group killed"
        except asyncio.CancelledError:
            # Shutting down: the command may end cleanly within the grace period. The
            # attempt is found interrupted at the next start and retried, uncounted.
            await _stop_group(proc, self.command_grace_s)
            raise
        finally:
            # Whatever the child forked and left behind dies with the attempt.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(MemfsError):
                await asyncio.to_thread(self.keys.revoke, key_id)
            sandbox.remove_scratch(workdir)
        return ok, code, error, cap_output(out)


def _attempt_key_id(run_id: str, attempt: int) -> str:
    # The whole run id: a shortened one could give two runs the same key id.
    return f"run-{run_id[4:]}-a{attempt}"
