"""Opaque, tamper-evident continuation tokens (list cursors and inspect page tokens).

A token is ``base64url(json) . base64url(hmac-sha256)[:22]`` under a server secret kept
in ``data/token.key`` (shared by every worker on the data folder). The payload binds
the token to what it continues — kind, agent or scope, and a digest of the query — so
a token replayed elsewhere, altered, or expired is refused with 400.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from pathlib import Path
from typing import Any

from memfs.canonical import durable
from memfs.errors import InvalidRequest


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def query_digest(*parts: object) -> str:
    """A short digest of the query a token belongs to."""
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class Signer:
    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    @classmethod
    def for_data_dir(cls, data_dir: Path) -> Signer:
        path = data_dir / "token.key"
        if not path.exists():
            durable.create_new(path, secrets.token_hex(32).encode(), mode=0o600)
        return cls(path.read_bytes().strip())

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self._secret, body.encode(), hashlib.sha256).digest())[:22]

    def encode(
        self, kind: str, bound: str, query: str, position: Any, *, ttl: int | None = None
    ) -> str:
        payload: dict[str, Any] = {"k": kind, "b": bound, "q": query, "p": position}
        if ttl is not None:
            payload["e"] = int(time.time()) + ttl
        body = _b64(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())
        return f"{body}.{self._mac(body)}"

    def decode(self, token: str, kind: str, bound: str, query: str, *, field: str) -> Any:
        """The position a token carries; 400 naming ``field`` if it is not ours for this."""
        bad = InvalidRequest(
            f"{field} is not valid here: altered, expired, or from another query", field=field
        )
        if not isinstance(token, str) or token.count(".") != 1 or len(token) > 8192:
            raise bad
        body, mac = token.split(".")
        if not hmac.compare_digest(mac.encode(), self._mac(body).encode()):
            raise bad
        try:
            payload = json.loads(_unb64(body))
        except (ValueError, binascii.Error):
            raise bad from None
        if not isinstance(payload, dict):
            raise bad
        if payload.get("k") != kind or payload.get("b") != bound or payload.get("q") != query:
            raise bad
        expires = payload.get("e")
        if expires is not None and (not isinstance(expires, int) or expires < time.time()):
            raise bad
        return payload.get("p")
