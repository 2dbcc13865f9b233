"""The memory action: a delivery stored as a memory (actor ``run:<id>``)."""

from __future__ import annotations

import asyncio
import base64
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
    head = "---\n" + yaml.safe_dump(meta, allow_unicode=True, sort_keys=False) + "---\n"
    try:
        text = body.decode("utf-8")
        if "\x00" in text:
            raise UnicodeDecodeError("utf-8", body, 0, 1, "NUL")
    except UnicodeDecodeError:
        encoded = base64.encodebytes(body).decode()
        text = f"Binary body ({media}, {len(body)} bytes), base64:\n\n```base64\n{encoded}```\n"
    return (head + text).encode()


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
