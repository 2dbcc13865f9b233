"""The inspect page's lists, written by console/inspect_html.py instead of the template,
are byte for byte what the template wrote, for hostile values too: quotes, ``<``, ``&``,
``javascript:`` links, unicode, NUL, very long strings, numbers and flags where text is
expected. ``OLD`` is the template's loops as they were (the template now prints the
four lists these functions write), rendered by the console's own Jinja environment
(autoescape on), so any value the new code forgets to escape makes the two differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import markupsafe
import pytest

from memfs.console import inspect_html, render


def change_items(changes: Sequence[Mapping[str, Any]]) -> markupsafe.Markup:
    """The log changes' filter the template used (one escape per field)."""
    escape = markupsafe.escape
    return markupsafe.Markup(
        "".join(
            f"<li>{escape(c.get('operation', ''))} {escape(c.get('path', ''))}"
            f" v{escape(c.get('version', ''))}</li>"
            for c in changes
        )
    )

OLD = {
    "chunks": """{% for c in items %}
  <li><p class="meta"><span class="id">{{ c.agentId }}:{{ c.path }}@{{ c.version }}</span> #{{ c.chunkIndex }} bytes {{ c.byteStart }}–{{ c.byteEnd }}{% if c.heading %} · {{ c.heading }}{% endif %} · from {{ c.validFrom }}{% if c.validTo %} to {{ c.validTo }}{% endif %}{% if c.superseded %} · superseded{% endif %}{% if c.truncated %} · truncated{% endif %}</p>
  <pre tabindex="0">{{ c.content[:2048] }}</pre></li>
{% endfor %}
""",
    "nodes": """{% for n in items %}
  <li><p class="meta"><span class="id">{{ n.id }}</span> · {{ n.bytes }} bytes{% if n.description %} · {{ n.description }}{% endif %} · from {{ n.validFrom }}{% if n.validTo %} to {{ n.validTo }}{% endif %}{% if n.superseded %} · superseded{% endif %}</p>
  <details><summary>All fields</summary><pre tabindex="0">{{ n|fields }}</pre></details></li>
{% endfor %}
""",
    "edges": """{% for e in items %}
  <li><p class="meta"><span class="id">{{ e.source }}</span> → <span class="id">{{ e.target or e.targetPath }}</span>{% if not e.target %} (missing){% endif %}</p>
  <details><summary>All fields</summary><pre tabindex="0">{{ e|fields }}</pre></details></li>
{% endfor %}
""",
    "log": """{% for step in items %}
  <li><p class="meta">{{ step.get("type", "step") }}{% if step.get("revision") is not none %} · revision {{ step.get("revision") }}{% endif %} · <span class="id">{{ step.get("agentId", "") }}</span>{% if step.get("actor") %} · {{ step.get("actor") }}{% endif %} · {{ step.get("timestamp", "") }}</p>
  {% if step.get("message") %}<p class="message">{{ step.get("message") }}</p>{% endif %}
  {% if step.get("changes") %}<ul class="changes">{{ step.get("changes")|change_items }}{% if step.get("moreChanges") %}<li class="more-changes">… and {{ step.get("moreChanges") }} more changes: <a href="{{ step.get("commitHref") }}">revision {{ step.get("revision") }} in the history</a></li>{% endif %}</ul>{% endif %}
  <details><summary>All fields</summary><pre tabindex="0">{{ step|fields }}</pre></details></li>
{% endfor %}
""",
}

NEW = {
    "chunks": inspect_html.chunk_items,
    "nodes": inspect_html.node_items,
    "edges": inspect_html.edge_items,
    "log": inspect_html.log_items,
}

HOSTILE = [
    "<script>alert(1)</script>",
    "\"><img src=x onerror=alert(1)>",
    "' onmouseover='alert(1)",
    "javascript:alert(document.cookie)",
    "a & b &amp; &#34; &lt;",
    "</pre></li></ol><script>x</script>",
    "é ü 日本 \u2028\u2029 \U0001f600 \u202e",
    "tab\tnl\ncr\r",
    "nul\x00inside",
    "x" * 5000 + "<b>" + "y" * 100,
]


