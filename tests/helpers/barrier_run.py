"""Run a memfs command line or a writer loop at the same instant as its siblings.

Usage:
  barrier_run.py BARRIER_DIR NAME cli ARGS...      memfs.cli.main(ARGS), exit with its code
  barrier_run.py BARRIER_DIR NAME write DATA AGENT FOLDER COUNT
      write COUNT memories FOLDER/n<i>.md through one Store, printing each acknowledged
      one as a JSON line {"path", "sha", "rev"}

Everything is imported first; then the process announces itself with the file
BARRIER_DIR/ready-NAME and waits for BARRIER_DIR/go, so that all siblings hit the
store together rather than in the order they happened to start.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from memfs.cli import main as cli_main
from memfs.core.store import Store

WAIT = 120.0


def _barrier(folder: Path, name: str) -> None:
    (folder / f"ready-{name}").touch()
    deadline = time.monotonic() + WAIT
    while not (folder / "go").exists():
        if time.monotonic() > deadline:
            sys.exit("barrier_run: no go signal")
        time.sleep(0.001)


def content(folder: str, i: int) -> bytes:
    """What writer loop FOLDER writes at index i (every fourth one > 16 KiB)."""
    text = f"---\ndescription: {folder} note {i}\n---\n# {folder} {i}\n"
    if i % 4 == 3:
        text += (f"{folder}-{i} " * 2000)[: 17 * 1024] + "\n"
    return text.encode()


def _write(data: Path, agent: str, folder: str, count: int) -> None:
    store = Store(data)
    try:
        for i in range(count):
            path = f"/memories/{folder}/n{i}.md"
            result = store.write(agent, path, content(folder, i), actor=folder)
            line = {"path": path, "sha": result.memory.sha256, "rev": result.revision}
            sys.stdout.write(json.dumps(line) + "\n")
            sys.stdout.flush()
    finally:
        store.close()


def main() -> int:
    folder, name, mode, *rest = sys.argv[1:]
    _barrier(Path(folder), name)
    if mode == "cli":
        return cli_main(rest)
    data, agent, prefix, count = rest
    _write(Path(data), agent, prefix, int(count))
    return 0


if __name__ == "__main__":
    sys.exit(main())
