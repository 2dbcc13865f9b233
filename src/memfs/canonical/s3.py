"""S3Backend: the Backend seam on S3-compatible object storage (AWS S3, R2, MinIO, SeaweedFS).

The client is obstore (Rust's object_store): measured against boto3 on SeaweedFS with
``scripts/bench_s3_client.py`` it spent about a tenth of the CPU per call and served
3-8x the requests/s on PUT, GET and HEAD (the commit message and docs/scale-out.md
have the figures).

- ``put_if_absent`` is a PUT with ``If-None-Match: *``; 412 means "exists". It is
  retried here, not by the client: a PUT whose answer was lost may have landed, so a
  412 after a failed attempt is checked against the bytes we sent.
- Reads, HEAD, LIST and DELETE are retried by the client (5xx, 503 SlowDown, dropped
  connections, timeouts) with exponential backoff, within a bounded total time.
- Every failure of the storage (down, timing out, refusing our credentials) surfaces
  as ``StorageError`` (503, retryable): never a hang, never a 500, and the next call
  simply tries again, so recovery needs no restart.

Listing walks folder by folder with the delimiter and sorts each folder bytewise
here, as LocalBackend does. No server order is relied upon: SeaweedFS lists a folder
before its siblings that extend its name (``a/x`` before ``a!``), and its
``StartAfter`` skips the keys under a folder of that exact name, where AWS includes
them. Walking folders also lets ``start_after`` leap over whole subtrees unread.

Keys are mapped to S3 names one to one: characters XML 1.0 can't carry (a listing is
XML) are escaped as ``\\ue000`` plus six hex digits, and ``\\ue000`` itself too.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, cast

import obstore
from obstore.exceptions import (
    AlreadyExistsError,
    BaseError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
)
from obstore.store import S3Store

from memfs.canonical.backend import MissingObject, check_key
from memfs.errors import StorageError

if TYPE_CHECKING:
    from obstore.store import ClientConfig, RetryConfig, S3Config

_ESCAPE = "\ue000"
# Seconds: a down endpoint answers 503 within about RETRY_BUDGET plus one timeout.
CONNECT_TIMEOUT = 3.0
REQUEST_TIMEOUT = 30.0
RETRY_BUDGET = 8.0
_PUT_ATTEMPTS = 10
# obstore raises its own errors, and builtin ones for some (FileNotFoundError for a GET
# of a missing key, TimeoutError, ConnectionError): every one is a storage failure.
_MISSING = (NotFoundError, FileNotFoundError)
_FAILURES = (BaseError, OSError)


def _xml_unsafe(char: str) -> bool:
    code = ord(char)
    return (
        char == _ESCAPE
        or (code < 0x20 and char not in "\t\n\r")
        or 0xD800 <= code <= 0xDFFF
        or code in (0xFFFE, 0xFFFF)
    )


def encode(key: str) -> str:
    """The S3 name of a key: the key itself unless it holds a character XML can't carry."""
    if key.isascii() and key.isprintable():
        return key  # every key memfs makes: ids are percent-encoded
    return "".join(f"{_ESCAPE}{ord(c):06x}" if _xml_unsafe(c) else c for c in key)


def decode(name: str) -> str:
    if _ESCAPE not in name:
        return name
    out, i = [], 0
    while i < len(name):
        if name[i] == _ESCAPE:
            out.append(chr(int(name[i + 1 : i + 7], 16)))
            i += 7
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def _order(entry: tuple[str, bool]) -> bytes:
    # Bytewise key order: a folder sorts as its name plus "/" ("a.b" < "a/x" < "a0").
    key, is_folder = entry
    return key.encode("utf-8", "surrogatepass") + (b"/" if is_folder else b"")


def unavailable(exc: BaseException, action: str) -> StorageError:
    """The 503 an object-storage failure becomes, naming what failed and why."""
    if isinstance(exc, UnauthenticatedError | PermissionDeniedError):
        reason = (
            "the storage refused memfs's credentials"
            " (check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
        )
    elif isinstance(exc, _MISSING):
        reason = "no such bucket (create it first, or check MEMFS_OBJECTS)"
    else:
        reason = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
    return StorageError(
        f"object storage unavailable ({action}): {reason}; nothing was committed by this"
        " request. Retry when the storage answers"
    )


