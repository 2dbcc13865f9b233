"""Templates and Markdown for the console: everything a model or a sender wrote is text.

Jinja2 escapes every value (autoescape on for all templates). Markdown is rendered by
markdown-it with raw HTML off, so ``<script>`` in a memory is shown, not run; links
whose scheme could run code or smuggle content (``javascript:``, ``vbscript:``,
``data:``, ``file:``) are not made links at all, and images are shown as their text
and address, never fetched: the console loads nothing but its own files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any
from urllib.parse import quote

import jinja2
import markupsafe
from jinja2.utils import url_quote
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup

from memfs.domain.commits import format_ts
from memfs.domain.records import MemoryRow

_REFUSED_SCHEMES = ("javascript:", "vbscript:", "data:", "file:")
RENDER_LIMIT = 256 * 1024  # larger contents are shown raw only (rendering is the costly part)


def _safe_link(url: str) -> bool:
    # Browsers ignore ASCII whitespace and control characters inside a scheme
    # ("java\tscript:"), so they are dropped before comparing.
    squeezed = "".join(c for c in url if c > " " and c != "\x7f").lower()
    return not squeezed.startswith(_REFUSED_SCHEMES)


def _image_as_text(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env)
    src = str(token.attrGet("src") or "")
    return f'<span class="image">[image: {_escape(alt)}{" " + _escape(src) if src else ""}]</span>'


def _escape(text: str) -> str:
    return str(markupsafe.escape(text))


def _link_open(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    # Links leave the console: they must not tell the target where they came from, nor
    # give it a handle on this window.
    tokens[idx].attrSet("rel", "noopener noreferrer nofollow")
    return self.renderToken(tokens, idx, options, env)


def markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.validateLink = _safe_link  # type: ignore[method-assign]
    md.add_render_rule("image", _image_as_text)
    md.add_render_rule("link_open", _link_open)
    return md


_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")


def looks_binary(data: bytes) -> bool:
    """Control bytes (not tab, newline, CR, form feed) or text that is not UTF-8: shown
    as escaped raw text, never rendered."""
    if _CONTROL.search(data):
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def segment(value: str) -> str:
    """One URL path segment (an agent id keeps its slashes encoded, as in /v1)."""
    return quote(value, safe="")


def memory_href(path: str) -> str:
    """``/memories/a b/c.md`` → ``a%20b/c.md``, each segment encoded on its own (one
    call: with '/' kept, quoting the whole is quoting each segment)."""
    return quote(path.removeprefix("/memories/"), safe="/")


def breakable(value: str) -> markupsafe.Markup:
    """An id escaped, with a line-break opportunity after each '/' (narrow screens)."""
    return markupsafe.Markup("/<wbr>").join(markupsafe.escape(part) for part in value.split("/"))


def timestamp(value: int | None) -> markupsafe.Markup:
    """A <time> to the second, its exact instant (microseconds) in ``datetime``."""
    if value is None:
        return markupsafe.Markup("—")
    exact = format_ts(value)  # digits, '-', ':', '.', 'T' and 'Z' only: nothing to escape
    shown = exact[:19].replace("T", " ") + "Z"
    # Markup.format escapes each argument (a third of a 200-row page's time): not needed.
    return markupsafe.Markup(f'<time datetime="{exact}" title="{exact}">{shown}</time>')


def listing_rows(base: str, folders: Sequence[str], memories: Sequence[MemoryRow]) -> Markup:
    """The ``<tr>`` rows of a folder's listing (folders, then memories). Written here,
    not in the template: per row, Jinja's attribute lookups, filters and autoescape
    calls were most of a 200-row page (5x the JSON API's time). The same escaping
    applies: every text a model or a sender wrote (names, descriptions) goes through
    ``markupsafe.escape``; the URLs are percent-encoded, so nothing in them is markup;
    a commit's rows share its timestamp, formatted once."""
    escape = markupsafe.escape
    base = str(escape(base))
    out: list[str] = []
    for f in folders:
        href = f"{base}?folder={url_quote(f, for_qs=True)}"
        name = escape(f.rsplit("/", 1)[-1])
        out.append(
            f'<tr class="folder"><td><a href="{href}">{name}/</a></td>'
            "<td></td><td></td><td></td><td></td></tr>\n"
        )
    times: dict[int, str] = {}
    for m in memories:
        when = times.get(m.updated_at)
        if when is None:
            when = times[m.updated_at] = str(timestamp(m.updated_at))
        out.append(
            f'<tr><td><a class="memory" href="{base}/memories/{memory_href(m.path)}">'
            f"{escape(m.path.rsplit('/', 1)[-1])}</a></td>"
            f"<td>{escape(m.description or '')}</td>"
            f'<td class="num">{m.version}</td><td class="num">{m.size}</td>'
            f"<td>{when}</td></tr>\n"
        )
    return Markup("".join(out))


_ENCODE_ANY = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": ")).encode
_ENCODE_STR = json.encoder.encode_basestring  # what the encoder above does for a str


