"""Key lookups on S3 are kept for a moment (``KeyRing.cache_seconds``): a request with a
known application key costs no object GET, and a key revoked anywhere is still refused
by every server within the cluster's 5 s (tests/test_cluster.py proves that across two
real servers). Here: the rules of the cache, on one shared bucket double."""

from __future__ import annotations

from pathlib import Path

import pytest

from memfs.canonical.backend import MemoryBackend
from memfs.core import keys
from memfs.core.keys import CLUSTER_KEY_SECONDS, KeyRing
from memfs.core.store import Store


class CountingBackend(MemoryBackend):
    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    def get(self, key: str) -> bytes:
        self.gets += 1
        return super().get(key)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(keys.time, "monotonic", fake)
    return fake


def test_a_known_key_is_read_once_while_its_record_is_fresh(clock: Clock) -> None:
    bucket = CountingBackend()
    ring = KeyRing(bucket, cache_seconds=CLUSTER_KEY_SECONDS)
    _, secret = ring.create("app", ["memories:read"], "")
    before = bucket.gets
    for _ in range(50):
        assert ring.authenticate(secret) is not None
    assert bucket.gets - before == 1
    clock.now += CLUSTER_KEY_SECONDS
    assert ring.authenticate(secret) is not None
    assert bucket.gets - before == 2  # read again once the record is stale


def test_a_known_secret_is_verified_once_per_kept_record(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within the window a request with a known secret is answered from what its first
    check proved: no record is parsed again (the app key's extra CPU per request)."""
    parsed = []
    parse = keys._key

    def counting(record: dict[str, object]) -> keys.ApiKey:
        parsed.append(record)
        return parse(record)

    monkeypatch.setattr(keys, "_key", counting)
    ring = KeyRing(MemoryBackend(), cache_seconds=CLUSTER_KEY_SECONDS)
    _, secret = ring.create("app", ["memories:read"], "")
    _, other = ring.create("other", ["memories:read"], "")
    for _ in range(50):
        assert ring.authenticate(secret) is not None
        assert ring.authenticate(other) is not None
    assert ring.authenticate(secret + "x") is None  # a wrong secret is still refused
    assert len(parsed) == 2
    clock.now += CLUSTER_KEY_SECONDS
    assert ring.authenticate(secret) is not None  # the record read again: checked again
    assert len(parsed) == 3
    ring.revoke("app")
    assert ring.authenticate(secret) is None  # revoked here: refused at once


def test_a_key_revoked_elsewhere_is_refused_once_the_kept_record_is_stale(clock: Clock) -> None:
    bucket = MemoryBackend()
    server_a = KeyRing(bucket, cache_seconds=CLUSTER_KEY_SECONDS)
    server_b = KeyRing(bucket, cache_seconds=CLUSTER_KEY_SECONDS)
    _, secret = server_a.create("app", ["memories:read"], "")
    assert server_b.authenticate(secret) is not None
    server_a.revoke("app")
    assert server_a.authenticate(secret) is None  # the revoking server: at once
    clock.now += CLUSTER_KEY_SECONDS
    assert server_b.authenticate(secret) is None  # the other: within the window (< 5 s)
    assert CLUSTER_KEY_SECONDS < 5.0


def test_a_key_made_again_elsewhere_is_accepted_at_once_and_its_old_secret_refused(
    clock: Clock,
) -> None:
    bucket = MemoryBackend()
    server_a = KeyRing(bucket, cache_seconds=CLUSTER_KEY_SECONDS)
    server_b = KeyRing(bucket, cache_seconds=CLUSTER_KEY_SECONDS)
    _, old = server_a.create("app", ["memories:read"], "")
    assert server_b.authenticate(old) is not None
    server_a.revoke("app")
    _, new = server_a.create("app", ["memories:read"], "")
    assert server_b.authenticate(new) is not None  # the stored record decides
    assert server_b.authenticate(old) is None  # and it was read again just now


def test_unknown_keys_are_never_kept(clock: Clock) -> None:
    bucket = CountingBackend()
    ring = KeyRing(bucket, cache_seconds=CLUSTER_KEY_SECONDS)
    assert ring.authenticate("mfs_app~nope") is None
    _, secret = KeyRing(bucket).create("app", ["memories:read"], "")
    assert ring.authenticate(secret) is not None  # made elsewhere a moment later


def test_the_data_folder_keeps_no_record(tmp_path: Path) -> None:
    store = Store(tmp_path)
    try:
        server, cli = KeyRing.of(store), KeyRing.of(store)
        assert server.cache_seconds == 0
        _, secret = cli.create("app", ["memories:read"], "")
        assert server.authenticate(secret) is not None
        cli.revoke("app")  # memfs keys revoke, another process
        assert server.authenticate(secret) is None  # refused at the next request
    finally:
        store.close()