class S3Backend:
    """Objects in ``bucket`` under ``prefix/`` (a folder), through one pooled client."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint: str | None = None,
        region: str = "us-east-1",
        pool_size: int = 64,
        credentials: dict[str, str] | None = None,
        retry_budget: float = RETRY_BUDGET,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint = endpoint
        self.retry_budget = retry_budget
        options: ClientConfig = {
            "connect_timeout": timedelta(seconds=CONNECT_TIMEOUT),
            "timeout": timedelta(seconds=REQUEST_TIMEOUT),
            # Sized for the server's threads: each may hold one connection at a time.
            "pool_max_idle_per_host": str(pool_size),
        }
        if endpoint is not None and endpoint.startswith("http://"):
            options["allow_http"] = True
        config = cast("S3Config", {"region": region, **(credentials or {})})
        if endpoint is not None:
            config["endpoint"] = endpoint
            # A custom endpoint (MinIO, SeaweedFS, R2) takes the bucket in the path.
            config["virtual_hosted_style_request"] = False
        retries: RetryConfig = {
            "max_retries": 10,
            "retry_timeout": timedelta(seconds=retry_budget),
            "backoff": {
                "init_backoff": timedelta(milliseconds=100),
                "max_backoff": timedelta(seconds=2),
                "base": 2,
            },
        }
        # Credentials not given here come from the AWS_* environment (obstore reads it).
        self._store = S3Store(
            bucket,
            prefix=self.prefix or None,
            config=config,
            client_options=options,
            retry_config=retries,
        )
        # Conditional PUTs retry in put_if_absent (see there), never inside the client.
        self._put_store = S3Store(
            bucket,
            prefix=self.prefix or None,
            config=config,
            client_options=options,
            retry_config={"max_retries": 0},
        )

    def __repr__(self) -> str:
        where = f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        return f"S3Backend({where}, endpoint={self.endpoint!r})"

    def put_if_absent(self, key: str, data: bytes) -> bool:
        name = encode(check_key(key))
        deadline = time.monotonic() + self.retry_budget
        failed: BaseException | None = None
        for attempt in range(_PUT_ATTEMPTS):
            try:
                obstore.put(self._put_store, name, data, mode="create")
                return True
            except (AlreadyExistsError, PreconditionError):
                if failed is None:
                    return False
                # An earlier attempt may have landed with its answer lost: the object
                # is ours if it holds exactly our bytes.
                try:
                    return self.get(key) == bytes(data)
                except MissingObject:
                    return False
            except (UnauthenticatedError, PermissionDeniedError, *_MISSING) as exc:
                # Refused credentials or no such bucket: retrying can't help.
                raise unavailable(exc, f"writing {key}") from None
            except _FAILURES as exc:
                failed = exc
            if time.monotonic() + 0.1 * 2**attempt > deadline:
                break
            time.sleep(min(0.1 * 2**attempt, 2.0))
        assert failed is not None
        raise unavailable(failed, f"writing {key}") from None

    def get(self, key: str) -> bytes:
        name = encode(check_key(key))
        try:
            return bytes(obstore.get(self._store, name).bytes())
        except _MISSING:
            raise MissingObject(key) from None
        except _FAILURES as exc:
            raise unavailable(exc, f"reading {key}") from None

    def exists(self, key: str) -> bool:
        name = encode(check_key(key))
        try:
            obstore.head(self._store, name)
            return True
        except _MISSING:
            return False
        except _FAILURES as exc:
            raise unavailable(exc, f"looking up {key}") from None

    def delete(self, key: str) -> None:
        name = encode(check_key(key))
        try:
            obstore.delete(self._store, name)
        except _MISSING:
            pass
        except _FAILURES as exc:
            raise unavailable(exc, f"deleting {key}") from None

    def list(self, prefix: str, start_after: str = "") -> Iterator[str]:
        folder = prefix[: prefix.rfind("/") + 1]  # the deepest folder the prefix names whole
        if folder and any(p in ("", ".", "..") for p in folder[:-1].split("/")):
            return  # no valid key lies there
        if folder.startswith("/"):
            return
        yield from self._walk(folder, prefix, start_after)

    def _children(self, folder: str) -> builtins.list[tuple[str, bool]]:
        """(key, is_folder) of what ``folder`` (``""`` or ``"a/b/"``) holds directly."""
        try:
            result = obstore.list_with_delimiter(self._store, encode(folder[:-1]) or None)
        except _FAILURES as exc:
            raise unavailable(exc, f"listing {folder or '/'}") from None
        entries = [(decode(str(meta["path"])), False) for meta in result["objects"]]
        entries += [(decode(str(name)), True) for name in result["common_prefixes"]]
        # SeaweedFS keeps a folder emptied by deletes and lists it inside itself as a
        # marker object ("log/", which obstore reads as "log"): not a key.
        return [(key, kind) for key, kind in entries if key.startswith(folder) and key != folder]

    def _walk(self, folder: str, prefix: str, start_after: str) -> Iterator[str]:
        for key, is_folder in sorted(self._children(folder), key=_order):
            if is_folder:
                below = key + "/"
                if not (below.startswith(prefix) or prefix.startswith(below)):
                    continue
                # Every key below sorts before start_after: leap over the folder unread.
                if start_after > below and not start_after.startswith(below):
                    continue
                yield from self._walk(below, prefix, start_after)
            elif key.startswith(prefix) and key > start_after:
                yield key
