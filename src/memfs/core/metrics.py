"""Prometheus metrics of a memfs server, through ``prometheus_client``.

Several uvicorn workers share one port, so a scrape reaches one worker at random:
``memfs serve --workers N`` (N > 1) runs prometheus_client's *multiprocess mode*.
It makes a private 0700 folder, names it in ``PROMETHEUS_MULTIPROC_DIR`` before the
workers start (so their counters and histograms live in mmap files there), and
removes it when it stops; ``GET /metrics`` in any worker adds up every worker's
files, and a stopping worker calls ``mark_process_dead``. With one worker the
metrics stay in the process.

Labels hold route templates, methods, statuses, run states and outcomes only:
never an agent id, a path or a key, so ``/metrics`` needs no key.

Gauges that describe shared state (runs by state, index lag) are read from the
index at scrape time by :class:`StateCollector`, so every worker answers the same.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = [
    "CONTENT_TYPE_LATEST",
    "MULTIPROC_ENV",
    "StateCollector",
    "commit_made",
    "delivery_answered",
    "process_stopped",
    "render",
    "request_done",
    "run_attempt_done",
    "set_agents_damaged",
]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

REQUESTS = Counter(
    "memfs_http_requests",
    "HTTP requests answered, by route template, method and status.",
    ["route", "method", "status"],
)
REQUEST_SECONDS = Histogram(
    "memfs_http_request_duration_seconds",
    "Time from a request's arrival to its answer, by route template, method and status.",
    ["route", "method", "status"],
)
COMMITS = Counter("memfs_commits", "Commits this server made (each a new log entry).")
DELIVERIES = Counter(
    "memfs_webhook_deliveries",
    "Webhook deliveries: new (a run was created), duplicate (the webhook-id was known), "
    "refused (answered 4xx).",
    ["outcome"],
)
RUN_ATTEMPT_SECONDS = Histogram(
    "memfs_run_attempt_duration_seconds",
    "How long one run attempt's action took, by action type and outcome.",
    ["action", "outcome"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600),
)
AGENTS_DAMAGED = Gauge(
    "memfs_agents_damaged",
    "Agents whose canonical state failed verification and that answer 503.",
    multiprocess_mode="livemax",
)

# The route label of a request no route matched (404 or 405): never the raw path.
UNMATCHED = "unmatched"


# Label children by (route, method, status): labels() costs as much as inc() and
# observe() together. Few keys: route templates x methods x statuses.
_CHILDREN: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}


def request_done(route: str, method: str, status: int, seconds: float) -> None:
    key = (route, method, status)
    children = _CHILDREN.get(key)
    if children is None:
        labels = (route, method, str(status))
        children = _CHILDREN.setdefault(
            key, (REQUESTS.labels(*labels), REQUEST_SECONDS.labels(*labels))
        )
    children[0].inc()
    children[1].observe(seconds)


# Each outcome's child, looked up by labels() at its first delivery (not at import,
# which would show outcomes in /metrics before they happen), then kept.
_OUTCOMES: dict[str, Counter] = {}


def delivery_answered(status: int) -> None:
    """Count a delivery by its answer: 202 new, 200 duplicate, 4xx refused."""
    if status == 202:
        outcome = "new"
    elif status == 200:
        outcome = "duplicate"
    elif 400 <= status < 500:
        outcome = "refused"
    else:
        return
    child = _OUTCOMES.get(outcome)
    if child is None:
        child = _OUTCOMES.setdefault(outcome, DELIVERIES.labels(outcome))
    child.inc()


def commit_made() -> None:
    COMMITS.inc()


def run_attempt_done(action: str, ok: bool, seconds: float) -> None:
    RUN_ATTEMPT_SECONDS.labels(action, "succeeded" if ok else "failed").observe(seconds)


def set_agents_damaged(count: int) -> None:
    """How many agents are damaged now (0 until damage detection reports some)."""
    AGENTS_DAMAGED.set(count)


class StateCollector(Collector):
    """Gauges of shared state, read when scraped: runs by state and index lag."""

    def __init__(
        self, runs_by_state: Callable[[], dict[str, int]], index_lag: Callable[[], int]
    ) -> None:
        self._runs_by_state = runs_by_state
        self._index_lag = index_lag

    def collect(self) -> Iterator[GaugeMetricFamily]:
        runs = GaugeMetricFamily("memfs_runs", "Runs by state.", labels=["state"])
        counts = self._runs_by_state()
        for state in ("queued", "running", "delayed", "succeeded", "failed"):
            runs.add_metric([state], counts.get(state, 0))
        yield runs
        yield GaugeMetricFamily(
            "memfs_index_lag_entries",
            "Log entries written but not yet applied to the index, over all agents.",
            value=self._index_lag(),
        )


def render(state: StateCollector) -> bytes:
    """The text exposition: every worker's metrics, then the shared-state gauges."""
    registry = CollectorRegistry()
    if os.environ.get(MULTIPROC_ENV):
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        own = generate_latest(registry)
    else:
        own = generate_latest(REGISTRY)
    shared = CollectorRegistry()
    shared.register(state)
    return own + generate_latest(shared)


def process_stopped() -> None:
    """A worker stops: its live gauges no longer count (multiprocess mode only)."""
    if os.environ.get(MULTIPROC_ENV):
        multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]
