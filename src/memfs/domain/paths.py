"""Validation of every identifier and path a client can send, before any use.

Agent ids, scope ids, memory paths and simple ids (keys, triggers) are checked here
and nowhere else; what passes is safe to turn into a file name.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from urllib.parse import quote

from memfs.errors import InvalidRequest

# Durable writes name their temp files with this prefix, so no id or path may use it.
TEMP_PREFIX = ".memfs-tmp-"

ROOT = "/memories"
MAX_AGENT_ID_BYTES = 256
MAX_PATH_BYTES = 1024
# One path segment becomes one file name in the working tree (ext4 NAME_MAX).
MAX_SEGMENT_BYTES = 255

_AGENT_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")
_SIMPLE_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")
# C0, DEL and C1: every Unicode "Cc" control character, plus the backslash.
_SURROGATE = re.compile("[\ud800-\udfff]")
_FORBIDDEN_CHAR = re.compile(r"[\x00-\x1f\x7f-\x9f\\]")


# Agent ids already found valid: a commit checks its agent's id at the store's door,
# once per call (a pattern per segment). Bounded like _VALID_PATHS below.
_VALID_AGENTS: set[str] = set()


def agent_id(value: str, *, field: str = "agentId") -> str:
    """An agent id: 1–256 bytes of ``/``-separated ``[A-Za-z0-9._-]`` segments."""
    if type(value) is str and value in _VALID_AGENTS:
        return value
    _check_agent_id(value, field)
    if type(value) is str:
        if len(_VALID_AGENTS) >= _VALID_PATHS_MAX:
            _VALID_AGENTS.clear()
        _VALID_AGENTS.add(value)
    return value


def _check_agent_id(value: str, field: str) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidRequest("agent id must not be empty", field=field)
    if len(value.encode()) > MAX_AGENT_ID_BYTES:
        raise InvalidRequest(f"agent id is longer than {MAX_AGENT_ID_BYTES} bytes", field=field)
    for segment in value.split("/"):
        if segment.startswith(TEMP_PREFIX):
            raise InvalidRequest(
                f"invalid agent id {value!r}: {TEMP_PREFIX} is reserved for temp files",
                field=field,
            )
        if segment in ("", ".", "..") or not _AGENT_SEGMENT.fullmatch(segment):
            raise InvalidRequest(
                f"invalid agent id {value!r}: use '/'-separated segments of "
                "A-Z a-z 0-9 . _ - (no empty, '.' or '..' segment), e.g. users/alice/assistant",
                field=field,
            )


def scope_id(value: str, *, field: str = "scopeId") -> str:
    """A scope id has the syntax of an agent id and covers it and everything below it."""
    return agent_id(value, field=field)


def in_scope(agent: str, scope: str) -> bool:
    """Whether ``agent`` lies under ``scope`` on a segment boundary (``*`` covers all)."""
    return scope == "*" or agent == scope or agent.startswith(scope + "/")


def simple_id(value: str, *, field: str) -> str:
    """A key or trigger id: 1–128 of ``[A-Za-z0-9._-]``."""
    if not isinstance(value, str) or not _SIMPLE_ID.fullmatch(value) or value in (".", ".."):
        raise InvalidRequest(f"{field} must be 1-128 of A-Z a-z 0-9 . _ -", field=field)
    if value.startswith(TEMP_PREFIX):
        raise InvalidRequest(f"{field} can't start with {TEMP_PREFIX} (reserved)", field=field)
    return value


@functools.lru_cache(maxsize=4096)
def agent_dir_name(agent: str) -> str:
    """The folder name of an agent: its id percent-encoded, hashed when too long."""
    encoded = quote(agent, safe="")
    if len(encoded) > 200:
        # '~' never occurs in an agent id nor in its encoding, so this cannot collide.
        encoded = encoded[:160] + "~" + hashlib.sha256(agent.encode()).hexdigest()[:32]
    return encoded


def id_segment(value: str) -> str:
    """An id as one path segment, injectively: percent-encoded (``%`` and ``~``
    included, so ``evt:1`` and ``evt_1`` stay apart), a leading ``.`` as ``%2E`` (no
    dot segment, hidden or ``.git`` name), and hashed past 200 bytes ('~' marks it)."""
    encoded = quote(value, safe="").replace("~", "%7E")
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    if len(encoded) > 200:
        encoded = encoded[:160] + "~" + hashlib.sha256(value.encode()).hexdigest()[:32]
    return encoded


# Paths already found valid, as given → as normalised: checking one (NFC, UTF-8 length,
# three patterns, every segment) was a tenth of a read by path. Bounded: emptied when
# full. Only valid paths are kept, and validity depends on the text alone.
_VALID_PATHS: dict[str, str] = {}
_VALID_PATHS_MAX = 8192


def memory_path(value: str, *, field: str = "path") -> str:
    """A memory path, NFC-normalised: ``/memories/`` then non-empty clean segments."""
    if type(value) is str:  # a str subclass could compare equal yet be another type
        known = _VALID_PATHS.get(value)
        if known is not None:
            return known
    elif not isinstance(value, str):
        raise InvalidRequest("path must be a string", field=field)
    given = value
    # An ASCII path is its own NFC form (and one byte a character, no surrogate): a new
    # path is checked once per create, so the common case skips what it cannot need.
    ascii = value.isascii()
    if not ascii:
        value = unicodedata.normalize("NFC", value)
    if not value.startswith(ROOT + "/") or value == ROOT + "/":
        raise InvalidRequest(
            f"path must start with {ROOT}/ and name a file, e.g. /memories/notes/todo.md",
            field=field,
        )
    _check_segments(value, field, ascii=ascii)
    if type(given) is str:
        if len(_VALID_PATHS) >= _VALID_PATHS_MAX:
            _VALID_PATHS.clear()
        _VALID_PATHS[given] = value
    return value


def folder_prefix(value: str, *, field: str = "pathPrefix") -> str:
    """A folder to list: '' or 'a/b' (relative to /memories) or '/memories/a/b'."""
    if not isinstance(value, str):
        raise InvalidRequest("pathPrefix must be a string", field=field)
    value = unicodedata.normalize("NFC", value).rstrip("/")
    if value in ("", ROOT):
        return ROOT
    if value.startswith(ROOT + "/"):
        full = value
    elif value.startswith("/"):
        raise InvalidRequest(
            f"pathPrefix must be relative to {ROOT} or start with {ROOT}/", field=field
        )
    else:
        full = f"{ROOT}/{value}"
    _check_segments(full, field)
    return full


def _check_segments(value: str, field: str, *, ascii: bool = False) -> None:
    """``value``'s length and characters, then each segment (``ascii``: the caller
    found it ASCII, so its length is its size and it holds no surrogate)."""
    size = len(value) if ascii else len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_PATH_BYTES:
        raise InvalidRequest(f"path is longer than {MAX_PATH_BYTES} bytes", field=field)
    if not ascii and _SURROGATE.search(value):
        raise InvalidRequest("path is not valid UTF-8", field=field)
    if _FORBIDDEN_CHAR.search(value):
        raise InvalidRequest(
            "path must not contain control characters, NUL or backslashes", field=field
        )
    # An ASCII segment names a git folder only if it holds "git" in some case.
    git = not ascii or "git" in value.lower()
    for segment in value[len(ROOT) + 1 :].split("/"):
        if segment in ("", ".", ".."):
            raise InvalidRequest(f"path {value!r} has an empty, '.' or '..' segment", field=field)
        if segment.startswith(TEMP_PREFIX):
            raise InvalidRequest(
                f"a path segment can't start with {TEMP_PREFIX} (reserved for temp files)",
                field=field,
            )
        if (len(segment) if ascii else len(segment.encode())) > MAX_SEGMENT_BYTES:
            raise InvalidRequest(
                f"a path segment is longer than {MAX_SEGMENT_BYTES} bytes", field=field
            )
        if git and is_git_segment(segment):
            raise InvalidRequest(
                f"path {value!r} has a segment {segment!r}: .git is reserved (an operator's"
                " git in the working tree would run what it holds)",
                field=field,
            )


def is_git_segment(segment: str) -> bool:
    """Whether a path segment names a git folder on some filesystem: ``.git`` in any case,
    with trailing dots or spaces (Windows drops them), or its 8.3 short name ``git~1``."""
    folded = segment.rstrip(". ").casefold()
    return folded in (".git", "git~1")


def parent_folders(path: str) -> list[str]:
    """The folders above a memory path, below /memories: /memories/a/b/c.md → a, a/b."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(3, len(parts))]
