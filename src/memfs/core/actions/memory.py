"""The memory action: a delivery stored as a memory (actor ``run:<id>``)."""

from __future__ import annotations

import asyncio
import base64
import functools
import re
from collections.abc import Callable
from typing import Any

from memfs.core.actions.base import Outcome
from memfs.core.runs import Run
from memfs.core.store import Store
from memfs.core.triggers import Trigger
from memfs.domain import paths
from memfs.domain.commits import format_ts


def memory_content(trigger: Trigger, delivery: dict[str, Any], body: bytes) -> bytes:
    """A delivery as a memory: frontmatter with the prompt and delivery facts, then the body."""
    import yaml

    media = str(delivery.get("contentType") or "application/octet-stream")
    meta = {
        "description": f"webhook {delivery['webhookId']} for trigger {trigger.trigger_id}",
        "prompt": trigger.prompt,
        "webhookId": delivery["webhookId"],
        "triggerId": trigger.trigger_id,
        "contentType": media,
        "receivedAt": format_ts(int(delivery["receivedAt"])),
    }
    yaml_text = plain_yaml(meta)
    if yaml_text is None:
        yaml_text = yaml.safe_dump(meta, allow_unicode=True, sort_keys=False)
    head = "---\n" + yaml_text + "---\n"
    try:
        text = body.decode("utf-8")
        if "\x00" in text:
            raise UnicodeDecodeError("utf-8", body, 0, 1, "NUL")
    except UnicodeDecodeError:
        encoded = base64.encodebytes(body).decode()
        text = f"Binary body ({media}, {len(body)} bytes), base64:\n\n```base64\n{encoded}```\n"
    return (head + text).encode()


# A value YAML writes as it is (plain) on one line: printable ASCII with none of the
# indicators YAML reads specially where they stand (a first character of
# "-?:,[]{}#&*!|>'\"%@`", ": ", " #"), no trailing space. A value that reads as another
# type (YAML's resolver says: true, 1.5, a date) is written in single quotes instead,
# as is a date-time's ':'.
_PLAIN = re.compile(r"[A-Za-z0-9_(][A-Za-z0-9 _.,;/()+=@'!?&*%~^$-]*")
_QUOTABLE = re.compile(r"[A-Za-z0-9_(][A-Za-z0-9 _.,;:/()+=@!?&*%~^$-]*")
_STR = "tag:yaml.org,2002:str"
WIDTH = 80  # PyYAML's: a longer line may be folded at a space


@functools.cache
def _resolve() -> Callable[[str], str]:
    """The tag YAML's resolver gives a plain scalar (what a reader would parse)."""
    import yaml

    resolver = yaml.resolver.Resolver()
    resolve: Callable[[type, str, tuple[bool, bool]], str] = resolver.resolve
    return lambda value: str(resolve(yaml.ScalarNode, value, (True, False)))


def plain_yaml(meta: dict[str, str]) -> str | None:
    """``yaml.safe_dump(meta, allow_unicode=True, sort_keys=False)`` without the
    emitter, for keys and values YAML writes plain or single-quoted on one line each
    (None for any other mapping: the caller asks YAML). The emitter was the largest
    share of a memory run's Python; ``tests/test_memory_content.py`` checks these
    bytes against PyYAML's by property test."""
    resolve = _resolve()
    lines = []
    for key, value in meta.items():
        if not _PLAIN.fullmatch(key) or key.endswith(" ") or resolve(key) != _STR:
            return None
        if value.endswith(" "):
            return None
        if _PLAIN.fullmatch(value):
            if resolve(value) == _STR:
                line = f"{key}: {value}"
            elif "'" in value:
                return None
            else:
                line = f"{key}: '{value}'"
        elif _QUOTABLE.fullmatch(value) and resolve(value) != _STR:
            line = f"{key}: '{value}'"
        else:
            return None
        if len(line) > WIDTH:
            return None
        lines.append(line + "\n")
    return "".join(lines)


def memory_size_at_most(trigger: Trigger, delivery: dict[str, Any], body_bytes: int) -> int:
    """An upper bound of ``len(memory_content(trigger, delivery, body))`` for a body of
    ``body_bytes``, without YAML: the delivery path checks the memory's size on every
    delivery, and emitting the frontmatter was a third of its CPU. Only a bound over
    ``memoryBytes`` needs the exact size (``tests/test_core_deliveries.py`` checks the
    bound against ``memory_content`` by property test).

    Why it holds: YAML writes a scalar plain, single-quoted (each ``'`` doubled) or
    double-quoted (an escape is at most 10 bytes for a 4-byte character, 4 for a 1-byte
    one), folded at ~80 columns (a fold adds under 8 bytes per 70 written): under 5
    bytes per byte of the value, plus quotes and its key. The body is its UTF-8 bytes as
    they are, or base64 in 76-character lines inside a short wrapper."""
    media = str(delivery.get("contentType") or "application/octet-stream")
    webhook_id = str(delivery["webhookId"])
    values = (
        f"webhook {webhook_id} for trigger {trigger.trigger_id}",
        trigger.prompt,
        webhook_id,
        trigger.trigger_id,
        media,
        format_ts(int(delivery["receivedAt"])),
    )
    head = 8 + sum(5 * len(v.encode()) + 64 for v in values)
    base64_chars = 4 * ((body_bytes + 2) // 3)
    binary = base64_chars + base64_chars // 76 + 2 + len(media.encode()) + 80
    return head + max(body_bytes, binary)


def memory_path(trigger: Trigger, webhook_id: str) -> str:
    """Where a delivery is stored: distinct webhook ids always give distinct paths."""
    template = str(trigger.action.get("path"))
    return paths.memory_path(
        template.replace("{triggerId}", paths.id_segment(trigger.trigger_id)).replace(
            "{webhookId}", paths.id_segment(webhook_id)
        )
    )


class MemoryAction:
    name = "memory"

    def __init__(self, store: Store) -> None:
        self.store = store

    async def perform(
        self, run: Run, attempt: int, trigger: Trigger, delivery: dict[str, Any], body: bytes
    ) -> Outcome:
        return await asyncio.to_thread(self.perform_blocking, run, attempt, trigger, delivery, body)

    def perform_blocking(
        self, run: Run, attempt: int, trigger: Trigger, delivery: dict[str, Any], body: bytes
    ) -> Outcome:
        """The attempt on the caller's thread (the runner's: ``actions/base``)."""
        self._write(run, trigger, delivery, body)
        return Outcome(ok=True)

    def _write(self, run: Run, trigger: Trigger, delivery: dict[str, Any], body: bytes) -> None:
        self.store.write(
            run.agent_id,
            memory_path(trigger, run.webhook_id),
            memory_content(trigger, delivery, body),
            actor=f"run:{run.run_id}",
            message=f"webhook {run.webhook_id} via trigger {trigger.trigger_id}",
        )
