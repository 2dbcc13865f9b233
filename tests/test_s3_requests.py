"""The S3 requests a commit costs on the cluster path (objects on a real SeaweedFS, the
index in a real PostgreSQL), counted by SeaweedFS itself (its Prometheus metrics, so
retries and any request the client makes on its own are counted too).

A commit's one S3 request is the create-if-absent of its log entry (a PUT with
``If-None-Match: *``): no HEAD before it, no GET after it, no LIST. A content over the
inline limit adds the PUT of its blob. Anything more is object-storage load per
write that the guarantees don't need (docs/scale-out.md, "Cost per request and scaling").
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine_seaweedfs import SeaweedFS
from http_fixtures import Api, memory_url, open_api, sha

SETTLE_S = 30.0  # SeaweedFS counts a request once its answer is written: wait for it


@pytest.fixture
def cluster(
    tmp_path: Path, seaweedfs: SeaweedFS, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Api, SeaweedFS, str]]:
    """An in-process app on a bucket of its own (no run executor, so no node lease
    renewing in the background: every request counted is a request's)."""
    bucket = seaweedfs.bucket()
    for name, value in seaweedfs.env().items():
        if name.startswith("AWS_"):
            monkeypatch.setenv(name, value)
    with open_api(
        tmp_path,
        objects=f"s3://{bucket}/memfs",
        s3_endpoint=seaweedfs.endpoint,
        index=postgres_url,
    ) as api:
        api.create_agent()
        api.must_write("/memories/warm.md", "warm-up\n")
        yield api, seaweedfs, bucket


def requests_made(
    engine: SeaweedFS, bucket: str, before: dict[str, int], total: int
) -> dict[str, int]:
    """The requests counted since ``before``, once at least ``total`` are counted."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        now = engine.requests(bucket)
        made = {k: v - before.get(k, 0) for k, v in now.items() if v != before.get(k, 0)}
        if sum(made.values()) >= total:
            return made
        if time.monotonic() > deadline:
            return made
        time.sleep(0.05)


def test_a_commit_is_one_conditional_put(cluster: tuple[Api, SeaweedFS, str]) -> None:
    api, engine, bucket = cluster
    before = engine.requests(bucket)
    for n in range(10):
        api.must_write(f"/memories/notes/{n}.md", f"# note {n}\n" + "text " * 100)
    # Replaced under If-Match, and deleted: one entry each as well.
    body = api.must_write("/memories/notes/0.md", "# note 0, again\n")
    replaced = api.write(
        "/memories/notes/0.md", "# third\n", headers={"If-Match": f'"{body["contentSha256"]}"'}
    )
    assert replaced.status_code == 200, replaced.text
    assert api.delete(memory_url("/memories/notes/1.md")).status_code == 204
    assert requests_made(engine, bucket, before, 13) == {"PUT 200": 13}


def test_a_big_content_adds_its_blob_and_a_repeat_costs_nothing(
    cluster: tuple[Api, SeaweedFS, str],
) -> None:
    api, engine, bucket = cluster
    big = "# big\n" + "x" * 40_000 + "\n"
    before = engine.requests(bucket)
    api.must_write("/memories/big.md", big)
    assert requests_made(engine, bucket, before, 2) == {"PUT 200": 2}  # blob, then entry
    before = engine.requests(bucket)
    again = api.write("/memories/big.md", big)  # identical: answered from the index
    assert again.status_code == 200 and again.json()["contentSha256"] == sha(big)
    api.must_write("/memories/small.md", "# small\n")  # one more PUT: the count has settled
    # No PUT for the repeat: only its look-up of entry N + 1 (an entry past the index's
    # head, left by a server that died before indexing it, would make the answer stale).
    assert requests_made(engine, bucket, before, 2) == {"PUT 200": 1, "GET 404": 1}
    assert api.get(memory_url("/memories/big.md")).json()["content"] == big
