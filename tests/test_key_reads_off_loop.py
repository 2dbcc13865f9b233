"""A key record read from shared object storage runs off the server's event loop.

In cluster mode a server keeps key records for ``CLUSTER_KEY_SECONDS``; a key it has
not seen for that long is read from S3, a network round trip (and, when S3 is down,
retries for seconds before the 503). That read must hold up its own request only:
here the key ring's storage hangs on key records until released, and the server
keeps answering other requests meanwhile, then answers the held one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from http_fixtures import Api, agent_url, open_api
from memfs.canonical.backend import Backend
from memfs.core.keys import CLUSTER_KEY_SECONDS, KeyRing

WAIT_S = 60.0


class HangingKeys:
    """The store's backend, with reads of key records held until ``release``."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.reading, self.release = threading.Event(), threading.Event()

    def get(self, key: str) -> bytes:
        if key.startswith("keys/"):
            self.reading.set()
            assert self.release.wait(WAIT_S)
        return self.inner.get(key)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with open_api(tmp_path) as opened:
        yield opened


def test_a_key_read_from_storage_holds_up_its_own_request_only(api: Api) -> None:
    api.create_agent()
    secret = api.make_key("reader", ["memories:read", "agents:users"])
    hanging = HangingKeys(api.app.services.store.backend)
    # Kept records, as on S3 (KeyRing.of keeps none in the data folder).
    api.app.services.keys = KeyRing(hanging, cache_seconds=CLUSTER_KEY_SECONDS)  # type: ignore[arg-type]
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(api.get, agent_url(rest="/memories"), auth=secret)
        try:
            assert hanging.reading.wait(WAIT_S)
            # The admin's requests, and /healthz, are answered while the read hangs.
            assert api.get(agent_url()).status_code == 200
            assert api.get("/healthz", auth=None, protocol=None).status_code == 200
            assert not held.done()
        finally:
            hanging.release.set()
        assert held.result(timeout=WAIT_S).status_code == 200
    # Kept now: the next request with the key reads nothing.
    hanging.release.clear()
    hanging.reading.clear()
    assert api.get(agent_url(rest="/memories"), auth=secret).status_code == 200
    assert not hanging.reading.is_set()
