"""Start and stop real ``memfs serve`` processes for tests (and scripts) that need them.

A server runs as ``python -m memfs.cli serve`` on 127.0.0.1 and a free port, in a
session of its own (``start_new_session=True``), so its process group holds the
uvicorn master, its workers and multiprocessing's resource tracker: ``kill_hard``
SIGKILLs that whole group at once, as a power cut or the OOM killer would.
Everything is stopped by the ids this module started, never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import IO

import httpx

ADMIN_KEY = "test-admin-key-0123456789abcdef"
PROTOCOL = {"Memfs-Protocol": "1"}
START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0


def free_port() -> int:
    """A TCP port nothing listens on right now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def headers(key: str = ADMIN_KEY, **extra: str) -> dict[str, str]:
    """``Memfs-Protocol: 1`` and the bearer key, plus ``extra`` (underscores → dashes)."""
    out = {**PROTOCOL, "Authorization": f"Bearer {key}"}
    out.update({name.replace("_", "-"): value for name, value in extra.items()})
    return out


def memfs_cli(*args: str, data: Path, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run ``memfs ARGS --data DATA`` in a fresh process and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "memfs.cli", *args, "--data", str(data)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_clean_env(),
        check=False,
    )


def _clean_env(admin_key: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
    if admin_key is not None:
        env["MEMFS_ADMIN_KEY"] = admin_key
    env["PYTHONUNBUFFERED"] = "1"
    # No 503 drain after SIGTERM (each stop would take its seconds); the drain's own
    # test asks for one with --shutdown-drain-seconds.
    env["MEMFS_SHUTDOWN_DRAIN_SECONDS"] = "0"
    return env


class RealServer:
    """One ``memfs serve`` process group; use as a context manager or call ``stop``."""

    def __init__(
        self,
        data: Path,
        *,
        workers: int = 1,
        admin_key: str = ADMIN_KEY,
        log_path: Path | None = None,
        extra_args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        key_in_env: bool = True,
        wrapper: tuple[str, ...] = (),
    ) -> None:
        # A command the server runs under, e.g. ``unshare --uts …`` for another hostname.
        self.wrapper = wrapper
        self.data = data
        self.env = env or {}  # added to the server's (otherwise clean) environment
        self.workers = workers
        self.admin_key = admin_key
        # False: no MEMFS_ADMIN_KEY, the server reads data/admin.key (which the caller
        # wrote holding ``admin_key``), as a server started by an operator does.
        self.key_in_env = key_in_env
        self.log_path = log_path or data.parent / f"serve-{time.monotonic_ns()}.log"
        self.extra_args = extra_args
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    # ---- lifecycle --------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "server not started"
        return self.proc.pid

    def start(self) -> RealServer:
        """Start the server and wait until it answers; retries once on a port race."""
        for attempt in range(3):
            self.port = free_port()
            self._spawn()
            if self._wait_ready():
                return self
            self._reap(signal.SIGKILL)
            if attempt == 2 or "address already in use" not in self.log_text().lower():
                break
        raise RuntimeError(f"memfs serve did not become ready; its log:\n{self.log_text()}")

    def _spawn(self) -> None:
        self.data.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in _reap
        argv = [
            *self.wrapper,
            sys.executable,
            "-m",
            "memfs.cli",
            "serve",
            "--data",
            str(self.data),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            str(self.workers),
            *self.extra_args,
        ]
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**_clean_env(self.admin_key if self.key_in_env else None), **self.env},
            start_new_session=True,
        )

    def _wait_ready(self) -> bool:
        """Poll until every route answers (a 2xx from an authenticated /v1 route)."""
        assert self.proc is not None
        deadline = time.monotonic() + START_TIMEOUT
        with httpx.Client(base_url=self.url, timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    return False
                try:
                    response = client.get("/v1/agents", headers=headers(self.admin_key))
                    if response.status_code == 200:
                        return True
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        return False

    def stop(self, timeout: float = STOP_TIMEOUT) -> int:
        """SIGTERM the master, wait; SIGKILL the whole group if it lingers. Exit status."""
        if self.proc is None:
            return 0
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = self._reap(signal.SIGKILL)
        else:
            # The master is gone; a worker it failed to stop must not outlive the test.
            if self._group_alive():
                self._killpg(signal.SIGKILL)
            self._close()
        return code

    def kill_hard(self) -> int:
        """SIGKILL the master and every worker at the same instant (the process group)."""
        return self._reap(signal.SIGKILL)

    def _reap(self, sig: int) -> int:
        assert self.proc is not None
        self._killpg(sig)
        try:
            code = self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignorable
            self.proc.kill()
            code = self.proc.wait(timeout=STOP_TIMEOUT)
        self._wait_group_gone()
        self._close()
        return code

    def _killpg(self, sig: int) -> None:
        assert self.proc is not None
        # The session was created for this server: its group id is the master's pid.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def _group_members(self) -> list[int]:
        """Live (non-zombie) processes of the server's group, from /proc (Linux)."""
        assert self.proc is not None
        members: list[int] = []
        proc = Path("/proc")
        if not proc.is_dir():
            return members
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # pid (comm) state ppid pgrp ...: comm may hold spaces, so split after ')'.
            fields = stat.rsplit(")", 1)[-1].split()
            if len(fields) >= 3 and fields[0] != "Z" and int(fields[2]) == self.proc.pid:
                members.append(int(entry.name))
        return members

    def _group_alive(self) -> bool:
        return bool(self._group_members())

    def _wait_group_gone(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while self._group_alive() and time.monotonic() < deadline:
            time.sleep(0.02)

    def _close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    # ---- context manager ----------------------------------------------------------------

    def __enter__(self) -> RealServer:
        if self.proc is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the server if it still runs (teardown: never leaves a process behind)."""
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        elif self.proc is not None:
            if self._group_alive():
                self._killpg(signal.SIGKILL)
                self._wait_group_gone()
            self._close()

    def client(self, key: str | None = None, *, timeout: float = 30.0) -> httpx.Client:
        """A plain httpx client on this server: protocol header and bearer ``key`` (admin)."""
        return httpx.Client(
            base_url=self.url, headers=headers(key or self.admin_key), timeout=timeout
        )


@contextlib.contextmanager
def running(data: Path, *, workers: int = 1) -> Iterator[RealServer]:
    """``with running(tmp_path / "data", workers=2) as server: ...``"""
    server = RealServer(data, workers=workers)
    try:
        yield server.start()
    finally:
        server.close()
