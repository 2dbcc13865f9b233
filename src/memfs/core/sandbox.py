"""The sandbox of command actions: who a child runs as, what it sees, what it may use.

A command child gets a clean environment (the documented ``MEMFS_*`` run variables,
``PATH``, ``LANG``, and ``HOME`` set to its scratch folder), its own session and
process group, rlimits on CPU seconds, file size and open files, and dies with the
server (``PR_SET_PDEATHSIG``). When the server runs as root the child runs as
``MEMFS_RUN_USER`` (never root); the data folder is 0700, so that user can't read
it. The server makes itself non-dumpable, so a child of the same uid can't read its
``/proc/<pid>/environ`` or memory (where ``MEMFS_ADMIN_KEY`` would be).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import pwd
import resource
import shutil
import signal
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memfs.errors import MemfsError

_PR_SET_PDEATHSIG = 1
_PR_GET_DUMPABLE = 3
_PR_SET_DUMPABLE = 4

# Limits of a command child, on top of its timeout. CPU seconds are the timeout plus
# this slack (a busy child is killed by the kernel even if the server is stuck).
CPU_SLACK_SECONDS = 5
FILE_BYTES = 256 * 1024 * 1024  # largest file a child may write
OPEN_FILES = 256


def _load_prctl() -> Any:
    # Resolved in the server, before any fork: loading a library in the forked child
    # of a threaded process could deadlock on the loader's lock.
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()


def harden_server() -> bool:
    """Make this process non-dumpable (Linux): its ``/proc/<pid>/environ`` and memory
    become unreadable by other processes of the same uid. True if it took effect."""
    if _PRCTL is None:
        return False
    return int(_PRCTL(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0


def is_dumpable() -> bool | None:
    """Whether this process is dumpable; None where prctl is unavailable."""
    if _PRCTL is None:
        return None
    return int(_PRCTL(_PR_GET_DUMPABLE, 0, 0, 0, 0)) == 1


@dataclass(frozen=True)
class RunAs:
    """The credentials of a child: None for the server's own (it is not root)."""

    uid: int | None = None
    gid: int | None = None


def run_as(user: str) -> RunAs:
    """Whom a child runs as: ``user`` when the server is root, else the server's uid."""
    if os.geteuid() != 0:
        return RunAs()
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise MemfsError(
            f"MEMFS_RUN_USER={user!r} does not exist; create that user or set another"
        ) from None
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise MemfsError(f"MEMFS_RUN_USER={user!r} is root; commands never run as root")
    return RunAs(entry.pw_uid, entry.pw_gid)


def start_warning(allow_commands: bool, user: str) -> str | None:
    """What ``memfs serve`` warns about at start, given its command settings."""
    if not allow_commands:
        return None
    if os.geteuid() != 0:
        return (
            f"command actions run as this server's own user (uid {os.geteuid()}) and can "
            "change what it can; run memfs under a dedicated user, or start it as root "
            "so commands run as MEMFS_RUN_USER"
        )
    try:
        run_as(user)
    except MemfsError as exc:
        return f"{exc.message}: command runs will fail"
    return None


def child_env(run_vars: Mapping[str, str], home: Path) -> dict[str, str]:
    """The whole environment of a child: nothing else of the server's is passed on."""
    return {
        "PATH": os.environ.get("PATH") or os.defpath,
        "LANG": os.environ.get("LANG") or "C.UTF-8",
        "HOME": str(home),
        **run_vars,
    }


def scratch_dir(who: RunAs) -> Path:
    """A fresh private folder for one attempt, outside the data folder, owned by the
    child's user (the data folder is 0700: that user can't enter it)."""
    folder = Path(tempfile.mkdtemp(prefix="memfs-run-"))
    if who.uid is not None and who.gid is not None:
        os.chown(folder, who.uid, who.gid)
    return folder


def give(path: Path, who: RunAs) -> None:
    """Hand a file made by the server (in a scratch folder) to the child's user."""
    if who.uid is not None and who.gid is not None:
        os.chown(path, who.uid, who.gid)


def remove_scratch(folder: str | Path | None) -> None:
    if folder and Path(folder).name.startswith("memfs-run-"):
        shutil.rmtree(folder, ignore_errors=True)


def popen_args(who: RunAs, parent_pid: int, timeout_s: int) -> dict[str, Any]:
    """Keyword arguments for ``subprocess``/``asyncio`` to start a sandboxed child."""
    # The switch of user is made in preexec_fn, not with Popen's user=/group=: uvloop's
    # subprocess_exec (the server's loop) does not take those arguments.
    return {
        "start_new_session": True,  # its own process group: a timeout kills all of it
        "preexec_fn": functools.partial(
            _in_child, parent_pid, timeout_s + CPU_SLACK_SECONDS, who.uid, who.gid
        ),
    }


def _lower(limit: int, value: int) -> None:
    _soft, hard = resource.getrlimit(limit)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(limit, (value, value))


def _in_child(parent: int, cpu_seconds: int, uid: int | None, gid: int | None) -> None:
    # Runs between fork and exec. The user is switched first: a credential change
    # clears PDEATHSIG, so it is armed after it.
    if uid is not None and gid is not None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        if os.getuid() == 0 or os.geteuid() == 0:
            os._exit(126)  # never run a command as root
    _lower(resource.RLIMIT_CPU, cpu_seconds)
    _lower(resource.RLIMIT_FSIZE, FILE_BYTES)
    _lower(resource.RLIMIT_NOFILE, OPEN_FILES)
    # If the server is killed (kill -9), its command children die with it, so a
    # retried attempt never runs beside an orphan of the previous one.
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)  # the server died between fork and prctl: the signal was never armed


def boot_id() -> str:
    """This boot of the machine: a process group recorded under another one is gone."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def kill_group(record: Mapping[str, Any], boot_id: str) -> None:
    """SIGKILL the process group a dead attempt recorded (its forked grandchildren
    survive PDEATHSIG), unless the machine rebooted since (the id may be reused)."""
    pgid = record.get("pgid")
    if not isinstance(pgid, int) or pgid <= 1 or record.get("bootId") != boot_id:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
