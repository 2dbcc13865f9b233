"""Shared fixtures: a Store on real files in ``tmp_path`` and one agent in it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine_seaweedfs import SeaweedFS
from memfs.core.store import Store

AGENT_ID = "users/alice/assistant"

# Real engines for the tests that need one (session fixtures, started on first use).
pytest_plugins = ["engine_postgres"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A Store on ``tmp_path / "data"``, closed at teardown."""
    opened = Store(tmp_path / "data")
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def agent(store: Store) -> str:
    """The id of a freshly created agent, ``users/alice/assistant``."""
    store.create_agent(AGENT_ID)
    return AGENT_ID


@pytest.fixture(scope="session")
def seaweedfs() -> Iterator[SeaweedFS]:
    """One real SeaweedFS S3 server for the whole session (tests/engine_seaweedfs.py)."""
    with SeaweedFS() as engine:
        yield engine
