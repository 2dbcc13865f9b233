"""The links table: every stored version's links, for inspect's graph edges.

``links(agent_id, path, version, idx, target, visible_from)`` holds, for each stored
(non-tombstone) version, the memory paths its content links to (``domain.links``'s
``extract_links``, in its order: ``idx`` 0, 1, …) and the ``visible_from`` of that
version. The rows are written in the transaction of the commit that stores the
version, from the very bytes its blob row caches (a version whose content is not
cached has no rows, as inspect found no links in it before the table), and never
change afterwards: a version and its content are immutable. Inspect's edges listing
is then one primary-key range from its token's position, filtered on
``visible_from`` like the version walk, instead of reading every version's content.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from memfs.domain.links import extract_links

LINKS_TABLE = """CREATE TABLE IF NOT EXISTS links(
  agent_id TEXT NOT NULL, path TEXT NOT NULL, version INTEGER NOT NULL,
  idx INTEGER NOT NULL, target TEXT NOT NULL, visible_from INTEGER NOT NULL,
  PRIMARY KEY(agent_id, path, version, idx)
) WITHOUT ROWID"""

LinkRow = tuple[str, str, int, int, str, int]


def link_rows(
    agent_id: str, path: str, version: int, visible_from: int, content: bytes | None
) -> list[LinkRow]:
    """The links table's rows for one stored version (none when its content is not at
    hand). Pure: both engines write exactly these."""
    if content is None:
        return []
    # Contents are checked UTF-8 when committed; "replace" only keeps a commit from
    # failing here on bytes that somehow are not.
    targets = extract_links(content.decode("utf-8", "replace"), path)
    return [(agent_id, path, version, i, t, visible_from) for i, t in enumerate(targets)]


def add_links(conn: sqlite3.Connection, rows: Iterable[LinkRow]) -> None:
    # OR REPLACE: a left-over row (fsck reports it) must not fail a commit.
    conn.executemany("INSERT OR REPLACE INTO links VALUES(?,?,?,?,?,?)", rows)


# The stored versions after a key, with their cached contents: the migration's batches.
BACKFILL_SELECT = (
    "SELECT v.agent_id, v.path, v.version, v.visible_from, b.content FROM versions v"
    " LEFT JOIN blobs b ON b.agent_id=v.agent_id AND b.sha256=v.sha256"
    " WHERE (v.agent_id, v.path, v.version) > (?, ?, ?) AND v.sha256 IS NOT NULL"
    " ORDER BY v.agent_id, v.path, v.version LIMIT 1000"
)


def backfill(
    fetch: Callable[[tuple[str, str, int]], Sequence[Sequence[Any]]],
) -> Iterator[list[LinkRow]]:
    """The rows of every stored version, a batch at a time: ``fetch(seek)`` runs
    ``BACKFILL_SELECT`` in the engine's dialect (primary-key batches keep memory
    bounded). Pure; both engines' migration ``links_table`` use it."""
    seek: tuple[str, str, int] = ("", "", 0)
    while True:
        rows = fetch(seek)
        if not rows:
            return
        found: list[LinkRow] = []
        for agent, path, version, visible, content in rows:
            data = bytes(content) if isinstance(content, (bytes, memoryview)) else None
            found += link_rows(str(agent), str(path), int(version), int(visible), data)
        yield found
        seek = (str(rows[-1][0]), str(rows[-1][1]), int(rows[-1][2]))


def fill_links(conn: sqlite3.Connection) -> None:
    """Fill the table from every stored version and its cached content (migration
    ``links_table``)."""
    conn.execute(LINKS_TABLE)
    conn.execute("DELETE FROM links")
    for batch in backfill(lambda seek: conn.execute(BACKFILL_SELECT, seek).fetchall()):
        add_links(conn, batch)


def agent_links(conn: sqlite3.Connection, agent_id: str) -> list[tuple[str, int, int, str, int]]:
    """(path, version, idx, target, visible_from) of every link row of an agent, for
    fsck."""
    rows = conn.execute(
        "SELECT path, version, idx, target, visible_from FROM links WHERE agent_id=?"
        " ORDER BY path, version, idx",
        (agent_id,),
    ).fetchall()
    return [(str(p), int(v), int(i), str(t), int(f)) for p, v, i, t, f in rows]
