"""A delivery's memory is written with the frontmatter YAML would write, byte for byte.

``actions.memory.plain_yaml`` writes the common frontmatter (one-line ASCII values,
plain or single-quoted) without PyYAML's emitter; anything else goes to the emitter.
These property tests feed both writers the spellings YAML treats specially (booleans,
null, numbers, dates, indicators, quotes, colons, hashes, long lines, non-ASCII) and
require the same bytes, or the fast path to step aside.
"""

from __future__ import annotations

import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from memfs.core.actions.memory import memory_content, plain_yaml
from memfs.core.triggers import Trigger

_TRICKY = [
    "", " ", "a ", " a", "yes", "No", "ON", "off", "true", "False", "null", "~", "y", "n",
    "0", "07", "08", "0x1f", "0o17", "1_000", "1:20", "190:20:30", "1.5", "1e3", ".inf",
    "-.inf", ".NaN", "-1", "+1", "2024-01-01", "2024-13-01", "2026-12-02T07:00:00.123456Z",
    "2001-12-14 21:59:43.10 -5", "a: b", "a:b", "a:", "a #c", "a#c", "'q'", '"q"', "it's",
    "(x)", "[a]", "{a: 1}", "- a", "-a", "?a", "a?", "&x", "*x", "!x", "|", ">", "%x",
    "@x", "`x", "=", "<<", "a, b", "a; b", "a,b", "note (draft), v2/3 + more", "x" * 80,
    ("word " * 20).strip(), "é", "a\u2028b", "a\tb", "a\nb", "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W",
    "application/json", "text/plain; charset=utf-8", "file the delivery", "a & b", "a * b",
    "$HOME", "^x", "100%", "a -", "a-", "_x", "(", "a ( b",
]  # fmt: skip
_VALUES = st.one_of(
    st.sampled_from(_TRICKY),
    st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=90),
    st.text(max_size=20),
    st.lists(st.sampled_from(_TRICKY), min_size=1, max_size=4).map(" ".join),
)
_KEYS = st.sampled_from(
    ["description", "prompt", "webhookId", "triggerId", "contentType", "receivedAt", "yes",
     "1", "on", "a b", "k" * 70]
)  # fmt: skip


def _yaml(meta: dict[str, str]) -> str:
    return yaml.safe_dump(meta, allow_unicode=True, sort_keys=False)


@settings(max_examples=600, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=6))
@example({"receivedAt": "2026-12-02T07:00:00.123456Z", "prompt": "file the delivery"})
@example({"prompt": "a:b"})
@example({"prompt": "yes"})
def test_the_fast_frontmatter_is_the_bytes_yaml_writes_or_steps_aside(
    meta: dict[str, str],
) -> None:
    fast = plain_yaml(meta)
    if fast is not None:
        assert fast == _yaml(meta), meta
        assert yaml.safe_load(fast) == meta


def test_a_common_delivery_takes_the_fast_path_and_its_memory_is_yamls() -> None:
    trigger = Trigger(
        agent_id="a",
        trigger_id="github",
        seq=1,
        prompt="File the delivery, then summarise it (briefly).",
        action={"type": "memory", "path": "inbox/{webhookId}.md"},
        max_attempts=3,
        secrets=(),
        created_at=1,
        updated_at=1,
    )
    delivery = {
        "webhookId": "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W",
        "contentType": "application/json",
        "receivedAt": 1_764_658_800_123_456,
    }
    made = memory_content(trigger, delivery, b'{"a": 1}')
    head = made.decode().split("---\n")[1]
    meta = yaml.safe_load(head)
    assert plain_yaml(meta) is not None  # the fast path wrote it
    assert head == _yaml(meta)  # and YAML would have written the same bytes
    assert meta["receivedAt"] == "2025-12-02T07:00:00.123456Z"
