"""Node leases: how a server on one host tells that a server on another host is gone.

On one host a claim's owner is alive while its pid (and that pid's start time) is;
across hosts nothing local can tell. So each server of a cluster (objects on S3) holds
a lease: it creates ``nodes/<node>/<sequence>.json`` with the time it wrote it, again
every ``RENEW_S``, and deletes the one before. Another server reads the newest and
counts the owner alive while that time is less than ``TTL_S`` old. The servers' wall
clocks must agree to well within ``TTL_S`` (NTP does).

Leases are objects in the shared bucket, created with create-if-absent like
everything else, and only their owner ever writes under its folder.
"""

from __future__ import annotations

import json
import socket
import uuid

from memfs.canonical.backend import Backend, MissingObject
from memfs.domain.commits import now_us

PREFIX = "nodes/"
TTL_S = 15.0  # a node not heard from for this long is gone
RENEW_S = 3.0


def node_id() -> str:
    """A name for this server process that no other process, anywhere, shares."""
    host = "".join(c if c.isalnum() or c in "-." else "_" for c in socket.gethostname())
    return f"{host or 'host'}-{uuid.uuid4().hex[:12]}"


class Lease:
    """This process's lease, renewed by ``renew`` (the runner's loop calls it)."""

    def __init__(self, backend: Backend, node: str) -> None:
        self.backend = backend
        self.node = node
        self.sequence = 0
        self.renewed_us = 0

    def renew(self, *, force: bool = False) -> None:
        now = now_us()
        if not force and now - self.renewed_us < RENEW_S * 1_000_000:
            return
        self.sequence += 1
        key = f"{PREFIX}{self.node}/{self.sequence:012d}.json"
        self.backend.put_if_absent(key, json.dumps({"node": self.node, "at": now}).encode())
        self.renewed_us = now
        if self.sequence > 1:
            self.backend.delete(f"{PREFIX}{self.node}/{self.sequence - 1:012d}.json")


def alive(backend: Backend, node: str, now: int | None = None) -> bool:
    """Whether ``node`` renewed its lease less than ``TTL_S`` ago."""
    keys = list(backend.list(f"{PREFIX}{node}/"))
    for key in reversed(keys):  # the newest first; one just deleted is skipped
        try:
            record = json.loads(backend.get(key))
        except (MissingObject, ValueError):
            continue
        at = record.get("at")
        if isinstance(at, int):
            return (now if now is not None else now_us()) - at < TTL_S * 1_000_000
    return False
