"""Find the links from one memory to others in its Markdown.

Recognised forms, in document order:
- inline links and images ``[text](target "title")``, ``![alt](<target>)``;
- reference definitions ``[label]: target``;
- wiki links ``[[name]]``, ``[[name|alias]]``, ``[[folder/name#heading]]``.

Inline and reference targets are URLs: ``?query`` and ``#fragment`` are dropped, the
rest is percent-decoded, then an absolute path (``/memories/x.md``) is taken as is
and a relative one (``x.md``, ``./x.md``, ``../x.md``) is resolved against the
source memory's folder. A wiki target is a name, not a URL: it is not
percent-decoded, it is always relative to ``/memories`` (``[[a/b]]`` is
``/memories/a/b.md``, wherever the source lives), only its ``#heading`` is dropped,
and ``.md`` is appended unless its last segment already has an extension (a dot
followed by a letter and up to seven more letters or digits: ``[[diagram.png]]``
stays, ``[[v1.2]]`` becomes ``v1.2.md``).

Ignored: external URLs (any ``scheme:``, ``//host``), anchor-only targets, links in
fenced code blocks or inline code, backslash-escaped brackets, and targets that do
not name a memory (outside ``/memories``, a folder, or characters no memory path
may hold). Results are NFC-normalised, like memory paths.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from urllib.parse import unquote

MEMORIES = "/memories"
MAX_PATH_BYTES = 1024  # design §2: no memory path is longer

_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)", re.DOTALL)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}\Z")
_ESCAPABLE = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
# Characters a memory path may not hold (design §2): controls and backslash.
_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f\\]")

# Link text may hold one level of nested brackets: [a [b] c](x).
_TEXT = r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]"
# A destination is <anything but <>\n> or a run without spaces, with balanced parens.
_DEST = r"<([^<>\n]*)>|((?:[^\s()<]|\((?:[^\s()])*\))+)"
_TITLE = r"""(?:\s+(?:"[^"]*"|'[^']*'|\([^()]*\)))?"""
# A reference definition's optional title must end its line, or it is no definition.
_LINE_TITLE = r"""(?:[ \t]+(?:"[^"\n]*"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*$"""
_LINK = re.compile(
    r"\[\[([^\[\]\n|]+)(?:\|[^\[\]\n]*)?\]\]"  # 1: wiki target
    rf"|{_TEXT}\(\s*(?:{_DEST}){_TITLE}\s*\)"  # 2: <dest>, 3: bare dest
    rf"|^ {{0,3}}{_TEXT}:[ \t]*\n?[ \t]*(?:{_DEST}){_LINE_TITLE}",  # 4, 5: same
    re.MULTILINE,
)
_UNESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_LINES = re.compile(r"[^\n]*\n|[^\n]+\Z")
_BACKTICKS = re.compile(r"`+")
_SPECIAL = re.compile(r"[\\`]")


def extract_links(content: str, source_path: str) -> list[str]:
    """Absolute memory paths (``/memories/...``) that ``content`` links to, each once,
    in order of first appearance. Never raises."""
    if "[" not in content:
        return []  # every form starts with a bracket; most memories hold none
    folder = source_path.rsplit("/", 1)[0] if "/" in source_path else ""
    found: dict[str, None] = {}  # an ordered set
    for match in _LINK.finditer(_mask_code(content)):
        wiki, url = match[1], next((g for g in match.groups()[1:] if g), None)
        if wiki is not None:
            target = _resolve_wiki(wiki)
        elif url is not None:
            target = _resolve_url(url, folder)
        else:
            target = None
        if target is not None:
            found.setdefault(target)
    return list(found)


def _resolve_url(url: str, folder: str) -> str | None:
    """The memory an inline or reference link target names, or None."""
    if _SCHEME.match(url) or url.startswith("//"):
        return None
    path = _UNESCAPE.sub(r"\1", url).split("#", 1)[0].split("?", 1)[0]
    if not path:
        return None  # anchor- or query-only: points into the source itself
    try:
        path = unquote(path, errors="strict")
    except UnicodeDecodeError:
        return None
    return _normalise(path if path.startswith("/") else f"{folder}/{path}")


def _resolve_wiki(name: str) -> str | None:
    """The memory a wiki link names: relative to /memories, ``.md`` when bare."""
    # Inside a table, Obsidian writes [[name\\|alias]]; the backslash is not part of it.
    path = name.split("#", 1)[0].rstrip("\\").strip()
    if not path or path.endswith("/"):
        return None
    if not _EXTENSION.search(path.rsplit("/", 1)[-1]):
        path += ".md"
    return _normalise(f"{MEMORIES}/{path}")


def _normalise(path: str) -> str | None:
    """Resolve ``.``, ``..`` and empty segments; None unless the result is a memory
    path under /memories."""
    if path.endswith("/") or _FORBIDDEN.search(path):
        return None  # a folder, or a character no memory path may hold
    segments: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if not segments:
                return None  # above the root
            segments.pop()
        elif segment not in ("", "."):
            segments.append(segment)
    if len(segments) < 2 or segments[0] != MEMORIES[1:]:
        return None
    result = unicodedata.normalize("NFC", "/" + "/".join(segments))
    return result if len(result.encode("utf-8")) <= MAX_PATH_BYTES else None


def _mask_code(content: str) -> str:
    """``content`` with fenced blocks, inline code and escaped brackets blanked out,
    so no link is found inside them; line structure is kept."""
    out: list[str] = []
    prose: list[str] = []  # lines since the last fenced block; code spans may wrap
    fence: str | None = None
    # Markdown lines end at LF (CRLF included); str.splitlines would also split at
    # form feeds and Unicode separators.
    for line in _LINES.findall(content):
        if fence is not None:
            stripped = line.strip(" \t\r\n")
            if len(stripped) >= len(fence) and stripped == fence[0] * len(stripped):
                fence = None
            out.append("\n")
            continue
        opening = _FENCE_OPEN.match(line)
        if opening and not (opening[1][0] == "`" and "`" in opening[2]):
            out.append(_mask_inline("".join(prose)))
            prose = []
            fence = opening[1]
            out.append("\n")
            continue
        prose.append(line)
    out.append(_mask_inline("".join(prose)))
    return "".join(out)


def _mask_inline(text: str) -> str:
    """Blank out code spans and backslash-escaped brackets/backticks."""
    # Start offsets of every maximal backtick run, by run length: a code span ends at
    # the next run of exactly its opening length (escapes do not apply inside it).
    runs: dict[int, list[int]] = {}
    for match in _BACKTICKS.finditer(text):
        runs.setdefault(len(match[0]), []).append(match.start())
    out: list[str] = []
    i = 0
    while i < len(text):
        # Only a backslash or a backtick changes anything: copy the plain run up to the
        # next one at once (a character at a time cost ~1 µs each, on every commit).
        special = _SPECIAL.search(text, i)
        if special is None:
            out.append(text[i:])
            break
        if special.start() > i:
            out.append(text[i : special.start()])
            i = special.start()
        char = text[i]
        if char == "\\" and i + 1 < len(text) and text[i + 1] in _ESCAPABLE:
            out.append("  " if text[i + 1] in "[]`" else text[i : i + 2])
            i += 2
        elif char == "`":
            opening = _BACKTICKS.match(text, i)
            assert opening is not None  # text[i] is a backtick
            run = len(opening[0])
            starts = runs.get(run, [])
            k = bisect.bisect_left(starts, i + run)
            if k == len(starts):
                out.append("`" * run)  # never closed: the backticks are literal
                i += run
            else:
                end = starts[k] + run
                out.append(re.sub(r"[^\n]", " ", text[i:end]))
                i = end
        else:
            out.append(char)
            i += 1
    return "".join(out)
