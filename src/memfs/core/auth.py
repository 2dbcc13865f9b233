"""Who is asking and what they may do: keys, subject narrowing, scope checks.

A request's principal is the admin (all rights) or an application key whose scope
set may be narrowed per request with ``Memfs-Subject`` + ``Memfs-Scopes``. An action
is allowed when the set holds the action token (``memories:read`` …) and an
``agents:`` token whose scope covers the agent.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from memfs.core.keys import KeyRing, check_scopes
from memfs.domain import paths
from memfs.errors import Forbidden, InvalidRequest, Unauthorized


@dataclass(frozen=True)
class Principal:
    key_id: str | None  # None for the admin
    scopes: frozenset[str]
    subject: str | None = None
    key_actor: str | None = None  # a key that writes as something else (a run's key)

    @property
    def is_admin(self) -> bool:
        return self.key_id is None and self.subject is None and "*" in self.scopes

    @property
    def actor(self) -> str:
        """What a write by this principal is recorded as."""
        if self.subject is not None:
            return f"subject:{self.subject}"
        if self.key_actor is not None:
            return self.key_actor
        return "admin" if self.key_id is None else f"key:{self.key_id}"

    def covers(self, agent_id: str) -> bool:
        if "*" in self.scopes:
            return True
        return any(
            t.startswith("agents:") and paths.in_scope(agent_id, t.removeprefix("agents:"))
            for t in self.scopes
        )

    def covers_scope(self, scope: str) -> bool:
        """Whether every agent under ``scope`` is covered."""
        return self.covers(scope)

    def require(self, action: str, agent_id: str | None = None) -> None:
        if "*" in self.scopes:
            return
        if action not in self.scopes:
            raise Forbidden(f"this key (or its narrowed scopes) lacks {action!r}", field="scopes")
        if agent_id is not None and not self.covers(agent_id):
            raise Forbidden(
                f"this key's agents: scopes do not cover agent {agent_id!r}", field="agentId"
            )

    def require_admin(self) -> None:
        if not self.is_admin:
            raise Forbidden("only the admin key may do this", field="Authorization")


ADMIN = Principal(None, frozenset({"*"}))


def authenticate(headers: Mapping[str, str], ring: KeyRing, admin_key: str) -> Principal:
    """The principal of a request, narrowed by its subject headers; raises 401/403/400."""
    header = headers.get("authorization")
    if header is None:
        raise Unauthorized("missing Authorization: Bearer <key>", field="Authorization")
    scheme, _, secret = header.partition(" ")
    secret = secret.strip()
    if scheme.lower() != "bearer" or not secret:
        raise Unauthorized("Authorization must be 'Bearer <key>'", field="Authorization")
    if hmac.compare_digest(secret.encode(), admin_key.encode()):
        principal = ADMIN
    else:
        key = ring.authenticate(secret)
        if key is None:
            raise Unauthorized("unknown or revoked key", field="Authorization")
        principal = Principal(key.key_id, frozenset(key.scopes), key_actor=key.actor)
    return narrow(principal, headers.get("memfs-subject"), headers.get("memfs-scopes"))


def reads_storage(headers: Mapping[str, str], ring: KeyRing, admin_key: str) -> bool:
    """Whether ``authenticate`` of these headers would read a key record from shared
    object storage (``KeyRing.reads_storage``): an edge then runs it in a thread, so
    its event loop never waits on S3 (nor on its retries, when S3 is down)."""
    header = headers.get("authorization")
    if header is None:
        return False
    scheme, _, secret = header.partition(" ")
    secret = secret.strip()
    if scheme.lower() != "bearer" or not secret or secret == admin_key:
        return False
    return ring.reads_storage(secret)


def header_text(value: str, field: str) -> str:
    """A header value as sent: HTTP servers decode header bytes as latin-1; we want UTF-8."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        raise InvalidRequest(f"{field} must be UTF-8 text", field=field) from None


def narrow(principal: Principal, subject: str | None, scopes: str | None) -> Principal:
    if subject is None and scopes is None:
        return principal
    if subject is not None:
        subject = header_text(subject, "Memfs-Subject")
    if subject is None or scopes is None:
        raise InvalidRequest(
            "Memfs-Subject and Memfs-Scopes go together: send both or neither",
            field="Memfs-Subject" if subject is None else "Memfs-Scopes",
        )
    if not 1 <= len(subject) <= 256 or not subject.isprintable():
        raise InvalidRequest(
            "Memfs-Subject must be 1-256 printable characters", field="Memfs-Subject"
        )
    wanted = check_scopes(scopes.split(), field="Memfs-Scopes")
    if not wanted:
        raise InvalidRequest("Memfs-Scopes must name at least one scope", field="Memfs-Scopes")
    for token in wanted:
        if not _within(principal, token):
            raise Forbidden(
                f"Memfs-Scopes asks for {token!r}, which the key does not hold",
                field="Memfs-Scopes",
            )
    return Principal(principal.key_id, frozenset(wanted), subject)


def _within(principal: Principal, token: str) -> bool:
    if "*" in principal.scopes or token in principal.scopes:
        return True
    if token.startswith("agents:"):
        target = token.removeprefix("agents:")
        return target != "*" and principal.covers(target)
    return False
