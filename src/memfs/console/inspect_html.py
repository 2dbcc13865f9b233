"""The inspect page's four lists (chunks, graph nodes, graph edges, log) as HTML.

Written here, not in the template, for the reason ``render.listing_rows`` is: at 100k
memories a page holds about 300 items and a thousand log changes, and Jinja's attribute
lookups, tests and one autoescape call per fragment were most of the page's time
(33-35 ms alone, 51 ms next to the API's bulk inspect answer, against a 50 ms budget).
The markup is byte for byte what the template wrote (tests/test_console_inspect_html.py
renders both for hostile values), and the escaping is the template's: every value goes
through ``markupsafe.escape`` (the same function autoescape calls), once per value or
once per run of plain text that holds several values (escaping is character by
character, so escaping ``a + " " + b`` is escaping ``a``, then ``" "``, then ``b``).
Nothing a model or a sender wrote reaches the page unescaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from markupsafe import Markup, escape

from memfs.console.render import fields

CHUNK_TEXT = 2048  # characters of a chunk's content shown (the API gives them all)


def _text(value: Any) -> str:
    return str(escape(value))


def chunk_items(chunks: Iterable[Mapping[str, Any]]) -> Markup:
    out: list[str] = []
    for c in chunks:
        head = _text(f"{c['agentId']}:{c['path']}@{c['version']}")
        meta = f"{c['chunkIndex']} bytes {c['byteStart']}–{c['byteEnd']}"
        if c["heading"]:
            meta += f" · {c['heading']}"
        meta += f" · from {c['validFrom']}"
        if c["validTo"]:
            meta += f" to {c['validTo']}"
        if c["superseded"]:
            meta += " · superseded"
        if c["truncated"]:
            meta += " · truncated"
        out.append(
            f'  <li><p class="meta"><span class="id">{head}</span> #{_text(meta)}</p>\n'
            f'  <pre tabindex="0">{_text(c["content"][:CHUNK_TEXT])}</pre></li>\n'
        )
    return Markup("".join(out))


def _details(item: Mapping[str, Any]) -> str:
    box = _text(fields(item))
    return f'  <details><summary>All fields</summary><pre tabindex="0">{box}</pre></details></li>\n'


def node_items(nodes: Iterable[Mapping[str, Any]]) -> Markup:
    out: list[str] = []
    for n in nodes:
        meta = f" · {n['bytes']} bytes"
        if n["description"]:
            meta += f" · {n['description']}"
        meta += f" · from {n['validFrom']}"
        if n["validTo"]:
            meta += f" to {n['validTo']}"
        if n["superseded"]:
            meta += " · superseded"
        out.append(
            f'  <li><p class="meta"><span class="id">{_text(n["id"])}</span>{_text(meta)}</p>\n'
            + _details(n)
        )
    return Markup("".join(out))


def edge_items(edges: Iterable[Mapping[str, Any]]) -> Markup:
    out: list[str] = []
    for e in edges:
        target = e["target"]
        shown = _text(target or e["targetPath"])
        missing = "" if target else " (missing)"
        out.append(
            f'  <li><p class="meta"><span class="id">{_text(e["source"])}</span> → '
            f'<span class="id">{shown}</span>{missing}</p>\n' + _details(e)
        )
    return Markup("".join(out))


def _changes(changes: Sequence[Mapping[str, Any]]) -> str:
    """The ``<li>`` items of a step's changes ("operation path vN" each), escaped in one
    call: the lines are joined by NUL, which escaping leaves alone, then each NUL
    becomes the markup between two items. A line holding a NUL itself (no valid path
    does) is escaped line by line instead."""
    lines = [
        f"{c.get('operation', '')} {c.get('path', '')} v{c.get('version', '')}" for c in changes
    ]
    joined = "\0".join(lines)
    if joined.count("\0") == len(lines) - 1:
        return "<li>" + _text(joined).replace("\0", "</li><li>") + "</li>"
    return "".join(f"<li>{_text(line)}</li>" for line in lines)


def log_items(steps: Iterable[Mapping[str, Any]]) -> Markup:
    out: list[str] = []
    for step in steps:
        get = step.get
        kind = _text(get("type", "step"))
        revision = get("revision")
        if revision is not None:
            kind += f" · revision {_text(revision)}"
        tail = ""
        if get("actor"):
            tail = f" · {get('actor')}"
        tail += f" · {get('timestamp', '')}"
        part = [
            f'  <li><p class="meta">{kind} · <span class="id">{_text(get("agentId", ""))}'
            f"</span>{_text(tail)}</p>\n"
        ]
        if get("message"):
            part.append(f'<p class="message">{_text(get("message"))}</p>')
        changes = get("changes")
        if changes:
            part.append(f'<ul class="changes">{_changes(changes)}')
            more = get("moreChanges")
            if more:
                part.append(
                    f'<li class="more-changes">… and {_text(more)} more changes: '
                    f'<a href="{_text(get("commitHref"))}">revision {_text(revision)}'
                    " in the history</a></li>"
                )
            part.append("</ul>")
        part.append(_details(step))
        out.append("".join(part))
    return Markup("".join(out))
