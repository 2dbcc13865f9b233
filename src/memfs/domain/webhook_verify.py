"""Standard Webhooks signing and verification over raw body bytes.

Contract:

- A secret is ``"whsec_" + base64(key)``; :func:`parse_secret` returns the key or
  raises :class:`~memfs.errors.InvalidRequest` (``field="secret"``).
- A signature is ``"v1," + base64(HMAC-SHA256(key, f"{id}.{timestamp}.".encode() + body))``.
- :func:`verify` checks ``webhook-id``, ``webhook-timestamp`` (ASCII digits, within
  ``tolerance_seconds`` of ``now`` in both directions) and ``webhook-signature``
  (space-separated entries; malformed ones are skipped, non-``v1`` ones ignored;
  any ``v1`` entry matching any secret passes). It returns the webhook id, or raises
  :class:`~memfs.errors.Unauthorized` naming the failed check (``field`` is the
  header). It raises nothing else for any headers or body; a malformed *secret*
  is a configuration error and raises :class:`~memfs.errors.InvalidRequest`.

We do not use the ``standardwebhooks`` package here: it decodes bodies as UTF-8,
crashes on malformed signature entries and has a fixed tolerance.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import secrets as _secrets
from collections.abc import Mapping, Sequence

from memfs.errors import InvalidRequest, Unauthorized

SECRET_PREFIX = "whsec_"
_SECRET_BYTES = 32
_DIGEST_BYTES = hashlib.sha256().digest_size
_MAX_ID_CHARS = 256
# Bounds the int() conversion. 16 digits still parse millisecond and microsecond
# timestamps, so a sender using the wrong unit hears "too new", not "malformed".
_MAX_TIMESTAMP_DIGITS = 16


def parse_secret(secret: str) -> bytes:
    """Return the key bytes of ``whsec_<base64>``; padding may be omitted."""
    if not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX):
        raise InvalidRequest("webhook secret must start with 'whsec_'", field="secret")
    encoded = secret[len(SECRET_PREFIX) :]
    # Some senders strip the base64 padding; restore it so strict decoding works.
    encoded += "=" * (-len(encoded) % 4)
    try:
        key = base64.b64decode(encoded, validate=True)
    except ValueError:  # binascii.Error, or non-ASCII characters
        raise InvalidRequest(
            "webhook secret is not valid base64 after 'whsec_'", field="secret"
        ) from None
    if not key:
        raise InvalidRequest("webhook secret is empty", field="secret")
    return key


# The keys of the secrets verified lately: a trigger's secret is decoded once, not at
# every delivery. A malformed secret raises each time (lru_cache keeps no exception).
_key = functools.lru_cache(maxsize=1024)(parse_secret)


def generate_secret() -> str:
    """Return a fresh ``whsec_`` secret holding 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(_secrets.token_bytes(_SECRET_BYTES)).decode()


def _digest(key: bytes, webhook_id: str, timestamp: str, body: bytes) -> bytes:
    # Feed the body separately so a large body is not copied to prepend the prefix.
    mac = hmac.new(key, f"{webhook_id}.{timestamp}.".encode(), hashlib.sha256)
    mac.update(body)
    return mac.digest()


def sign(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    """Return the ``v1,<base64>`` signature of ``body`` for this id and timestamp."""
    digest = _digest(parse_secret(secret), webhook_id, str(timestamp), body)
    return "v1," + base64.b64encode(digest).decode()


def _valid_id(value: str) -> bool:
    # Printable ASCII without space: the id ends up in paths, logs and env vars.
    return 0 < len(value) <= _MAX_ID_CHARS and all("!" <= ch <= "~" for ch in value)


def _signature_candidates(header: str) -> list[bytes]:
    """Decode the ``v1`` entries of a signature header, skipping malformed ones."""
    found: list[bytes] = []
    for entry in header.split(" "):
        version, comma, encoded = entry.partition(",")
        if not comma or version != "v1":
            continue  # malformed or another scheme: not fatal, per the spec
        try:
            raw = base64.b64decode(encoded, validate=True)
        except ValueError:  # binascii.Error, or non-ASCII characters
            continue
        if len(raw) == _DIGEST_BYTES:
            found.append(raw)
    return found


def verify(
    secrets: Sequence[str],
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: float,
    tolerance_seconds: int,
) -> str:
    """Verify a delivery and return its webhook id; see the module docstring."""
    keys = [_key(secret) if isinstance(secret, str) else parse_secret(secret) for secret in secrets]
    # Header names are case-insensitive; ignore anything that is not a str pair so
    # odd mappings end in a 401 rather than a TypeError.
    lowered = {
        name.lower(): value
        for name, value in headers.items()
        if isinstance(name, str) and isinstance(value, str)
    }

    webhook_id = lowered.get("webhook-id")
    if webhook_id is None or not _valid_id(webhook_id):
        raise Unauthorized("missing or malformed webhook-id header", field="webhook-id")

    stamp = lowered.get("webhook-timestamp")
    # isascii() + isdigit() admits exactly [0-9]+; int() alone would also take
    # "+1", "1_0", " 1" and non-ASCII digits.
    if (
        stamp is None
        or not 0 < len(stamp) <= _MAX_TIMESTAMP_DIGITS
        or not stamp.isascii()
        or not stamp.isdigit()
    ):
        raise Unauthorized(
            "missing or malformed webhook-timestamp header (integer seconds expected)",
            field="webhook-timestamp",
        )
    timestamp = int(stamp)
    if now - timestamp > tolerance_seconds:
        raise Unauthorized("webhook-timestamp header is too old", field="webhook-timestamp")
    if timestamp - now > tolerance_seconds:
        raise Unauthorized("webhook-timestamp header is too new", field="webhook-timestamp")

    signature = lowered.get("webhook-signature")
    if not signature:
        raise Unauthorized("missing webhook-signature header", field="webhook-signature")
    candidates = _signature_candidates(signature)
    # Sign with the header's own digits: that is the string the sender signed.
    for key in keys:
        expected = _digest(key, webhook_id, stamp, body)
        for candidate in candidates:
            if hmac.compare_digest(expected, candidate):
                return webhook_id
    raise Unauthorized(
        "no valid signature in webhook-signature header for this body",
        field="webhook-signature",
    )
