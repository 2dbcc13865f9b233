"""A run's events, pure: one constructor per event and the fold that makes a run of them.

A run is the fold of its events, in order (``fold``). Every event a run ever gets is
built here, by the one constructor of its kind, so the shape of a step (its keys and
their order, which the index's step log keeps) has one definition:

  created          event 1: a function of the delivery record alone (``created``)
  claimed          attempt k runs, under ``owner``
  output           the captured (capped) output of attempt k
  succeeded        attempt k ended well
  failed           attempt k ended badly: delayed when ``nextRetryAt`` is set, else final
  retry_scheduled  informative: once per failure that will be retried
  requeued         a failed run given one more attempt

An interrupted attempt (its process stopped) is a ``failed`` event whose error starts
with ``INTERRUPTED`` (``interrupted``). Events get their ``at`` when appended.
"""

from __future__ import annotations

from typing import Any

Event = dict[str, Any]

INTERRUPTED = "interrupted: the process running it stopped"


def created(key: str, record: dict[str, Any]) -> Event:
    """Event 1 of the run a delivery record starts: a function of the record alone."""
    return {
        "type": "created",
        "at": int(record["receivedAt"]),
        "triggerId": record["triggerId"],
        "webhookId": record["webhookId"],
        "maxAttempts": int(record["maxAttempts"]),
        "deliveryKey": key,
    }


def claimed(attempt: int, owner: dict[str, Any]) -> Event:
    return {"type": "claimed", "attempt": attempt, "owner": owner}


def output(attempt: int, text: str) -> Event:
    return {"type": "output", "attempt": attempt, "output": text}


def succeeded(attempt: int, exit_code: int | None) -> Event:
    return {"type": "succeeded", "attempt": attempt, "exitCode": exit_code}


def failed(
    attempt: int, exit_code: int | None, error: str | None, next_retry_at: int | None
) -> Event:
    return {
        "type": "failed",
        "attempt": attempt,
        "exitCode": exit_code,
        "error": error,
        "nextRetryAt": next_retry_at,
    }


def interrupted(attempt: int, next_retry_at: int | None) -> Event:
    """Attempt ``attempt`` stopped with its process (a shutdown or a crash)."""
    return failed(attempt, None, INTERRUPTED, next_retry_at)


def is_interruption(error: str | None) -> bool:
    """Whether a failure is the process's fault, not the action's (not counted)."""
    return "interrupted" in (error or "")


def retry_scheduled(attempt: int, next_retry_at: int | None) -> Event:
    return {"type": "retry_scheduled", "attempt": attempt, "nextRetryAt": next_retry_at}


def requeued(attempt: int, max_attempts: int) -> Event:
    return {"type": "requeued", "attempt": attempt, "maxAttempts": max_attempts}


def fold(run: dict[str, Any], event: Event) -> dict[str, Any]:
    """The run after ``event``: the one rule for how steps change a run's state."""
    kind, at = event["type"], int(event["at"])
    run = dict(run)
    if kind == "created":
        run.update(
            trigger_id=event["triggerId"],
            webhook_id=event["webhookId"],
            status="queued",
            attempt=0,
            max_attempts=int(event["maxAttempts"]),
            created_at=at,
            delivery_key=event.get("deliveryKey"),
        )
    elif kind == "claimed":
        run.update(
            status="running",
            attempt=int(event["attempt"]),
            started_at=at,
            next_retry_at=None,
            finished_at=None,
        )
    elif kind == "output":
        run.update(output=event.get("output"))
    elif kind == "succeeded":
        run.update(
            status="succeeded",
            finished_at=at,
            exit_code=event.get("exitCode"),
            error=None,
            next_retry_at=None,
        )
    elif kind == "failed":
        retry_at = event.get("nextRetryAt")
        run.update(
            status="delayed" if retry_at is not None else "failed",
            finished_at=None if retry_at is not None else at,
            exit_code=event.get("exitCode"),
            error=event.get("error"),
            next_retry_at=retry_at,
        )
    elif kind == "retry_scheduled":
        pass  # informative: the failed event already carries the decision
    elif kind == "requeued":
        run.update(
            status="queued",
            max_attempts=int(event["maxAttempts"]),
            next_retry_at=None,
            finished_at=None,
        )
    run["events"] = int(run.get("events", 0)) + 1
    return run
