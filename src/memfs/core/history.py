"""A page of the versions of one memory path, oldest first, behind a signed cursor.

The one definition of ``GET …/versions`` paging: the HTTP route and the MCP
``history`` tool both call ``versions_page``, so their pages and cursors agree.
"""

from __future__ import annotations

from memfs.core.store import Store
from memfs.core.tokens import Signer
from memfs.domain import paths
from memfs.domain.records import VersionRow
from memfs.errors import InvalidRequest


def versions_page(
    store: Store,
    signer: Signer,
    agent_id: str,
    path: str,
    *,
    limit: int,
    cursor: str | None = None,
) -> tuple[list[VersionRow], str | None]:
    """Up to ``limit`` versions of ``path`` after ``cursor``, and the next cursor (None
    at the end); a cursor of another agent, path or kind is a 400 on ``cursor``."""
    path = paths.memory_path(path if path.startswith("/") else f"{paths.ROOT}/{path}")
    after = 0
    if cursor:
        position = signer.decode(cursor, "versions", agent_id, path, field="cursor")
        if not isinstance(position, int):
            raise InvalidRequest("cursor is not valid here", field="cursor")
        after = position
    rows = store.versions(agent_id, path, after=after, limit=limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = signer.encode("versions", agent_id, path, rows[-1].version) if more else None
    return rows, next_cursor
