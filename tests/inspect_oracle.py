"""Inspect's graph edges as they were computed before the index's links table: every
stored version's content read and its links extracted, page after page. Kept only as
the oracle of tests/test_inspect_links.py and the "before" of scripts/bench_inspect.py
and scripts/bench_console.py (``patched`` swaps it in for the shipped walker)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from memfs.core import inspect
from memfs.derived.index.base import ReadSession
from memfs.domain.links import extract_links


def old_edges(
    conn: ReadSession, target: inspect.Target, pin: int, after: Any
) -> Iterator[tuple[Any, dict[str, Any]]]:
    """The edges walker as it was before the links table (the oracle)."""
    skip_through = after[3] if isinstance(after, list) and len(after) == 4 else -1
    first = True
    for row in inspect._versions(conn, target, pin, inspect._resume(after)):
        links = extract_links(inspect._content(conn, row[0], row[3]), row[1])
        for i, link in enumerate(links):
            if first and inspect._same(after, row) and i <= skip_through:
                continue
            live = conn.live_version_at(row[0], link, pin)
            yield (
                [row[0], row[1], row[2], i],
                {
                    "agentId": row[0],
                    "source": f"{row[0]}:{row[1]}@{row[2]}",
                    "sourcePath": row[1],
                    "sourceVersion": row[2],
                    "targetPath": link,
                    "target": f"{row[0]}:{link}@{live}" if live is not None else None,
                    "targetExists": live is not None,
                },
            )
        first = False


@contextmanager
def patched(old: bool = True) -> Iterator[None]:
    """Inspect with the old edges walker in place of the shipped one (when ``old``)."""
    shipped = inspect._edges
    if old:
        inspect._edges = old_edges  # type: ignore[assignment]
    try:
        yield
    finally:
        inspect._edges = shipped  # type: ignore[assignment]
