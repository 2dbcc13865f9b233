"""Run a piece of a test in a forked child of the test process (shared by the fork tests)."""

from __future__ import annotations

import os
from collections.abc import Callable


def in_forked_child(work: Callable[[], str]) -> str:
    """What ``work`` returned, run in a forked child: it shares this process's open
    files and a copy of its memory, but none of its other threads. The child never
    returns into pytest (``os._exit``); a child that raised fails the test here."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, never return into pytest
        code = 1
        try:
            os.close(read)
            os.write(write, work().encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        report = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the forked child failed"
    return report
