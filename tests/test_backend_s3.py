"""S3Backend on a real SeaweedFS: the shipped Backend contract, and what S3 adds to it
(a bucket folder, outages as 503s, recovery without a restart)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine_seaweedfs import SeaweedFS
from memfs.canonical.backend import Backend
from memfs.testing.backend_contract import BackendContract


class TestS3Backend(BackendContract):
    @pytest.fixture(autouse=True)
    def _engine(self, seaweedfs: SeaweedFS) -> None:
        self.engine = seaweedfs

    def make_backend(self, tmp_path: Path) -> Backend:
        return self.engine.backend("memfs/test")
