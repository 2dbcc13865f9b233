"""Test-only fault points, for the durability tests' real processes (tests/test_group_commit.py).

Off unless the environment variable ``MEMFS_TEST_FAULT`` is set; never set it in
production. It names one fault:

- ``after-durable-before-ack:N``: the first N commits of the process whose log entry is
  durable go on; every later one stops right there (its entry durable, not indexed, not
  acknowledged) and waits forever, after appending a line to the file
  ``MEMFS_TEST_FAULT_FILE`` (if set) so a test knows when to kill -9 the process;
- ``after-tree-before-index:N``: as ``after-durable-before-ack``, one step later: the
  commit's tree files are in place too (``Committer._place_tree``), its entry not yet
  indexed;
- ``log-fsync-eio``: every ``os.fsync``/``os.fdatasync`` of a file or folder of an
  agent's log (``…/.memfs/log``) fails with EIO, as a failing disk does, so no log entry
  can be made durable;
- ``delivery-durable-before-ack:N``: as ``after-durable-before-ack``, for the delivery
  records of ``core/delivery_records.py``: the first N records made durable go on, then
  the batch holding the next one stops once it is durable (not indexed, no 202 sent);
- ``delivery-fsync-eio``: as ``log-fsync-eio``, for the files and folders of delivery
  records (``…/.memfs/deliveries``).
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable

AFTER_DURABLE = "after-durable-before-ack"
AFTER_TREE = "after-tree-before-index"
LOG_FSYNC_EIO = "log-fsync-eio"
DELIVERY_DURABLE = "delivery-durable-before-ack"
DELIVERY_FSYNC_EIO = "delivery-fsync-eio"
# The folders whose fsyncs each EIO fault fails.
_FAILING = {LOG_FSYNC_EIO: "/.memfs/log", DELIVERY_FSYNC_EIO: "/.memfs/deliveries"}

_mutex = threading.Lock()
_passed = 0
_installed = False


def _spec() -> tuple[str, int]:
    name, _, count = os.environ.get("MEMFS_TEST_FAULT", "").partition(":")
    return name, int(count) if count.isdigit() else 0


def reached(point: str) -> None:
    """Called by the code at fault point ``point``: stops this thread there for good
    when the environment asks for it (the test kills the process)."""
    name, allowed = _spec()
    if name != point:
        return
    global _passed
    with _mutex:
        _passed += 1
        if _passed <= allowed:
            return
        marker = os.environ.get("MEMFS_TEST_FAULT_FILE")
        if marker:
            with open(marker, "a") as out:
                out.write(f"{os.getpid()} {point}\n")
    threading.Event().wait()


def install() -> None:
    """Make the log's (or the delivery records') fsyncs fail with EIO when
    ``MEMFS_TEST_FAULT`` is ``log-fsync-eio`` (or ``delivery-fsync-eio``)."""
    global _installed
    folder = _FAILING.get(_spec()[0])
    if _installed or folder is None:
        return
    _installed = True
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name)
        setattr(os, name, _failing(real, folder))


def _failing(real: Callable[[int], None], folder: str) -> Callable[[int], None]:
    def sync(fd: int) -> None:
        try:
            where = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            where = ""
        if folder in where:
            raise OSError(errno.EIO, os.strerror(errno.EIO), where)
        real(fd)

    return sync
