"""The command action (only with ``MEMFS_ALLOW_COMMANDS``): a program in the sandbox of
``sandbox.py`` with the body on stdin, a scratch folder per attempt, a key limited to
the agent's memories for the run's life, captured (capped) output, and a timeout that
kills the whole group."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from typing import Any

import aiofiles

from memfs.core import sandbox
from memfs.core.actions.base import Outcome
from memfs.core.keys import KeyRing
from memfs.core.runs import Run, Runs, cap_output
from memfs.core.triggers import Trigger
from memfs.errors import MemfsError

COMMANDS_DISABLED = (
    "command actions are disabled on this server: start it with MEMFS_ALLOW_COMMANDS=1"
    " (memfs serve --allow-commands) to run them"
)


def attempt_key_id(run_id: str, attempt: int) -> str:
    # The whole run id: a shortened one could give two runs the same key id.
    return f"run-{run_id[4:]}-a{attempt}"


async def _stop_group(proc: asyncio.subprocess.Process, grace_s: float) -> None:
    """SIGTERM a command's process group, SIGKILL it if still there after ``grace_s``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # what the command left behind, too
    await proc.wait()


class CommandAction:
    name = "command"

    def __init__(
        self,
        runs: Runs,
        keys: KeyRing,
        *,
        base_url: str,
        allow_commands: bool,
        run_user: str,
        grace_s: float,
    ) -> None:
        self.runs = runs
        self.keys = keys
        self.base_url = base_url
        self.allow_commands = allow_commands
        self.run_user = run_user
        self.grace_s = grace_s

    async def perform(
        self, run: Run, attempt: int, trigger: Trigger, delivery: dict[str, Any], body: bytes
    ) -> Outcome:
        if not self.allow_commands:
            # A command trigger written while commands were enabled (or by the CLI):
            # the server still refuses to execute it.
            return Outcome(False, None, COMMANDS_DISABLED, "")
        timeout = int(trigger.action.get("timeoutSeconds", 60))
        who = sandbox.run_as(self.run_user)
        workdir = await asyncio.to_thread(sandbox.scratch_dir, who)
        body_file = workdir / "delivery.body"
        # Up to MEMFS_WEBHOOK_BODY_BYTES written from the event loop: aiofiles keeps
        # the loop free while the bytes reach the file.
        async with aiofiles.open(body_file, "wb") as handle:
            await handle.write(body)
        sandbox.give(body_file, who)
        key_id = attempt_key_id(run.run_id, attempt)
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
            return Outcome(
                False, None, f"could not start {trigger.action['argv'][0]!r}: {reason}", ""
            )
        # The child leads its own group (a new session): pgid == pid. Recorded so that a
        # worker finding this server dead kills what the attempt forked.
        await asyncio.to_thread(
            self.runs.record_group,
            run,
            attempt,
            {"pgid": proc.pid, "bootId": sandbox.boot_id(), "scratch": str(workdir)},
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
            await _stop_group(proc, self.grace_s)
            raise
        finally:
            # Whatever the child forked and left behind dies with the attempt.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(MemfsError):
                await asyncio.to_thread(self.keys.revoke, key_id)
            sandbox.remove_scratch(workdir)
        return Outcome(ok, code, error, cap_output(out))
