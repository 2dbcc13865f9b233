"""The protocol every trigger action implements, and the registry the runner asks.

An action performs one claimed attempt of a run and says how it ended (``Outcome``);
the runner records that end as the run's next event. An action raises a ``MemfsError``
for an error of its own (``runner.PERMANENT`` ones are not retried); a new action is a
module with one class, added to the registry the runner builds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from memfs.core.runs import Run
from memfs.core.triggers import Trigger


@dataclass(frozen=True)
class Outcome:
    """How an attempt ended: ``output`` is None when the action captures none."""

    ok: bool
    exit_code: int | None = None
    error: str | None = None
    output: str | None = None


class Action(Protocol):
    name: str  # the trigger's ``action.type`` it executes (and the metrics label)

    async def perform(
        self, run: Run, attempt: int, trigger: Trigger, delivery: dict[str, Any], body: bytes
    ) -> Outcome: ...


class BlockingAction(Action, Protocol):
    """An action whose attempt is plain blocking work, with no process to watch: the
    runner performs it on a worker thread, in the same trip as reading the delivery
    and recording the attempt's end (one hand-off per attempt, not four)."""

    def perform_blocking(
        self, run: Run, attempt: int, trigger: Trigger, delivery: dict[str, Any], body: bytes
    ) -> Outcome: ...


class Registry:
    """The actions by name; a type without an action of its own is a memory action (the
    default of a trigger without one)."""

    def __init__(self, actions: Iterable[Action], *, default: str) -> None:
        self._by_name = {a.name: a for a in actions}
        self._default = self._by_name[default]

    def for_trigger(self, trigger: Trigger) -> Action:
        return self._by_name.get(str(trigger.action.get("type")), self._default)
