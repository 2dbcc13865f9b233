"""Split a Markdown memory into heading-delimited, size-bounded chunks.

Chunks tile the document exactly (their texts concatenate back to the content) and
carry UTF-8 byte offsets, so ``memory:inspect`` can show where each chunk lives.

Rules:
- YAML frontmatter at the very start (``---`` line, body, closing ``---`` line) is
  its own first chunk; without a closing line there is no frontmatter.
- Every ATX heading (``#``..``######`` followed by a space, tab or end of line,
  indented at most three spaces) outside a fenced code block (three or more
  backticks or tildes, closed by a run of the same character at least as long)
  opens a new chunk; text before the first heading is a chunk with no heading.
- A section longer than ``max_bytes`` is cut into pieces of at most ``max_bytes``,
  at the last line end that fits, else at the last character boundary that fits.
  Every piece is marked ``truncated`` and keeps its section's heading, so a reader
  can put the pieces back together.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# One UTF-8 character is at most four bytes; a smaller bound could not always
# make progress without splitting a character.
MIN_MAX_BYTES = 4

_FRONTMATTER_OPEN = re.compile(rb"---[ \t]*\r?\n")
_FRONTMATTER_CLOSE = re.compile(rb"---[ \t]*(?:\r?\n|\Z)")
_HEADING = re.compile(rb" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*\r?\n?\Z", re.DOTALL)
_CLOSING_HASHES = re.compile(rb"(?:^|[ \t]+)#+\Z")
_FENCE_OPEN = re.compile(rb" {0,3}(`{3,}|~{3,})(.*)", re.DOTALL)


@dataclass(frozen=True)
class Chunk:
    """One contiguous piece of a document, addressed by UTF-8 byte offsets."""

    index: int  # 0-based within the document
    start: int  # byte offset (UTF-8) where the chunk starts
    end: int  # byte offset, exclusive
    heading: str | None  # the heading of the section the chunk belongs to
    text: str  # exactly document_bytes[start:end] decoded
    truncated: bool  # the section was longer than max_bytes and was cut


def split_chunks(content: str, max_bytes: int = 2048) -> list[Chunk]:
    """Split ``content`` into chunks that tile it exactly, each at most ``max_bytes``.

    Raises ValueError when ``max_bytes`` < 4 or ``content`` is not encodable as UTF-8.
    """
    if max_bytes < MIN_MAX_BYTES:
        raise ValueError(f"max_bytes must be at least {MIN_MAX_BYTES}, got {max_bytes}")
    data = content.encode("utf-8")
    chunks: list[Chunk] = []
    for start, end, heading in _sections(data):
        if end - start <= max_bytes:
            pieces, truncated = [(start, end)], False
        else:
            pieces, truncated = _cut(data, start, end, max_bytes), True
        for piece_start, piece_end in pieces:
            chunks.append(
                Chunk(
                    index=len(chunks),
                    start=piece_start,
                    end=piece_end,
                    heading=heading,
                    text=data[piece_start:piece_end].decode("utf-8"),
                    truncated=truncated,
                )
            )
    return chunks


def _lines(data: bytes, start: int) -> list[tuple[int, bytes]]:
    """The lines of ``data[start:]`` with their offsets, line ends kept."""
    lines: list[tuple[int, bytes]] = []
    pos = start
    while pos < len(data):
        nl = data.find(b"\n", pos)
        end = len(data) if nl < 0 else nl + 1
        lines.append((pos, data[pos:end]))
        pos = end
    return lines


def _frontmatter_end(data: bytes) -> int:
    """Offset just past the closing frontmatter line, or 0 when there is none."""
    opening = _FRONTMATTER_OPEN.match(data)
    if opening is None:
        return 0
    for pos, line in _lines(data, opening.end()):
        if _FRONTMATTER_CLOSE.fullmatch(line):
            return pos + len(line)
    return 0


def _sections(data: bytes) -> list[tuple[int, int, str | None]]:
    """(start, end, heading) of the frontmatter and of every heading section."""
    body = _frontmatter_end(data)
    sections: list[tuple[int, int, str | None]] = []
    if body:
        sections.append((0, body, None))
    start, heading = body, None
    fence: bytes | None = None  # the opening fence run while inside a code block
    for pos, line in _lines(data, body):
        if fence is not None:
            if _closes_fence(line, fence):
                fence = None
            continue
        opening = _FENCE_OPEN.match(line)
        # A backtick fence's info string may not contain backticks (CommonMark).
        if opening and not (opening[1][:1] == b"`" and b"`" in opening[2]):
            fence = opening[1]
            continue
        match = _HEADING.match(line)
        if match is None:
            continue
        if pos > start:
            sections.append((start, pos, heading))
        start, heading = pos, _heading_text(match[2] or b"")
    if len(data) > start:
        sections.append((start, len(data), heading))
    return sections


def _closes_fence(line: bytes, fence: bytes) -> bool:
    """Whether ``line`` closes the block ``fence`` opened (same char, no shorter)."""
    stripped = line.strip(b" \t\r\n")
    indent = len(line) - len(line.lstrip(b" "))
    return indent <= 3 and len(stripped) >= len(fence) and stripped == fence[:1] * len(stripped)


def _heading_text(raw: bytes) -> str:
    """The heading's text without its optional closing ``#`` run."""
    return _CLOSING_HASHES.sub(b"", raw).strip(b" \t").decode("utf-8")


def _cut(data: bytes, start: int, end: int, max_bytes: int) -> list[tuple[int, int]]:
    """Ranges of at most ``max_bytes`` covering data[start:end], cut at line ends or
    character boundaries."""
    pieces: list[tuple[int, int]] = []
    while end - start > max_bytes:
        limit = start + max_bytes
        cut = data.rfind(b"\n", start, limit) + 1
        if cut <= start:
            cut = limit
            # Back up over UTF-8 continuation bytes (10xxxxxx) to a character start.
            while data[cut] & 0xC0 == 0x80:
                cut -= 1
        pieces.append((start, cut))
        start = cut
    pieces.append((start, end))
    return pieces
