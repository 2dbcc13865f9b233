"""Run ``memfs`` command lines as forked processes of one that imported memfs once.

Each command runs in its own child process (its own pid, stdin/stdout/stderr file
descriptors, environment, working folder and exit status) exactly as
``python -m memfs.cli ARGS`` would, minus the interpreter start-up and imports,
which cost ~0.3 s per command on a small machine. The tests keep a few invocations on
the real ``python -m memfs.cli`` path, and ``MEMFS_TEST_REAL_CLI=1`` sends all of
them there.

Protocol (one JSON line each way on stdin/stdout):
  request  {"calls": [{"args": [...], "stdin": b64, "env": {...}, "cwd": str|null}, ...]}
  response {"results": [{"code": int, "out": b64, "err": b64}, ...]}
The calls of one request are forked first and then released together, so they race.
"""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import sys
import tempfile
import time
import traceback
from typing import Any

from memfs import cli

WAIT = 120.0


def _child(call: dict[str, Any], fds: tuple[int, int, int], gate: tuple[int, int]) -> None:
    """In the forked child: wait at the gate, become ``memfs ARGS``, never return."""
    code = 1
    try:
        os.close(gate[1])
        os.read(gate[0], 1)  # end of file once the server forked every sibling
        os.close(gate[0])
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        # Fresh standard streams: the server's may hold buffered protocol bytes.
        like = sys.__stdout__
        encoding = like.encoding if like is not None else "utf-8"
        sys.stdin = io.TextIOWrapper(
            io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding=encoding
        )
        sys.stdout = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding=encoding
        )
        sys.stderr = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
            encoding=encoding,
            errors="backslashreplace",
            line_buffering=True,
        )
        os.environ.pop("MEMFS_DATA", None)
        os.environ.update(call["env"])
        if call["cwd"]:
            os.chdir(call["cwd"])
        try:
            code = cli.main(call["args"])
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _run(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    started = []
    gate = os.pipe()  # every child blocks on it until all are forked: they start together
    for call in calls:
        files = [tempfile.TemporaryFile() for _ in range(3)]  # noqa: SIM115 (closed below)
        files[0].write(base64.b64decode(call["stdin"]))
        files[0].seek(0)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(call, (files[0].fileno(), files[1].fileno(), files[2].fileno()), gate)
        started.append((pid, files))
    os.close(gate[0])
    os.close(gate[1])
    results = []
    deadline = time.monotonic() + WAIT
    for pid, files in started:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
            time.sleep(0.002)
        files[1].seek(0)
        files[2].seek(0)
        out, err = files[1].read(), files[2].read()
        for f in files:
            f.close()
        results.append(
            {
                "code": os.waitstatus_to_exitcode(status),
                "out": base64.b64encode(out).decode(),
                "err": base64.b64encode(err).decode(),
            }
        )
    return results


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.write(json.dumps({"results": _run(request["calls"])}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