def chunk(text: str, n: int) -> dict[str, Any]:
    return {
        "agentId": f"users/{text}",
        "path": f"/memories/{text}.md",
        "version": n,
        "chunkIndex": n,
        "byteStart": 0,
        "byteEnd": len(text),
        "heading": text if n % 2 else None,
        "validFrom": "2026-12-01T00:00:00.000001Z",
        "validTo": text if n % 3 == 0 else None,
        "superseded": n % 2 == 0,
        "truncated": n % 4 == 0,
        "content": text * 3,
        "contentSha256": "ab" * 32,
    }


def node(text: str, n: int) -> dict[str, Any]:
    return {
        "id": f"users/a:/memories/{text}.md@{n}",
        "agentId": "users/a",
        "path": f"/memories/{text}.md",
        "version": n,
        "contentSha256": "cd" * 32,
        "bytes": n * 1000,
        "description": text if n % 2 else "",
        "validFrom": "2026-12-01T00:00:00.000001Z",
        "validTo": None if n % 3 else text,
        "superseded": bool(n % 2),
        "score": 1.5 if n % 2 else None,
    }


def edge(text: str, n: int) -> dict[str, Any]:
    return {
        "source": f"users/a:/memories/{text}.md@1",
        "target": None if n % 2 else f"users/a:/memories/{text}@2",
        "targetPath": f"/memories/{text}",
        "kind": "wikilink",
        "validFrom": "2026-12-01T00:00:00.000001Z",
        "validTo": None,
    }


def step(text: str, n: int) -> dict[str, Any]:
    if n % 3 == 2:
        return {
            "type": "run",
            "step": text,
            "agentId": f"users/{text}",
            "runId": text,
            "seq": n,
            "attempt": 1,
            "timestamp": "2026-12-01T00:00:00.000001Z",
            "detail": {"output": text, "nested": {"list": [text, 1, None]}},
        }
    changes = [
        {"path": f"/memories/{text}/{i}.md", "operation": "created" if i else text,
         "version": i, "before": None, "after": "ef" * 32, "bytes": 17}
        for i in range(n % 4)
    ]
    value: dict[str, Any] = {
        "type": "commit",
        "agentId": f"users/{text}",
        "revision": n,
        "timestamp": "2026-12-01T00:00:00.000001Z",
        "actor": text if n % 2 else "",
        "message": text if n % 4 else "",
        "changes": changes,
        "changeCount": len(changes) + n,
    }
    if n % 2:
        value["moreChanges"] = n
        value["commitHref"] = f"/console/agents/{text}/history?before={n}&x=\"'#revision-{n}"
    return value


MAKE = {"chunks": chunk, "nodes": node, "edges": edge, "log": step}


@pytest.mark.parametrize("listing", sorted(OLD))
def test_each_list_is_what_the_template_wrote_for_hostile_values(listing: str) -> None:
    env = render.environment()
    env.filters["change_items"] = change_items
    old = env.from_string(OLD[listing])
    items = [MAKE[listing](text, n) for n in range(12) for text in HOSTILE]
    new = str(NEW[listing](items))
    assert new == old.render(items=items)
    # Inert: nothing a sender wrote became markup.
    assert "<script>" not in new and "<img" not in new and "<b>" not in new
    assert "onmouseover='" not in new
    # Each item alone too (no state carried from one item to the next).
    for item in items[:20]:
        assert str(NEW[listing]([item])) == old.render(items=[item])
    assert str(NEW[listing]([])) == ""


def test_a_commits_changes_holding_a_nul_are_escaped_one_by_one() -> None:
    """The log's changes are escaped in one call, joined by NUL; a path holding a NUL
    itself still gives one item per change, each escaped."""
    changes = [
        {"operation": "created", "path": "/memories/a\x00<b>.md", "version": 1},
        {"operation": "created", "path": "/memories/<i>.md", "version": 2},
    ]
    html = inspect_html._changes(changes)
    assert html == (
        "<li>created /memories/a\x00&lt;b&gt;.md v1</li><li>created /memories/&lt;i&gt;.md v2</li>"
    )
    assert html == str(change_items(changes))
