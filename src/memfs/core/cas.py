"""One create-if-absent-and-recheck loop: append object N + 1 of a sequence, exactly once.

A sequence of canonical objects (a run's events, a trigger's records) changes by
creating the next one with ``put_if_absent``. Every writer follows the same story,
dulwich's ``set_if_equals`` without a lock:

1. ``read`` the current state (after its N objects);
2. ``decide`` on it: ``Done(value)`` (nothing to write: the state already says it) or
   ``Next(key, data, won)`` (object N + 1 and what to answer once it is written);
3. create ``key`` if absent: the one winner calls ``won``; a loser re-reads and
   decides again on the state the winner made, at most ``tries`` times, then the
   ``conflict`` error (a client's retry).

So of racing writers exactly one creates each object, and no decision is ever made on
a state that is no longer current. A commit follows the same story through
``retry_lost_races``, the loop itself: its read, decision and create share one index
transaction, so it can't be split into ``read`` and ``decide`` callables.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from memfs.errors import MemfsError

S = TypeVar("S")
R = TypeVar("R")


@dataclass(frozen=True)
class Done(Generic[R]):
    """Nothing to write: answer ``value``."""

    value: R


@dataclass(frozen=True)
class Next(Generic[R]):
    """Create ``key`` with ``data``; once it is ours, answer ``won()``."""

    key: str
    data: bytes
    won: Callable[[], R]


class Lost:
    """An attempt's answer when another writer created object N + 1 first."""


LOST = Lost()


def retry_lost_races(
    attempt: Callable[[int], R | Lost],
    *,
    tries: int,
    conflict: Callable[[], MemfsError],
) -> R:
    """Run ``attempt(n)`` (n = 0, 1, …) until it answers something but ``LOST``, at most
    ``tries`` times, then the ``conflict`` error. The loop of ``append_next``, and of a
    commit, whose read, decision and create run inside one index transaction that a
    lost race rolls back (``Store._commit_once``)."""
    for n in range(tries):
        result = attempt(n)
        if not isinstance(result, Lost):
            return result
    raise conflict()


def append_next(
    read: Callable[[], S],
    decide: Callable[[S], Done[R] | Next[R]],
    put_if_absent: Callable[[str, bytes], bool],
    *,
    tries: int,
    conflict: Callable[[], MemfsError],
) -> R:
    """Decide on the current state and create the next object; re-decide on a lost race."""

    def attempt(_n: int) -> R | Lost:
        step = decide(read())
        if isinstance(step, Done):
            return step.value
        if put_if_absent(step.key, step.data):
            return step.won()
        return LOST

    return retry_lost_races(attempt, tries=tries, conflict=conflict)
