"""Helpers for tests of command actions, whose children run sandboxed.

When the tests run as root (as in CI), a command child runs as ``MEMFS_RUN_USER``
(``nobody``): it can't execute an interpreter under ``/root`` (a pyenv or venv
Python) nor write into pytest's ``tmp_path``. ``child_python()`` finds a Python that
user can run, and ``shared_folder()`` a folder it can write, for the test to read.
"""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

RUN_USER = "nobody"


def _runs_as_child(python: str) -> bool:
    kwargs: dict[str, object] = {}
    if os.geteuid() == 0:
        entry = pwd.getpwnam(RUN_USER)
        kwargs = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
    try:
        done = subprocess.run(  # type: ignore[call-overload]
            [python, "-c", "import json, os, subprocess, sys, time"],
            capture_output=True,
            timeout=60,
            cwd="/",
            check=False,
            **kwargs,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return bool(done.returncode == 0)


@functools.cache
def child_python() -> str:
    """A Python 3 the command children of a server can execute."""
    candidates = [sys.executable, "/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]
    for candidate in candidates:
        if os.path.exists(candidate) and _runs_as_child(candidate):
            return candidate
    pytest.fail(
        f"no Python the user {RUN_USER!r} can execute (tried {candidates}); the command tests"
        " run as root need one outside /root: apt-get install python3"
    )


@contextmanager
def shared_folder() -> Iterator[Path]:
    """A folder a command child (any user) can write, removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="memfs-test-"))
    os.chmod(folder, 0o1777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
