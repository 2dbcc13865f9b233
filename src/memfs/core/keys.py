"""Application keys: scoped bearer secrets, stored only as a hash.

A key record ``keys/<keyId>.json`` is an immutable object on the Backend; revoking a
key deletes it. Secrets look like ``mfs_<keyId>~<random>`` so that a request's key is
found with one read and compared in constant time, with no table to scan.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from memfs.canonical import durable
from memfs.canonical.backend import Backend, MissingObject
from memfs.canonical.s3 import S3Backend
from memfs.core.store import Store
from memfs.domain import paths
from memfs.domain.commits import format_ts, now_us
from memfs.domain.shapes import KEY
from memfs.errors import Conflict, InvalidRequest, NotFound

SECRET_PREFIX = "mfs_"
ACTIONS = ("memories:read", "memories:write", "inspect", "triggers:write", "runs:read")
_PREFIX = "keys/"


@dataclass(frozen=True)
class ApiKey:
    key_id: str
    scopes: tuple[str, ...]
    description: str
    created_at: int
    # What writes with this key are recorded as, instead of ``key:<keyId>``: a command
    # run's key writes as ``run:<runId>``, like the run's own memory action.
    actor: str | None = None

    def to_json(self) -> dict[str, object]:
        return KEY.build(
            self.key_id, list(self.scopes), self.description, format_ts(self.created_at)
        )


def check_scopes(value: object, *, field: str = "scopes") -> tuple[str, ...]:
    """Scope tokens: the actions above and ``agents:<scopeId>`` or ``agents:*``."""
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise InvalidRequest("scopes must be a list of strings", field=field)
    for token in value:
        if token.startswith("agents:"):
            target = token.removeprefix("agents:")
            if target != "*":
                paths.scope_id(target, field=field)
        elif token not in ACTIONS:
            raise InvalidRequest(
                f"unknown scope {token!r}; use {', '.join(ACTIONS)} or agents:<scopeId>",
                field=field,
            )
    return tuple(dict.fromkeys(value))


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


# How long a server may keep answering from a key record it read from S3, before it
# reads it again: a key revoked through one server is refused by every server within
# this (the cluster's rule is 5 s), and a request with a known key costs no GET.
CLUSTER_KEY_SECONDS = 2.0
_VERIFIED_KEPT = 4096  # secrets remembered as verified at most (a bound on memory)


class KeyRing:
    def __init__(self, backend: Backend, *, cache_seconds: float = 0.0) -> None:
        self.backend = backend
        # key id -> (when it was read, its record): found records only, so a key made
        # through another server is known at once; 0 s (the data folder) reads each time.
        self.cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, dict[str, object]]] = {}
        # A secret's digest -> (the kept record it matched, the key it proved): while
        # that very record is the one kept (fresh, not dropped by a revocation here, not
        # replaced by a new read), a request with the secret costs two dict lookups, not
        # a record check and a parse.
        self._verified: dict[str, tuple[dict[str, object], ApiKey]] = {}

    @classmethod
    def of(cls, store: Store) -> KeyRing:
        """The key store of ``store``'s data: how an edge reaches it (never the backend).
        On S3 a key lookup is a network round trip per request, so records are kept
        for ``CLUSTER_KEY_SECONDS``; in the data folder it is a file read, kept never
        (a key revoked by ``memfs keys revoke`` is refused at the server's next request)."""
        shared = isinstance(store.backend, S3Backend)
        return cls(store.backend, cache_seconds=CLUSTER_KEY_SECONDS if shared else 0.0)

    def create(
        self, key_id: str, scopes: object, description: object, *, actor: str | None = None
    ) -> tuple[ApiKey, str]:
        paths.simple_id(key_id, field="keyId")
        checked = check_scopes(scopes)
        if not isinstance(description, str) or len(description) > 1024:
            raise InvalidRequest(
                "description must be a string of at most 1024 characters", field="description"
            )
        secret = f"{SECRET_PREFIX}{key_id}~{secrets.token_urlsafe(32)}"
        key = ApiKey(key_id, checked, description, now_us(), actor)
        record = {**key.to_json(), "secretSha256": _hash(secret)}
        if actor is not None:
            record["actor"] = actor
        if not self.backend.put_if_absent(_PREFIX + key_id + ".json", json.dumps(record).encode()):
            raise Conflict(f"key {key_id!r} exists; revoke it first to reuse the id", field="keyId")
        self._cache.pop(key_id, None)
        return key, secret

    def get(self, key_id: str) -> ApiKey:
        paths.simple_id(key_id, field="keyId")
        record = self._record(key_id)
        if record is None:
            raise NotFound(f"key {key_id!r} does not exist", field="keyId")
        return _key(record)

    def _record(self, key_id: str) -> dict[str, object] | None:
        try:
            data: dict[str, object] = json.loads(self.backend.get(_PREFIX + key_id + ".json"))
            return data
        except MissingObject:
            return None

    def list(self) -> list[ApiKey]:
        out = []
        for name in self.backend.list(_PREFIX):
            key_id = name[len(_PREFIX) :].removesuffix(".json")
            record = self._record(key_id)
            if record is not None:
                out.append(_key(record))
        return out

    def fingerprint(self, key_id: str) -> str | None:
        """A digest of the key's stored secret hash, None once it is revoked: a console
        session holds it to notice a revocation, or a key id revoked and made again."""
        try:
            paths.simple_id(key_id, field="keyId")
        except InvalidRequest:
            return None
        record = self._record(key_id)
        if record is None:
            return None
        return hashlib.sha256(str(record["secretSha256"]).encode()).hexdigest()

    def revoke(self, key_id: str) -> None:
        self.get(key_id)
        self.backend.delete(_PREFIX + key_id + ".json")
        self._cache.pop(key_id, None)

    def _known(self, key_id: str, *, fresh: bool = False) -> dict[str, object] | None:
        """The key's record, from the cache while it is fresh (``fresh``: read it)."""
        if self.cache_seconds <= 0:
            return self._record(key_id)
        now = time.monotonic()
        cached = self._cache.get(key_id)
        if not fresh and cached is not None and now - cached[0] < self.cache_seconds:
            return cached[1]
        record = self._record(key_id)
        if record is None:
            self._cache.pop(key_id, None)
        else:
            self._cache[key_id] = (now, record)
        return record

    def reads_storage(self, secret: str) -> bool:
        """Whether ``authenticate(secret)`` would read a key record from the storage
        (on S3, a network round trip: an edge runs it off its event loop then), rather
        than answer from the records kept. The data folder's records (never kept) are
        a file read, which an edge does in place."""
        if self.cache_seconds <= 0:
            return False
        if not secret.startswith(SECRET_PREFIX) or "~" not in secret:
            return False  # refused without a read
        key_id = secret[len(SECRET_PREFIX) :].rsplit("~", 1)[0]
        seen = self._verified.get(_hash(secret))
        kept = self._cache.get(key_id)
        return not (
            seen is not None
            and kept is not None
            and kept[1] is seen[0]
            and time.monotonic() - kept[0] < self.cache_seconds
        )

    def authenticate(self, secret: str) -> ApiKey | None:
        """The key a bearer secret belongs to, or None."""
        if not secret.startswith(SECRET_PREFIX) or "~" not in secret:
            return None
        key_id = secret[len(SECRET_PREFIX) :].rsplit("~", 1)[0]
        try:
            paths.simple_id(key_id, field="keyId")
        except InvalidRequest:
            return None
        digest = _hash(secret)
        seen = self._verified.get(digest)
        if seen is not None:
            kept = self._cache.get(key_id)
            if (
                kept is not None
                and kept[1] is seen[0]
                and time.monotonic() - kept[0] < self.cache_seconds
            ):
                return seen[1]
        record = self._known(key_id)
        if record is not None and not hmac.compare_digest(str(record["secretSha256"]), digest):
            # Perhaps the id was revoked and made again through another server since
            # the record was kept: the stored record decides.
            record = self._known(key_id, fresh=True)
        if record is None or not hmac.compare_digest(str(record["secretSha256"]), digest):
            return None
        key = _key(record)
        if self.cache_seconds > 0:
            if len(self._verified) >= _VERIFIED_KEPT:
                self._verified.clear()  # many keys in one window: start again
            self._verified[digest] = (record, key)
        return key


def _key(record: dict[str, object]) -> ApiKey:
    from memfs.domain.commits import parse_ts

    scopes = record["scopes"]
    assert isinstance(scopes, list)
    return ApiKey(
        str(record["keyId"]),
        tuple(str(s) for s in scopes),
        str(record.get("description", "")),
        parse_ts(str(record["createdAt"])),
        str(record["actor"]) if isinstance(record.get("actor"), str) else None,
    )


ADMIN_KEY_FILE = "admin.key"


def _new_admin_secret() -> bytes:
    return f"mfs_admin~{secrets.token_urlsafe(32)}\n".encode()


def admin_key(data_dir: Path, configured: str | None) -> tuple[str, Path | None]:
    """The admin key: the configured one, else ``data/admin.key`` (made 0600 if absent)."""
    if configured:
        return configured, None
    path = data_dir / ADMIN_KEY_FILE
    if not path.exists():
        durable.create_new(path, _new_admin_secret(), mode=0o600)
    return path.read_text().strip(), path


class AdminKey:
    """The admin key a server checks: ``MEMFS_ADMIN_KEY`` if set, else ``admin.key``,
    re-read whenever the file changes (``memfs keys rotate-admin`` replaces it), so a
    rotation takes effect in every running worker at its next request."""

    def __init__(self, data_dir: Path, configured: str | None) -> None:
        self._value, self.path = admin_key(data_dir, configured)
        self._stamp = self._stat()

    def _stat(self) -> tuple[int, int, int] | None:
        if self.path is None:
            return None
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def current(self) -> str:
        if self.path is None:
            return self._value
        stamp = self._stat()
        # A missing or unreadable file keeps the last key: deleting admin.key by
        # mistake must not lock the operator out of a running server.
        if stamp is not None and stamp != self._stamp:
            try:
                value = self.path.read_text().strip()
            except OSError:
                return self._value
            if value:
                self._value, self._stamp = value, stamp
        return self._value


def rotate_admin(data_dir: Path, configured: str | None) -> Path:
    """Replace ``admin.key`` with a new secret (0600); the old one stops working.

    Refused while ``MEMFS_ADMIN_KEY`` is set: servers started with it never read the
    file, so rotating the file would change nothing for them.
    """
    if configured:
        raise InvalidRequest(
            "MEMFS_ADMIN_KEY is set, and a server started with it never reads admin.key: "
            "change the variable (or --admin-key) and restart the server instead",
            field="MEMFS_ADMIN_KEY",
        )
    path = data_dir / ADMIN_KEY_FILE
    durable.replace(path, _new_admin_secret(), mode=0o600)
    return path
