"""The runner's poll loop under a passing failure: an index being rebuilt."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from memfs.core.keys import KeyRing
from memfs.core.runner import Runner
from memfs.core.store import Store


def test_a_poll_during_an_index_rebuild_logs_one_line_without_a_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store(tmp_path / "data")
    try:
        runner = Runner(store, KeyRing(store.backend), base_url="http://test", concurrency=1)
        # The file is gone: the poll's thread, with no connection yet, finds IndexGone.
        store.index.path.unlink()
        caplog.set_level(logging.WARNING, logger="memfs.runner")
        ok = asyncio.run(runner.poll_logged())
        assert ok is False
        records = [r for r in caplog.records if r.name == "memfs.runner"]
        assert len(records) == 1, [r.getMessage() for r in records]
        (record,) = records
        assert record.levelno == logging.WARNING
        assert record.exc_info is None  # no traceback in the log
        message = record.getMessage()
        assert message.startswith("runner poll skipped: the index is being rebuilt")
        assert "\n" not in message
        assert "Traceback" not in caplog.text
    finally:
        store.close()


def test_any_other_poll_failure_still_logs_its_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "data")
    try:
        runner = Runner(store, KeyRing(store.backend), base_url="http://test", concurrency=1)

        def broken(now: int, limit: int) -> list[object]:
            raise RuntimeError("a bug")

        monkeypatch.setattr(runner.runs, "due", broken)
        caplog.set_level(logging.WARNING, logger="memfs.runner")
        assert asyncio.run(runner.poll_logged()) is False
        (record,) = [r for r in caplog.records if r.name == "memfs.runner"]
        assert record.getMessage() == "runner poll failed"
        assert record.exc_info is not None
    finally:
        store.close()
