"""Write an agent's history as a ``git fast-import`` stream.

``memfs export AGENT --format git | git fast-import`` then gives a real repository:
one commit per revision on ``branch``, each with the memories it changed under
``memories/``. The stream is written commit by commit, so history of any length
streams through in the memory of one commit.

Choices:
- author and committer are both the actor, as ``actor <actor@memfs>`` with ``<``
  and ``>`` removed, control characters and runs of whitespace made one space (``-``
  in the email), and the commit time in whole UTC seconds (``+0000``);
- the message gets a ``Memfs-Revision: N`` trailer; an empty one becomes
  ``memfs revision N``;
- every file is mode 100644; paths are C-style quoted when they hold a quote, a
  backslash or a control character (a superset of what fast-import requires);
- changes of paths with a ``.git`` segment (any case, trailing dots or spaces,
  ``git~1``), which an older memfs accepted, are left out and reported;
- the stream declares ``feature done`` and ends with ``done``, so a stream cut short
  (the exporter died) makes fast-import fail instead of importing part of a history.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import BinaryIO

from memfs.domain.paths import is_git_segment
from memfs.errors import InvalidRequest

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MEMORIES = "/memories/"
_ANGLES = re.compile(r"[<>]")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f]")
_NEEDS_QUOTING = re.compile(rb'["\\\x00-\x1f\x7f]')
_C_ESCAPES = {
    ord('"'): b'\\"',
    ord("\\"): b"\\\\",
    ord("\n"): b"\\n",
    ord("\t"): b"\\t",
}


@dataclass(frozen=True)
class GitCommit:
    """One memfs revision, as the exporter needs it."""

    revision: int
    timestamp: datetime  # aware, UTC
    actor: str
    message: str
    changes: Sequence[tuple[str, bytes | None]]  # (memory path, content | None=deleted)


Skipped = Callable[[int, str], None]


def write_fast_import(
    commits: Iterable[GitCommit],
    out: BinaryIO,
    *,
    branch: str = "refs/heads/main",
    skipped: Skipped | None = None,
) -> None:
    """Write ``commits`` to ``out`` as a fast-import stream, one commit at a time.

    A change of a path with a ``.git`` segment (memfs refuses those now; an older
    history may hold one) is left out and reported to ``skipped(revision, path)``:
    git refuses such a tree, and a checkout would run what it holds. Raises
    InvalidRequest for a naive timestamp or another path git cannot hold.
    """
    out.write(b"feature done\n")
    for mark, commit in enumerate(commits, start=1):
        _write_commit(commit, mark, out, branch.encode("utf-8"), skipped)
    out.write(b"done\n")


def _write_commit(
    commit: GitCommit, mark: int, out: BinaryIO, branch: bytes, skipped: Skipped | None
) -> None:
    ident = _ident(commit.actor) + b" %d +0000" % _seconds(commit.timestamp)
    out.write(b"commit %s\nmark :%d\n" % (branch, mark))
    out.write(b"author %s\ncommitter %s\n" % (ident, ident))
    _write_data(out, _message(commit.message, commit.revision))
    if mark > 1:
        out.write(b"from :%d\n" % (mark - 1))
    for path, content in commit.changes:
        if path.startswith(_MEMORIES) and any(
            is_git_segment(s) for s in path[len(_MEMORIES) :].split("/")
        ):
            if skipped is not None:
                skipped(commit.revision, path)
            continue
        quoted = _quote_path(_git_path(path))
        if content is None:
            out.write(b"D %s\n" % quoted)
        else:
            out.write(b"M 100644 inline %s\n" % quoted)
            _write_data(out, content)
    out.write(b"\n")


def _write_data(out: BinaryIO, payload: bytes) -> None:
    # Exact byte counts make any payload safe, even lines that look like commands.
    out.write(b"data %d\n" % len(payload))
    out.write(payload)
    out.write(b"\n")


def _ident(actor: str) -> bytes:
    """``Name <name@memfs>``: git forbids ``<``, ``>`` and newlines in either part."""
    name = " ".join(_CONTROLS.sub(" ", _ANGLES.sub("", actor)).split()) or "memfs"
    email = name.replace(" ", "-") + "@memfs"
    return f"{name} <{email}>".encode("utf-8", "replace")


def _seconds(timestamp: datetime) -> int:
    """Whole seconds since the epoch (floored: git dates have no fractions)."""
    if timestamp.utcoffset() is None:
        raise InvalidRequest("commit timestamp must be timezone-aware", field="timestamp")
    return (timestamp - _EPOCH) // timedelta(seconds=1)


def _message(message: str, revision: int) -> bytes:
    """The commit message with its ``Memfs-Revision`` trailer; NULs dropped, since
    git treats a commit message as a C string in many places."""
    body = message.replace("\x00", "").strip() or f"memfs revision {revision}"
    return f"{body}\n\nMemfs-Revision: {revision}\n".encode("utf-8", "replace")


def _git_path(path: str) -> bytes:
    """``/memories/a/b.md`` -> ``memories/a/b.md``, refusing what git cannot hold."""
    segments = path[len(_MEMORIES) :].split("/")
    # NUL ends a name inside a git tree object, so no quoting can carry it.
    if (
        not path.startswith(_MEMORIES)
        or "\x00" in path
        or any(s in ("", ".", "..") for s in segments)
    ):
        raise InvalidRequest(f"not a memory path: {path!r}", field="path")
    # git refuses to check out a tree holding a .git entry (any case), so the export
    # would be a repository nobody can use.
    if any(s.lower() == ".git" for s in segments):
        raise InvalidRequest(f"git cannot hold a .git segment: {path!r}", field="path")
    try:
        return path[1:].encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequest(f"path is not UTF-8: {path!r}", field="path") from None


def _quote_path(path: bytes) -> bytes:
    """``path`` as fast-import reads it: C-style quoted when it holds ``"``, ``\\``
    or a control byte; UTF-8 bytes pass through either way."""
    if not _NEEDS_QUOTING.search(path):
        return path
    return b'"' + b"".join(_escape(byte) for byte in path) + b'"'


def _escape(byte: int) -> bytes:
    if byte in _C_ESCAPES:
        return _C_ESCAPES[byte]
    if byte < 0x20 or byte == 0x7F:
        return b"\\%03o" % byte  # octal, as git's unquote_c_style reads it
    return bytes([byte])
