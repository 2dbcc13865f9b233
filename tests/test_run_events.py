"""A run's events and their fold, pure (``memfs.domain.run_events``): no store, no index.

Each constructor builds the one shape of its event (the shape the event files and the
index's step log keep), and the fold turns a sequence of them into the run a user sees
(status, attempt, next retry, exit code, error).
"""

from __future__ import annotations

from typing import Any

import pytest

from memfs.domain import run_events as ev

RECORD = {
    "webhookId": "msg_1",
    "triggerId": "gh",
    "runId": "run_1",
    "receivedAt": 1_000,
    "contentType": "application/json",
    "maxAttempts": 2,
    "body": "",
}
OWNER = {"host": "h", "pid": 1}


def run_of(*events: dict[str, Any]) -> dict[str, Any]:
    run: dict[str, Any] = {"agent_id": "a", "run_id": "run_1", "events": 0}
    for at, event in enumerate(events, start=1):
        run = ev.fold(run, {"at": at * 1_000, **event})
    return run


def test_created_is_a_function_of_the_delivery_record() -> None:
    assert ev.created("k", RECORD) == {
        "type": "created",
        "at": 1_000,
        "triggerId": "gh",
        "webhookId": "msg_1",
        "maxAttempts": 2,
        "deliveryKey": "k",
    }
    run = ev.fold({"events": 0}, ev.created("k", RECORD))
    assert (run["status"], run["attempt"], run["max_attempts"], run["events"]) == (
        "queued",
        0,
        2,
        1,
    )


@pytest.mark.parametrize(
    ("event", "shape"),
    [
        (ev.claimed(1, OWNER), {"type": "claimed", "attempt": 1, "owner": OWNER}),
        (ev.output(1, "hi"), {"type": "output", "attempt": 1, "output": "hi"}),
        (ev.succeeded(1, 0), {"type": "succeeded", "attempt": 1, "exitCode": 0}),
        (
            ev.failed(1, 3, "exit code 3", None),
            {
                "type": "failed",
                "attempt": 1,
                "exitCode": 3,
                "error": "exit code 3",
                "nextRetryAt": None,
            },
        ),
        (
            ev.interrupted(2, 7),
            {
                "type": "failed",
                "attempt": 2,
                "exitCode": None,
                "error": ev.INTERRUPTED,
                "nextRetryAt": 7,
            },
        ),
        (ev.retry_scheduled(1, 9), {"type": "retry_scheduled", "attempt": 1, "nextRetryAt": 9}),
        (ev.requeued(2, 3), {"type": "requeued", "attempt": 2, "maxAttempts": 3}),
    ],
)
def test_each_event_has_one_shape_with_its_keys_in_order(
    event: dict[str, Any], shape: dict[str, Any]
) -> None:
    assert event == shape
    assert list(event) == list(shape)  # the step log keeps the detail in this order


def test_a_failure_with_a_retry_time_delays_the_run_and_a_claim_resumes_it() -> None:
    created = ev.created("k", RECORD)
    delayed = run_of(created, ev.claimed(1, OWNER), ev.failed(1, 1, "exit code 1", 50_000))
    assert (delayed["status"], delayed["next_retry_at"], delayed["finished_at"]) == (
        "delayed",
        50_000,
        None,
    )
    scheduled = run_of(
        created,
        ev.claimed(1, OWNER),
        ev.failed(1, 1, "exit code 1", 50_000),
        ev.retry_scheduled(1, 50_000),
    )
    assert scheduled["status"] == "delayed" and scheduled["events"] == 4
    again = run_of(
        created, ev.claimed(1, OWNER), ev.failed(1, 1, "exit code 1", 50_000), ev.claimed(2, OWNER)
    )
    assert (again["status"], again["attempt"], again["next_retry_at"]) == ("running", 2, None)


def test_a_final_failure_ends_the_run_and_a_requeue_gives_it_one_more_attempt() -> None:
    created = ev.created("k", RECORD)
    failed = run_of(created, ev.claimed(1, OWNER), ev.failed(1, 1, "exit code 1", None))
    assert (failed["status"], failed["error"], failed["finished_at"]) == (
        "failed",
        "exit code 1",
        3_000,
    )
    requeued = run_of(
        created, ev.claimed(1, OWNER), ev.failed(1, 1, "exit code 1", None), ev.requeued(1, 2)
    )
    assert (requeued["status"], requeued["max_attempts"], requeued["finished_at"]) == (
        "queued",
        2,
        None,
    )


def test_success_clears_the_error_and_keeps_the_output() -> None:
    run = run_of(
        ev.created("k", RECORD),
        ev.claimed(1, OWNER),
        ev.output(1, "done"),
        ev.succeeded(1, 0),
    )
    assert (run["status"], run["exit_code"], run["error"], run["output"]) == (
        "succeeded",
        0,
        None,
        "done",
    )


def test_an_interruption_is_told_apart_from_the_actions_own_failure() -> None:
    assert ev.is_interruption(ev.interrupted(1, None)["error"])
    assert not ev.is_interruption("exit code 1")
    assert not ev.is_interruption(None)
