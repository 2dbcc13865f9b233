"""A sender's delivery, judged in one place: verify → exactly once → register → wake.

The HTTP route only reads the body (with the limit ``target`` names) and calls
``accept``; every rule of the flow lives here, so a second edge (an MCP server, a
console) delivers with the same answers:

1. ``target``: one 404 for an unknown agent and an unknown trigger (a sender without a
   key must not learn which agents exist), and the body limit (a memory action can't
   store more than ``memoryBytes``, so the body is refused with 413 before any 202).
2. ``accept``: the Standard Webhooks signature, then the one exactly-once judgement (a
   known webhook id answers its run, 200), then the size of the memory the body makes,
   then the durable record and its indexed run (202), then the runner's wake.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from memfs.config import Settings
from memfs.core.actions.memory import memory_content, memory_size_at_most
from memfs.core.runs import Run, Runs
from memfs.core.store import Store
from memfs.core.triggers import Trigger, Triggers
from memfs.domain.webhook_verify import verify
from memfs.errors import NotFound, PayloadTooLarge


@dataclass(frozen=True)
class Target:
    """The trigger a delivery URL names, and the most body it takes."""

    agent_id: str
    trigger: Trigger
    body_limit: int
    memory_limited: bool  # the limit is memoryBytes (a memory action), not webhookBodyBytes

    def explain(self, exc: PayloadTooLarge) -> PayloadTooLarge:
        """``exc`` (a body over ``body_limit``) saying which limit it hit."""
        if self.memory_limited:
            exc.message += " (the most this trigger's memory action can store: memoryBytes)"
            exc.args = (exc.message,)
        return exc


def target(store: Store, settings: Settings, agent_id: str, trigger_id: str) -> Target:
    try:
        store.get_agent(agent_id)
        # Checked against its newest record rather than read afresh (a sender's
        # retries and a busy trigger's deliveries read the same record each time).
        trigger = Triggers(store.backend).get_seen(store.triggers_seen, agent_id, trigger_id)
    except NotFound:
        raise NotFound(
            "no trigger answers at this URL; check the agent id and trigger id",
            field="triggerId",
        ) from None
    limit = settings.webhook_body_bytes
    if trigger.action.get("type") != "command":
        limit = min(limit, settings.memory_bytes)
    return Target(agent_id, trigger, limit, limit < settings.webhook_body_bytes)


def accept(
    store: Store,
    settings: Settings,
    target: Target,
    body: bytes,
    headers: Mapping[str, str],
    content_type: str,
    *,
    now: float,
    wake: Callable[[], None] | None = None,
) -> tuple[Run, bool]:
    """The run of this delivery: created now (True, the runner woken) or the run of its
    webhook id delivered before (False). Raises Unauthorized for a bad signature and
    PayloadTooLarge for a body whose memory would exceed memoryBytes."""
    trigger = target.trigger
    webhook_id = verify(
        trigger.live_secrets(int(now * 1_000_000)),
        headers,
        body,
        now=now,
        tolerance_seconds=settings.webhook_tolerance_seconds,
    )
    runs = Runs(store)
    # The one exactly-once judgement: a retry is answered from its record without
    # writing (and fsyncing) a temp file; a race past it is settled by put_if_absent.
    known = runs.known(target.agent_id, trigger.trigger_id, webhook_id)
    if known is not None:
        return known, False
    media = content_type[:256]
    if trigger.action.get("type") != "command":
        # The exact memory (frontmatter, and base64 for a binary body) must fit too.
        facts = {"webhookId": webhook_id, "contentType": media, "receivedAt": int(now * 1e6)}
        # The exact size (YAML) only when the cheap bound does not already fit.
        fits = memory_size_at_most(trigger, facts, len(body)) <= settings.memory_bytes
        size = 0 if fits else len(memory_content(trigger, facts, body))
        if size > settings.memory_bytes:
            raise PayloadTooLarge(
                f"this trigger's memory action stores at most {settings.memory_bytes} bytes"
                f" (memoryBytes) and this body makes a memory of {size}; send less, or use a"
                " command action",
                field="body",
            )
    run, created = runs.create(
        target.agent_id, trigger.trigger_id, webhook_id, body, media, trigger.max_attempts
    )
    if created and wake is not None:
        wake()
    return run, created
