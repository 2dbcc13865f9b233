"""Webhook triggers of an agent: what a delivery runs, and the secrets it is signed with.

A trigger's history is a sequence of immutable records
``agents/<dir>/.memfs/triggers/<triggerId>/<seq:010>.json`` (create-if-absent, so two
racing updates cannot both win); the newest is the trigger, a ``deleted`` record ends
it. Rotating a secret writes a record whose ``secrets`` keep the old one, with an
expiry 24 hours ahead, so senders can switch over without a failed delivery.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from memfs.canonical import layout
from memfs.canonical.backend import Backend, MissingObject
from memfs.core import cas
from memfs.core.store import Store
from memfs.domain import paths
from memfs.domain.commits import format_ts, now_us, parse_ts
from memfs.domain.shapes import TRIGGER, TRIGGER_WITH_SECRET
from memfs.domain.webhook_verify import generate_secret, parse_secret
from memfs.errors import Conflict, Forbidden, InvalidRequest, NotFound

ROTATION_OVERLAP_US = 24 * 3600 * 1_000_000
DEFAULT_PATH = "/memories/inbox/{triggerId}/{webhookId}.md"
MAX_PROMPT = 64 * 1024
_SEQ_DIGITS = 10
_TRIES = 50  # racing writers of one trigger: each loss re-decides on the winner's record
R = TypeVar("R")

CommandGuard = Callable[[], None]


@dataclass(frozen=True)
class Secret:
    value: str
    expires_at: int | None = None  # None: current


@dataclass(frozen=True)
class Trigger:
    agent_id: str
    trigger_id: str
    seq: int
    prompt: str
    action: dict[str, Any]
    max_attempts: int
    secrets: tuple[Secret, ...]
    created_at: int
    updated_at: int

    def to_json(self, *, with_secret: bool = False) -> dict[str, Any]:
        values = (
            self.agent_id,
            self.trigger_id,
            self.prompt,
            self.action,
            self.max_attempts,
            format_ts(self.created_at),
            format_ts(self.updated_at),
        )
        if with_secret:
            return TRIGGER_WITH_SECRET.build(*values, self.secrets[0].value)
        return TRIGGER.build(*values)

    def live_secrets(self, now: int) -> list[str]:
        return [s.value for s in self.secrets if s.expires_at is None or s.expires_at > now]


def _prefix(agent_id: str, trigger_id: str) -> str:
    return f"{layout.agent_prefix(agent_id)}triggers/{trigger_id}/"


def _record_key(prefix: str, seq: int) -> str:
    return f"{prefix}{seq:0{_SEQ_DIGITS}d}.json"


def record_key(agent_id: str, trigger_id: str, seq: int) -> str:
    """The key of record ``seq`` of a trigger (record seq + 1 is its successor)."""
    return _record_key(_prefix(agent_id, trigger_id), seq)


# The triggers a process read last, by (agent id, trigger id): the bytes of the record
# each was read from, and the trigger (``Triggers.get_seen``; the Store holds one).
Seen = dict[tuple[str, str], tuple[bytes, Trigger]]
SEEN_MAX = 4096


def check_action(value: object) -> dict[str, Any]:
    if value is None:
        return {"type": "memory", "path": DEFAULT_PATH}
    if not isinstance(value, dict):
        raise InvalidRequest("action must be an object", field="action")
    kind = value.get("type")
    if kind == "memory":
        extra = set(value) - {"type", "path"}
        if extra:
            raise InvalidRequest(f"unknown action field {sorted(extra)[0]!r}", field="action")
        template = value.get("path", DEFAULT_PATH)
        if not isinstance(template, str):
            raise InvalidRequest("action.path must be a string", field="action.path")
        probe = template.replace("{triggerId}", "t").replace("{webhookId}", "w")
        if "{" in probe or "}" in probe:
            raise InvalidRequest(
                "action.path may use only {triggerId} and {webhookId}", field="action.path"
            )
        paths.memory_path(probe, field="action.path")
        return {"type": "memory", "path": template}
    if kind == "command":
        extra = set(value) - {"type", "argv", "timeoutSeconds"}
        if extra:
            raise InvalidRequest(f"unknown action field {sorted(extra)[0]!r}", field="action")
        argv = value.get("argv")
        if (
            not isinstance(argv, list)
            or not argv
            or not all(isinstance(a, str) and a and "\x00" not in a for a in argv)
        ):
            raise InvalidRequest(
                "action.argv must be a non-empty list of strings", field="action.argv"
            )
        timeout = value.get("timeoutSeconds", 60)
        if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 86_400:
            raise InvalidRequest(
                "action.timeoutSeconds must be an integer from 1 to 86400",
                field="action.timeoutSeconds",
            )
        return {"type": "command", "argv": list(argv), "timeoutSeconds": timeout}
    raise InvalidRequest("action.type must be 'memory' or 'command'", field="action.type")


class Triggers:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    @classmethod
    def of(cls, store: Store) -> Triggers:
        """The triggers of ``store``'s data: how an edge reaches them (never the backend)."""
        return cls(store.backend)

    def _latest(self, agent_id: str, trigger_id: str) -> dict[str, Any] | None:
        last = None
        for key in self.backend.list(_prefix(agent_id, trigger_id)):
            last = key
        if last is None:
            return None
        doc: dict[str, Any] = json.loads(self.backend.get(last))
        return doc

    def _change(
        self,
        agent_id: str,
        trigger_id: str,
        decide: Callable[[dict[str, Any] | None], tuple[dict[str, Any], R]],
    ) -> R:
        """Append the record ``decide(latest record)`` makes as record seq; a writer that
        loses the race for that seq decides again on the winner's record (``cas``)."""

        def step(latest: dict[str, Any] | None) -> cas.Next[R]:
            doc, answer = decide(latest)
            key = _record_key(_prefix(agent_id, trigger_id), int(doc["seq"]))
            return cas.Next(key, json.dumps(doc).encode(), lambda: answer)

        return cas.append_next(
            lambda: self._latest(agent_id, trigger_id),
            step,
            self.backend.put_if_absent,
            tries=_TRIES,
            conflict=lambda: Conflict(
                f"trigger {trigger_id!r} changed concurrently; retry", field="triggerId"
            ),
        )

    def _missing(self, agent_id: str, trigger_id: str) -> NotFound:
        return NotFound(
            f"trigger {trigger_id!r} of agent {agent_id!r} does not exist", field="triggerId"
        )

    def _current(self, agent_id: str, trigger_id: str, doc: dict[str, Any] | None) -> Trigger:
        if doc is None or doc.get("deleted"):
            raise self._missing(agent_id, trigger_id)
        return _trigger(agent_id, trigger_id, doc)

    def get(self, agent_id: str, trigger_id: str) -> Trigger:
        paths.simple_id(trigger_id, field="triggerId")
        return self._current(agent_id, trigger_id, self._latest(agent_id, trigger_id))

    def get_seen(self, seen: Seen, agent_id: str, trigger_id: str) -> Trigger:
        """``get``, answered from ``seen`` (the triggers this process read last) when the
        record it was read from is still the newest: that record's bytes read again
        and equal, and no record after it. Exact, not a time window: any change (an
        update, a rotation, a delete, an erased agent) is a new record, or a missing
        or different one, and is read afresh. One read and one stat instead of
        listing the trigger's folder and parsing its newest record."""
        paths.simple_id(trigger_id, field="triggerId")
        prefix = _prefix(agent_id, trigger_id)
        known = seen.get((agent_id, trigger_id))
        if known is not None:
            data, trigger = known
            try:
                same = self.backend.get(_record_key(prefix, trigger.seq)) == data
            except MissingObject:
                same = False
            if same and not self.backend.exists(_record_key(prefix, trigger.seq + 1)):
                return trigger
            seen.pop((agent_id, trigger_id), None)
        last = None
        for key in self.backend.list(prefix):
            last = key
        if last is None:
            raise self._missing(agent_id, trigger_id)
        data = self.backend.get(last)
        doc = json.loads(data)
        trigger = self._current(agent_id, trigger_id, doc)
        if _record_key(prefix, trigger.seq) == last:  # else a stray name: never cached
            if len(seen) >= SEEN_MAX:
                seen.clear()  # bounded; refilled by the triggers still in use
            seen[(agent_id, trigger_id)] = (data, trigger)
        return trigger

    def put(
        self,
        agent_id: str,
        trigger_id: str,
        body: dict[str, Any],
        *,
        guard: CommandGuard | None = None,
    ) -> tuple[Trigger, bool]:
        """Create or replace a trigger; True when created. The secret is kept unless given.

        ``guard`` is called before anything is written when the new or the current
        action is a command (it raises to refuse); None lets the operator's CLI do it."""
        paths.simple_id(trigger_id, field="triggerId")
        for key in body:
            if key not in ("prompt", "action", "maxAttempts", "secret"):
                raise InvalidRequest(f"unknown field {key!r}", field=key)
        prompt = body.get("prompt", "")
        if not isinstance(prompt, str) or len(prompt) > MAX_PROMPT:
            raise InvalidRequest(
                f"prompt must be a string of at most {MAX_PROMPT} characters", field="prompt"
            )
        attempts = body.get("maxAttempts", 5)
        if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= 100:
            raise InvalidRequest(
                "maxAttempts must be an integer from 1 to 100", field="maxAttempts"
            )
        action = check_action(body.get("action"))
        secret = body.get("secret")
        if secret is not None:
            if not isinstance(secret, str):
                raise InvalidRequest("secret must be a whsec_ string", field="secret")
            parse_secret(secret)

        def decide(previous: dict[str, Any] | None) -> tuple[dict[str, Any], tuple[Trigger, bool]]:
            now = now_us()
            created = previous is None or bool(previous.get("deleted"))
            if guard is not None and (
                action["type"] == "command" or (not created and _is_command(previous))  # type: ignore[arg-type]
            ):
                guard()
            if secret is None:
                secrets_ = (
                    [{"value": generate_secret(), "expiresAt": None}]
                    if created
                    else previous["secrets"]  # type: ignore[index]
                )
            else:
                secrets_ = [{"value": secret, "expiresAt": None}]
            seq = int(previous["seq"]) + 1 if previous else 1
            doc: dict[str, Any] = {
                "seq": seq,
                "prompt": prompt,
                "action": action,
                "maxAttempts": attempts,
                "secrets": secrets_,
                "createdAt": format_ts(now) if created else previous["createdAt"],  # type: ignore[index]
                "updatedAt": format_ts(now),
            }
            return doc, (_trigger(agent_id, trigger_id, doc), created)

        return self._change(agent_id, trigger_id, decide)

    def delete(self, agent_id: str, trigger_id: str, *, guard: CommandGuard | None = None) -> None:
        def decide(latest: dict[str, Any] | None) -> tuple[dict[str, Any], None]:
            current = self._current(agent_id, trigger_id, latest)
            if guard is not None and current.action.get("type") == "command":
                guard()
            return {"seq": current.seq + 1, "deleted": True}, None

        paths.simple_id(trigger_id, field="triggerId")
        self._change(agent_id, trigger_id, decide)

    def rotate(
        self, agent_id: str, trigger_id: str, *, guard: CommandGuard | None = None
    ) -> Trigger:
        def decide(latest: dict[str, Any] | None) -> tuple[dict[str, Any], Trigger]:
            current = self._current(agent_id, trigger_id, latest)
            # The new secret signs deliveries, and a delivery runs the command.
            if guard is not None and current.action.get("type") == "command":
                guard()
            now = now_us()
            keep = [
                {"value": s.value, "expiresAt": format_ts(now + ROTATION_OVERLAP_US)}
                for s in current.secrets
                if s.expires_at is None or s.expires_at > now
            ]
            doc: dict[str, Any] = {
                "seq": current.seq + 1,
                "prompt": current.prompt,
                "action": current.action,
                "maxAttempts": current.max_attempts,
                "secrets": [{"value": generate_secret(), "expiresAt": None}, *keep],
                "createdAt": format_ts(current.created_at),
                "updatedAt": format_ts(now),
            }
            return doc, _trigger(agent_id, trigger_id, doc)

        paths.simple_id(trigger_id, field="triggerId")
        return self._change(agent_id, trigger_id, decide)

    def list(self, agent_id: str) -> list[Trigger]:
        base = f"{layout.agent_prefix(agent_id)}triggers/"
        ids = sorted({key[len(base) :].split("/", 1)[0] for key in self.backend.list(base)})
        out = []
        for trigger_id in ids:
            doc = self._latest(agent_id, trigger_id)
            if doc is not None and not doc.get("deleted"):
                out.append(_trigger(agent_id, trigger_id, doc))
        return out


