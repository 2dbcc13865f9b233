"""A real ``memfs serve`` in a child process, for tests that speak HTTP to it.

Imported by test modules (pytest puts ``tests/`` on ``sys.path``); each module
starts its own server in a module-scoped fixture and stops it by its PID.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import httpx

ADMIN_KEY = "mfs_admin~test-admin-key-0123456789"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class MemfsServer:
    """``memfs --data DATA serve`` on 127.0.0.1 and a free port, admin key set."""

    def __init__(self, data: Path, **env: str) -> None:
        self.data = data
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.admin_key = ADMIN_KEY
        self.log_path = data.parent / f"{data.name}-server.log"
        self._log: IO[bytes] = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from memfs.cli import main; sys.exit(main())",
                "--data",
                str(data),
                "serve",
                "--port",
                str(self.port),
            ],
            env={
                **os.environ,
                "MEMFS_ADMIN_KEY": ADMIN_KEY,
                "MEMFS_SHUTDOWN_DRAIN_SECONDS": "0",  # stops at once (no 503 drain)
                **env,
            },
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"memfs serve exited early:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/openapi.json", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"memfs serve not ready after {timeout}s:\n{self.log()}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM to our child's PID, SIGKILL if it lingers."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._log.close()
