"""Console sign-in sessions, kept in the data folder so every worker process sees them.

A session is one 0600 file ``console/sessions/<sha256(session id)>.json`` holding the
key id (None for the admin), a fingerprint of the key's stored secret hash, the CSRF
token of its forms and its expiry; never the key's secret. The cookie holds only the
random session id, and the file is named by its hash, so reading the folder gives no
cookie away. Each use re-checks the key (``KeyRing.fingerprint``): a revoked key, or a
key id revoked and made again, or a rotated admin key, ends the session.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from memfs.canonical import durable
from memfs.core.auth import ADMIN, Principal
from memfs.core.keys import AdminKey, KeyRing

FOLDER = ("console", "sessions")
TTL_S = 8 * 3600  # a working day; the cookie's Max-Age is the same
MAX_FILE_BYTES = 4096


@dataclass(frozen=True)
class Session:
    session_id: str
    key_id: str | None  # None: signed in with the admin key
    fingerprint: str
    csrf: str
    expires_at: float


def admin_fingerprint(secret: str) -> str:
    return hashlib.sha256(b"memfs-console-admin\0" + secret.encode()).hexdigest()


class Sessions:
    def __init__(self, data_dir: Path, keys: KeyRing, admin_key: AdminKey) -> None:
        self.folder = data_dir.joinpath(*FOLDER)
        self.keys = keys
        self.admin_key = admin_key

    def _file(self, session_id: str) -> Path:
        return self.folder / (hashlib.sha256(session_id.encode()).hexdigest() + ".json")

    def sign_in(self, secret: str) -> tuple[Session, Principal] | None:
        """A new session for the key ``secret``, or None for an unknown or revoked key."""
        admin = self.admin_key.current()
        if hmac.compare_digest(secret.encode(), admin.encode()):
            key_id, fingerprint, principal = None, admin_fingerprint(admin), ADMIN
        else:
            key = self.keys.authenticate(secret)
            found = self.keys.fingerprint(key.key_id) if key is not None else None
            if key is None or found is None:
                return None
            key_id, fingerprint = key.key_id, found
            principal = Principal(key.key_id, frozenset(key.scopes), key_actor=key.actor)
        session = Session(
            secrets.token_urlsafe(32),
            key_id,
            fingerprint,
            secrets.token_urlsafe(24),
            time.time() + TTL_S,
        )
        record = {
            "keyId": session.key_id,
            "fingerprint": session.fingerprint,
            "csrf": session.csrf,
            "expiresAt": session.expires_at,
        }
        durable.replace(
            self._file(session.session_id),
            json.dumps(record).encode(),
            durable=False,
            mode=0o600,
        )
        return session, principal

    def resume(self, session_id: str) -> tuple[Session, Principal] | None:
        """The live session and its principal, re-checked against the key now."""
        if not 20 <= len(session_id) <= 128 or not session_id.isascii():
            return None
        path = self._file(session_id)
        try:
            raw = path.read_bytes()[:MAX_FILE_BYTES]
            record = json.loads(raw)
            session = Session(
                session_id,
                record["keyId"],
                str(record["fingerprint"]),
                str(record["csrf"]),
                float(record["expiresAt"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if session.expires_at <= time.time():
            self.end(session_id)
            return None
        principal = self._principal(session)
        if principal is None:
            self.end(session_id)
            return None
        return session, principal

    def _principal(self, session: Session) -> Principal | None:
        if session.key_id is None:
            current = admin_fingerprint(self.admin_key.current())
            return ADMIN if hmac.compare_digest(current, session.fingerprint) else None
        found = self.keys.fingerprint(session.key_id)
        if found is None or not hmac.compare_digest(found, session.fingerprint):
            return None
        key = self.keys.get(session.key_id)
        return Principal(key.key_id, frozenset(key.scopes), key_actor=key.actor)

    def end(self, session_id: str) -> None:
        with contextlib.suppress(OSError):
            self._file(session_id).unlink()

    def sweep(self) -> int:
        """Remove expired session files; how many."""
        removed = 0
        now = time.time()
        with contextlib.suppress(FileNotFoundError):
            for path in self.folder.iterdir():
                try:
                    expires = float(json.loads(path.read_bytes()[:MAX_FILE_BYTES])["expiresAt"])
                except (OSError, ValueError, KeyError, TypeError):
                    continue
                if expires <= now:
                    with contextlib.suppress(OSError):
                        path.unlink()
                        removed += 1
        return removed
