"""S3Backend on a real SeaweedFS: the shipped Backend contract, and what S3 adds to it
(a bucket folder, outages as 503s, recovery without a restart)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine_seaweedfs import SeaweedFS
from memfs.canonical.backend import Backend
from memfs.canonical.s3 import S3Backend
from memfs.testing.backend_contract import BackendContract


def s3_backend(engine: SeaweedFS, prefix: str = "") -> S3Backend:
    return S3Backend(
        engine.bucket(),
        prefix,
        endpoint=engine.endpoint,
        credentials={
            "access_key_id": engine.env()["AWS_ACCESS_KEY_ID"],
            "secret_access_key": engine.env()["AWS_SECRET_ACCESS_KEY"],
        },
    )


class TestS3Backend(BackendContract):
    @pytest.fixture(autouse=True)
    def _engine(self, seaweedfs: SeaweedFS) -> None:
        self.engine = seaweedfs

    def make_backend(self, tmp_path: Path) -> Backend:
        return s3_backend(self.engine, "memfs/test")
