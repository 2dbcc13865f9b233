"""A real PostgreSQL server for the tests that need one: ``postgres_server`` (session).

It runs the system's binaries (Debian's ``postgresql`` package puts them in
/usr/lib/postgresql/<major>/bin), else those of the ``pgserver`` wheel (a dev
dependency: a fresh machine gets PostgreSQL through pip), on 127.0.0.1 and a free port, over a cluster made by
``initdb`` in a fresh temporary folder, with fsync off (the cluster is thrown away).
PostgreSQL refuses to run as root, and tests run as root here and in CI: the cluster is
then owned by and run as ``nobody``. Stopped by the PID this module started.

Each test takes a database of its own from ``PostgresServer.new_database()`` (CREATE
DATABASE is a file copy of template1: a few tens of milliseconds).
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

INSTALL = (
    "pip install -e '.[dev]' (the pgserver wheel bundles initdb and postgres), or"
    " apt-get install -y postgresql; MEMFS_PG_BIN=FOLDER or MEMFS_PG_BIN=pgserver chooses"
)
START_TIMEOUT = 60.0


def find_binaries() -> Path | None:
    """The folder holding initdb and postgres.

    ``MEMFS_PG_BIN`` chooses: a folder, or ``pgserver`` for the binaries the ``pgserver``
    wheel (a dev dependency) bundles. Unset: Debian's newest, else one on PATH, else
    pgserver's, so a fresh machine needs nothing but ``pip install -e '.[dev]'``."""
    chosen = os.environ.get("MEMFS_PG_BIN", "")
    if chosen == "pgserver":
        return _pgserver_binaries()
    if chosen:
        return Path(chosen)
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb and shutil.which("postgres"):
        return Path(os.path.realpath(initdb)).parent
    return _pgserver_binaries()


def _pgserver_binaries() -> Path | None:
    """pgserver's bin folder, reachable by ``nobody`` (who runs them under root): when
    the installed copy is not (a private home or venv folder), a copy in /tmp is."""
    # Found, not imported: importing pgserver sets up its own runtime folders (and warns).
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        return None
    install = Path(next(iter(spec.submodule_search_locations))) / "pginstall"
    if not (install / "bin" / "initdb").exists():
        return None
    if os.geteuid() != 0 or _open_to_others(install):
        return install / "bin"
    copy = Path(tempfile.gettempdir()) / f"memfs-pginstall-{os.getuid()}"
    if not (copy / "bin" / "postgres").exists():
        staging = Path(tempfile.mkdtemp(prefix="memfs-pginstall-"))
        shutil.copytree(install, staging / "pginstall", symlinks=True)
        for root, dirs, files in os.walk(staging):
            for name in dirs + files:
                path = Path(root, name)
                if not path.is_symlink():
                    path.chmod(path.stat().st_mode | 0o444 | (0o111 if path.is_dir() else 0))
        staging.chmod(0o755)
        with contextlib.suppress(OSError):  # another session won the race: use its copy
            (staging / "pginstall").rename(copy)
    return copy / "bin"


def _open_to_others(install: Path) -> bool:
    """Whether any user can walk to ``install`` and run its postgres binary."""
    folder = install.resolve()
    for part in [folder, *folder.parents]:
        if not part.stat().st_mode & 0o001:
            return False
    return bool((folder / "bin" / "postgres").stat().st_mode & 0o001)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class PostgresServer:
    """One running cluster; ``url(db)`` is a libpq URL to database ``db`` on it."""

    folder: Path
    port: int
    process: subprocess.Popen[bytes]
    log: Path
    binaries: Path
    _names: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh empty database's URL."""
        import psycopg.errors

        name = f"t{next(self._names)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            try:  # a linguistic default collation, as managed databases usually have
                conn.execute(
                    f'CREATE DATABASE "{name}" TEMPLATE template0 LOCALE_PROVIDER icu'
                    " ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
                )
            except psycopg.errors.Error:  # a server built without ICU
                conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self, how: signal.Signals = signal.SIGINT) -> None:
        """Shut down the postmaster this module started (SIGINT: fast, SIGQUIT:
        immediate), then SIGKILL it if it is still there after 30 s."""
        if self.process.poll() is None:
            self.process.send_signal(how)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


def _as_user() -> dict[str, object]:
    """Popen arguments that run a child as ``nobody`` when we are root."""
    if os.geteuid() != 0:
        return {}
    nobody = pwd.getpwnam("nobody")
    return {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}


def start_postgres() -> PostgresServer:
    """Make a cluster in a temporary folder and start it; fails saying how to install."""
    binaries = find_binaries()
    if binaries is None:
        pytest.fail(f"PostgreSQL server binaries not found; install them with: {INSTALL}")
    folder = Path(tempfile.mkdtemp(prefix="memfs-pg-"))
    data = folder / "data"
    log = folder / "postgres.log"
    user = _as_user()
    if user:
        nobody = pwd.getpwnam("nobody")
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)
    initdb = subprocess.run(
        [
            str(binaries / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        ],
        capture_output=True,
        cwd=folder,
        check=False,
        **user,  # type: ignore[arg-type]
    )
    if initdb.returncode != 0:
        pytest.fail(f"initdb failed: {initdb.stderr.decode(errors='replace')[-2000:]}")
    port = _free_port()
    server = PostgresServer(folder, port, _spawn(binaries, folder, port), log, binaries)
    wait_ready(server)
    return server


def _spawn(binaries: Path, folder: Path, port: int) -> subprocess.Popen[bytes]:
    """The postmaster on ``folder``'s cluster and ``port``, run as nobody under root."""
    with open(folder / "postgres.log", "ab") as out:
        return subprocess.Popen(
            [
                str(binaries / "postgres"),
                "-D",
                str(folder / "data"),
                "-p",
                str(port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                f"unix_socket_directories={folder}",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=200",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=folder,
            **_as_user(),  # type: ignore[arg-type]
        )


def restart(server: PostgresServer) -> None:
    """Start the stopped ``server`` again on its cluster and port."""
    server.process = _spawn(server.binaries, server.folder, server.port)
    wait_ready(server)


def wait_ready(server: PostgresServer) -> None:
    """Wait until the server accepts connections; fails with its log if it exits."""
    import psycopg

    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if server.process.poll() is not None:
            log = server.log.read_text(errors="replace")[-2000:]
            pytest.fail(f"postgres exited at start: {log}")
        try:
            with psycopg.connect(server.url(), connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                server.stop()
                pytest.fail(f"postgres did not accept connections within {START_TIMEOUT}s")
            time.sleep(0.1)


def dispose(server: PostgresServer) -> None:
    server.stop(signal.SIGQUIT)  # the cluster is thrown away: no shutdown checkpoint
    with contextlib.suppress(OSError):
        shutil.rmtree(server.folder)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = start_postgres()
    try:
        yield server
    finally:
        dispose(server)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A fresh database on the session's server, for one test."""
    return postgres_server.new_database()