def _unencodable(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# The C encoder ``_ENCODE_ANY`` builds anew on every call (``JSONEncoder.iterencode``),
# made once: a log step's box holds one object per change, a thousand on a page.
# Same arguments as that call (no circular check: an item is decoded JSON).
_C_ENCODER = (
    json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, _unencodable, _ENCODE_STR, None, ": ", ", ", False, False, True
    )
    if json.encoder.c_make_encoder is not None  # type: ignore[attr-defined]
    else None
)


_SCALARS = frozenset({str, int, float, bool, type(None)})
_C_FLAT = (
    json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, _unencodable, _ENCODE_STR, None, ": ", ",\n  ", False, False, True
    )
    if _C_ENCODER is not None
    else None
)


def encode_value(value: Any) -> str:
    """``_ENCODE_ANY(value)``, without its per-call overhead for the values an inspect
    item is made of (byte for byte the same: tests/test_console.py)."""
    kind = type(value)
    if kind is str:
        return _ENCODE_STR(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if (kind is dict or kind is list) and _C_ENCODER is not None:
        return "".join(_C_ENCODER(value, 0))
    return _ENCODE_ANY(value)


def fields(value: Mapping[str, Any]) -> str:
    """An inspect item's "All fields" box: one field a line (a list's items one a line
    too), each value compact JSON. ``tojson(indent=2)`` did this with the pure-Python
    JSON encoder (an indent turns the C one off): most of the inspect page's render
    time. Plain text: autoescape makes it safe in the page."""
    if _C_FLAT is not None and value and all(
        type(k) is str and type(v) in _SCALARS for k, v in value.items()
    ):
        # A flat item (a node, an edge: text, numbers, flags) in one encoder call, its
        # fields one a line by the item separator (a newline inside a value is "\n").
        return "{\n  " + "".join(_C_FLAT(value, 0))[1:-1] + "\n}"
    lines = []
    for key, item in value.items():
        if isinstance(item, list) and item:
            inner = ",\n    ".join(encode_value(x) for x in item)
            lines.append(f"  {encode_value(key)}: [\n    {inner}\n  ]")
        else:
            lines.append(f"  {encode_value(key)}: {encode_value(item)}")
    return "{\n" + ",\n".join(lines) + "\n}" if lines else "{}"


def environment() -> jinja2.Environment:
    folder = resources.files("memfs.console") / "templates"
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(folder)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        # Templates ship with the package and do not change under a running server;
        # checking their files' times on every page cost as much as rendering one.
        auto_reload=False,
    )
    env.filters["seg"] = segment
    env.filters["fields"] = fields
    env.filters["mhref"] = memory_href
    env.filters["ts"] = timestamp
    env.filters["wbr"] = breakable
    env.filters["q"] = lambda value: quote(str(value), safe="")
    return env


def static_file(name: str) -> bytes | None:
    """One of the console's own static files, by exact name (no paths, no guessing)."""
    if name not in STATIC_TYPES:
        return None
    return (resources.files("memfs.console") / "static" / name).read_bytes()


STATIC_TYPES = {"console.css": "text/css; charset=utf-8"}


_FRONTMATTER = re.compile(r"\A---[ \t]*\r?\n.*?^---[ \t]*(?:\r?\n|\Z)", re.S | re.M)


def body_of(text: str) -> str:
    """The Markdown below a frontmatter block (its fields are shown on their own)."""
    return _FRONTMATTER.sub("", text, count=1)


Context = dict[str, Any]