def _is_command(doc: dict[str, Any]) -> bool:
    action = doc.get("action")
    return isinstance(action, dict) and action.get("type") == "command"


def command_guard(*, enabled: bool, admin: bool) -> CommandGuard:
    """The HTTP rule for command triggers: enabled on this server, and the admin key."""

    def check() -> None:
        if not enabled:
            raise Forbidden(
                "command actions are disabled on this server; the operator enables them"
                " with MEMFS_ALLOW_COMMANDS=1 (memfs serve --allow-commands)",
                field="action",
            )
        if not admin:
            raise Forbidden(
                "only the admin key may create or change a trigger with a command action",
                field="Authorization",
            )

    return check


def _trigger(agent_id: str, trigger_id: str, doc: dict[str, Any]) -> Trigger:
    return Trigger(
        agent_id=agent_id,
        trigger_id=trigger_id,
        seq=int(doc["seq"]),
        prompt=str(doc["prompt"]),
        action=dict(doc["action"]),
        max_attempts=int(doc["maxAttempts"]),
        secrets=tuple(
            Secret(s["value"], parse_ts(s["expiresAt"]) if s.get("expiresAt") else None)
            for s in doc["secrets"]
        ),
        created_at=parse_ts(doc["createdAt"]),
        updated_at=parse_ts(doc["updatedAt"]),
    )
