"""Settings of a memfs server: ``MEMFS_*`` environment variables and matching flags.

Every value is checked when the server starts; a bad one stops it with a message
that names the variable, so nothing runs half-configured.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from memfs.errors import InvalidRequest


@dataclass(frozen=True)
class Settings:
    data: Path = Path("data")
    admin_key: str | None = None
    host: str = "127.0.0.1"
    port: int = 8750
    workers: int = 1
    page_items: int = 200
    memory_bytes: int = 102_400
    webhook_body_bytes: int = 262_144
    webhook_tolerance_seconds: int = 300
    run_concurrency: int = 4
    retry_base_ms: int = 1000
    delivery_retention_hours: int = 72
    header_timeout_seconds: int = 10
    body_timeout_seconds: int = 60
    max_connections: int = 1000
    shutdown_drain_seconds: int = 2
    command_grace_seconds: int = 5
    # Command actions run programs: an operator feature, off unless asked for.
    allow_commands: bool = False
    run_user: str = "nobody"
    # The derived index's location: None for SQLite in the data folder, or a
    # postgresql:// URL (libpq's) for an index shared by many servers.
    index: str | None = None
    # The read-only web console at /console (MEMFS_CONSOLE=0 or --no-console: off).
    console: bool = True
    # Scale-out: canonical objects on S3 (s3://BUCKET[/PREFIX]); None keeps them in data.
    objects: str | None = None
    s3_endpoint: str | None = None
    s3_region: str = "us-east-1"


@dataclass(frozen=True)
class Objects:
    """Where canonical objects live: the bucket and folder, or the local data folder."""

    bucket: str | None = None  # None: the data folder, as in single-node mode
    prefix: str = ""
    endpoint: str | None = None
    region: str = "us-east-1"

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")


# name → (environment variable, minimum, maximum) for the integer settings
_INTEGERS: dict[str, tuple[str, int, int]] = {
    "port": ("MEMFS_PORT", 1, 65_535),
    "workers": ("MEMFS_WORKERS", 1, 64),
    "page_items": ("MEMFS_PAGE_ITEMS", 1, 10_000),
    "memory_bytes": ("MEMFS_MEMORY_BYTES", 1, 64 * 1024 * 1024),
    "webhook_body_bytes": ("MEMFS_WEBHOOK_BODY_BYTES", 1, 64 * 1024 * 1024),
    "webhook_tolerance_seconds": ("MEMFS_WEBHOOK_TOLERANCE_SECONDS", 1, 86_400),
    "run_concurrency": ("MEMFS_RUN_CONCURRENCY", 1, 256),
    "retry_base_ms": ("MEMFS_RETRY_BASE_MS", 0, 3_600_000),
    "delivery_retention_hours": ("MEMFS_DELIVERY_RETENTION_HOURS", 72, 24 * 365),
    "header_timeout_seconds": ("MEMFS_HEADER_TIMEOUT_SECONDS", 1, 3600),
    "body_timeout_seconds": ("MEMFS_BODY_TIMEOUT_SECONDS", 1, 3600),
    "max_connections": ("MEMFS_MAX_CONNECTIONS", 1, 1_000_000),
    "shutdown_drain_seconds": ("MEMFS_SHUTDOWN_DRAIN_SECONDS", 0, 300),
    "command_grace_seconds": ("MEMFS_COMMAND_GRACE_SECONDS", 0, 3600),
}

# name → environment variable of the object-storage settings (also read by every CLI command)
_OBJECTS = {
    "objects": "MEMFS_OBJECTS",
    "s3_endpoint": "MEMFS_S3_ENDPOINT",
    "s3_region": "MEMFS_S3_REGION",
}
OBJECT_ENVIRONMENT = tuple(_OBJECTS.values())

ENVIRONMENT = (
    "MEMFS_DATA",
    "MEMFS_ADMIN_KEY",
    "MEMFS_HOST",
    "MEMFS_ALLOW_COMMANDS",
    "MEMFS_RUN_USER",
    "MEMFS_INDEX",
    "MEMFS_CONSOLE",
    *OBJECT_ENVIRONMENT,
    *(env for env, _lo, _hi in _INTEGERS.values()),
)


def load(env: Mapping[str, str], overrides: Mapping[str, object | None]) -> Settings:
    """Settings from ``env`` with non-None ``overrides`` (command-line flags) on top."""
    values: dict[str, object] = {}
    raw: dict[str, tuple[str, object]] = {}
    for name, (var, _lo, _hi) in _INTEGERS.items():
        if var in env:
            raw[name] = (var, env[var])
    for name, var in (
        ("data", "MEMFS_DATA"),
        ("admin_key", "MEMFS_ADMIN_KEY"),
        ("host", "MEMFS_HOST"),
        ("allow_commands", "MEMFS_ALLOW_COMMANDS"),
        ("run_user", "MEMFS_RUN_USER"),
        ("index", "MEMFS_INDEX"),
        ("console", "MEMFS_CONSOLE"),
        *_OBJECTS.items(),
    ):
        if var in env:
            raw[name] = (var, env[var])
    for name, value in overrides.items():
        if value is not None:
            raw[name] = (f"--{name.replace('_', '-')}", value)
    for name, (source, value) in raw.items():
        values[name] = _check(name, source, value)
    known = {f.name for f in fields(Settings)}
    return Settings(**{k: v for k, v in values.items() if k in known})  # type: ignore[arg-type]


def objects(settings: Settings) -> Objects:
    """The object-storage part of ``settings``, the S3 URL split into bucket and folder."""
    if settings.objects is None:
        return Objects()
    bucket, _, prefix = settings.objects.removeprefix("s3://").partition("/")
    return Objects(bucket, prefix.strip("/"), settings.s3_endpoint, settings.s3_region)


def load_objects(env: Mapping[str, str], overrides: Mapping[str, object | None]) -> Objects:
    """Only the object-storage settings (what every CLI command needs, not the server's)."""
    raw = {name: env[var] for name, var in _OBJECTS.items() if var in env}
    sources = {name: var for name, var in _OBJECTS.items()}
    for name, value in overrides.items():
        if value is not None:
            raw[name] = str(value)
            sources[name] = f"--{name.replace('_', '-')}"
    checked = {name: _check(name, sources[name], value) for name, value in raw.items()}
    return objects(Settings(**checked))  # type: ignore[arg-type]


_BUCKET_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789.-")


def _check(name: str, source: str, value: object) -> object:
    if name in _INTEGERS:
        _var, lo, hi = _INTEGERS[name]
        text = str(value).strip()
        if not text.isascii() or not text.isdigit() or not lo <= int(text) <= hi:
            raise InvalidRequest(f"{source}={value!r}: expected an integer from {lo} to {hi}")
        return int(text)
    if name == "data":
        folder = str(value)
        if not folder.strip() or "\x00" in folder:
            # Path("") is the current directory: never serve that by accident.
            raise InvalidRequest(f"{source}={folder!r}: expected the path of a data folder")
        return Path(folder)
    if name == "host":
        host = str(value)
        try:
            ipaddress.ip_address(host)
        except ValueError:
            if host != "localhost":
                raise InvalidRequest(
                    f"{source}={host!r}: expected an IP address such as 127.0.0.1 or localhost"
                ) from None
        return host
    if name in ("allow_commands", "console"):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("", "0", "false", "no", "off"):
            return False
        raise InvalidRequest(f"{source}={value!r}: expected 1 (enabled) or 0 (disabled)")
    if name == "run_user":
        user = str(value).strip()
        if not user or not user.isprintable() or " " in user or user in ("root", "0"):
            raise InvalidRequest(
                f"{source}={value!r}: expected the name of an unprivileged user, e.g. nobody"
            )
        return user
    if name == "index":
        return index_location(source, value)
    if name == "objects":
        return _check_objects(source, str(value))
    if name == "s3_endpoint":
        endpoint = str(value).strip()
        if not endpoint:
            return None
        rest = endpoint.partition("://")[2]
        if not endpoint.startswith(("http://", "https://")) or not rest or " " in endpoint:
            raise InvalidRequest(
                f"{source}={value!r}: expected an http:// or https:// URL such as"
                " http://127.0.0.1:8333"
            )
        return endpoint.rstrip("/")
    if name == "s3_region":
        region = str(value).strip()
        if not region or not region.isascii() or not all(c.isalnum() or c == "-" for c in region):
            raise InvalidRequest(f"{source}={value!r}: expected a region name such as us-east-1")
        return region
    if name == "admin_key":
        key = str(value)
        if len(key) < 16 or not key.isascii() or not key.isprintable() or " " in key:
            raise InvalidRequest(f"{source}: the admin key must be 16+ printable ASCII characters")
        return key
    return value


INDEX_SCHEMES = ("postgresql://", "postgres://")


def index_location(source: str, value: object) -> str | None:
    """A ``MEMFS_INDEX`` / ``--index`` value checked: None (empty: SQLite in the data
    folder) or a PostgreSQL URL; raises InvalidRequest naming ``source``."""
    text = str(value).strip()
    if not text:
        return None
    if "\x00" in text or not text.isprintable() or not text.startswith(INDEX_SCHEMES):
        # Only the scheme is shown: a URL may carry a password.
        shown = text.split("://", 1)[0] + "://…" if "://" in text else text[:40]
        raise InvalidRequest(
            f"{source}={shown!r}: expected a PostgreSQL URL such as"
            " postgresql://USER:PASSWORD@HOST:5432/DATABASE (unset: SQLite in the data folder)"
        )
    return text


def _check_objects(source: str, url: str) -> str | None:
    url = url.strip()
    if not url:
        return None  # empty: the data folder, as when unset
    bucket, _, prefix = url.removeprefix("s3://").partition("/")
    segments = [p for p in prefix.strip("/").split("/") if p] if prefix.strip("/") else []
    bad_prefix = "//" in prefix.strip("/") or any(p in (".", "..") for p in segments)
    if (
        not url.startswith("s3://")
        or not 3 <= len(bucket) <= 63
        or not set(bucket) <= _BUCKET_CHARS
        or not bucket[0].isalnum()
        or not bucket[-1].isalnum()
        or bad_prefix
        or not prefix.isprintable()
    ):
        raise InvalidRequest(
            f"{source}={url!r}: expected s3://BUCKET or s3://BUCKET/PREFIX (a bucket name"
            " of 3-63 lowercase letters, digits, dots and hyphens; PREFIX a folder path)"
        )
    return f"s3://{bucket}/{'/'.join(segments)}".rstrip("/")
