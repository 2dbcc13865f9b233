"""Trigger actions behind one protocol (``memfs.core.actions``), without a server.

The runner asks its registry for the action of a trigger's ``action.type``; the memory
action stores the delivery as a memory of the run's agent, as actor ``run:<id>``.
"""

from __future__ import annotations

import asyncio
import base64
import time

from memfs.core.actions.base import Outcome, Registry
from memfs.core.actions.command import COMMANDS_DISABLED, CommandAction
from memfs.core.actions.memory import MemoryAction
from memfs.core.keys import KeyRing
from memfs.core.runs import Runs
from memfs.core.store import Store
from memfs.core.triggers import Trigger, Triggers


def trigger(store: Store, agent: str, action: dict[str, object]) -> Trigger:
    body = {"secret": "whsec_" + base64.b64encode(b"s" * 32).decode(), "action": action}
    return Triggers(store.backend).put(agent, "t", body)[0]


def test_the_registry_picks_the_action_of_the_trigger_type(store: Store, agent: str) -> None:
    memory = MemoryAction(store)
    command = CommandAction(
        Runs(store),
        KeyRing(store.backend),
        base_url="http://127.0.0.1:1",
        allow_commands=False,
        run_user="nobody",
        grace_s=1.0,
    )
    registry = Registry([memory, command], default="memory")
    assert registry.for_trigger(trigger(store, agent, {"type": "memory"})) is memory
    assert (
        registry.for_trigger(trigger(store, agent, {"type": "command", "argv": ["true"]}))
        is command
    )


def test_the_memory_action_stores_the_delivery_as_the_runs_memory(store: Store, agent: str) -> None:
    t = trigger(store, agent, {"type": "memory", "path": "/memories/in/{webhookId}.md"})
    run, _ = Runs(store).deliver(agent, "t", "msg_7", b"hello", "text/plain", 3)
    delivery = {
        "webhookId": "msg_7",
        "contentType": "text/plain",
        "receivedAt": int(time.time() * 1e6),
    }
    outcome = asyncio.run(MemoryAction(store).perform(run, 1, t, delivery, b"hello"))
    assert outcome == Outcome(ok=True)
    memory = store.read(agent, "/memories/in/msg_7.md")
    assert memory.content.endswith(b"hello")
    assert b"webhookId: msg_7" in memory.content


def test_a_command_action_on_a_server_without_commands_fails_saying_how(
    store: Store, agent: str
) -> None:
    t = trigger(store, agent, {"type": "command", "argv": ["true"]})
    run, _ = Runs(store).deliver(agent, "t", "msg_8", b"{}", "application/json", 3)
    action = CommandAction(
        Runs(store),
        KeyRing(store.backend),
        base_url="http://127.0.0.1:1",
        allow_commands=False,
        run_user="nobody",
        grace_s=1.0,
    )
    outcome = asyncio.run(action.perform(run, 1, t, {}, b"{}"))
    assert (outcome.ok, outcome.error) == (False, COMMANDS_DISABLED)
