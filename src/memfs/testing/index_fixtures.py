"""Rows the index contract suites commit: an agent id and one-change commits."""

from __future__ import annotations

import hashlib

from memfs.domain.commits import CREATED, MODIFIED, Change, Commit
from memfs.domain.content import Scalar

AGENT = "alice"


def _commit(revision: int, path: str, data: bytes, ts: int) -> tuple[Commit, dict[str, bytes]]:
    sha = hashlib.sha256(data).hexdigest()
    change = Change(path, CREATED, 1, None, sha, len(data), content=data.decode())
    return Commit(AGENT, revision, ts, "tester", "m", (change,)), {sha: data}


def _change(
    path: str,
    data: bytes,
    *,
    version: int = 1,
    before: str | None = None,
    description: str | None = None,
    metadata: dict[str, Scalar] | None = None,
) -> tuple[Change, dict[str, bytes]]:
    sha = hashlib.sha256(data).hexdigest()
    operation = CREATED if before is None else MODIFIED
    change = Change(
        path,
        operation,
        version,
        before,
        sha,
        len(data),
        data.decode(),
        description=description,
        metadata=metadata or {},
    )
    return change, {sha: data}
