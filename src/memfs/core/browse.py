"""Paged reads both read-only edges show (the HTTP API and the console): the agents a
principal may see, an agent's runs, a memory's versions. Each takes and gives the same
signed cursors, so a cursor of the API's pages is one of the console's too."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from memfs.core.auth import Principal
from memfs.core.runs import Run, Runs
from memfs.core.store import Agent, Store
from memfs.core.tokens import Signer
from memfs.domain import paths
from memfs.domain.records import CommitRow, VersionRow
from memfs.errors import InvalidRequest

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None


def agents_page(
    store: Store,
    signer: Signer,
    who: Principal,
    prefix: str,
    cursor: str | None,
    limit: int,
) -> Page[Agent]:
    """The agents under ``prefix`` that ``who`` covers, ``limit`` at a time.

    Only agents the key covers count, so that a page before the end is never empty
    and the next cursor is None exactly when no visible agent follows.
    """
    who.require("memories:read")
    after = None
    if cursor:
        after = signer.decode(cursor, "agents", "", prefix, field="cursor")
        if not isinstance(after, str):
            raise InvalidRequest("cursor is not valid here", field="cursor")
    page: list[Agent] = []
    while len(page) <= limit:
        batch = store.list_agents(prefix, after=after, limit=limit + 1)
        page += [a for a in batch if who.covers(a.agent_id)]
        if len(batch) <= limit:
            break
        after = batch[-1].agent_id
    more = len(page) > limit
    page = page[:limit]
    next_cursor = signer.encode("agents", "", prefix, page[-1].agent_id) if more else None
    return Page(page, next_cursor)


def runs_page(
    store: Store,
    signer: Signer,
    agent_id: str,
    *,
    trigger_id: str | None,
    status: str | None,
    cursor: str | None,
    limit: int,
) -> Page[Run]:
    """An agent's runs, newest first, filtered by trigger and status."""
    digest = f"{trigger_id}|{status}"
    after = None
    if cursor:
        position = signer.decode(cursor, "runs", agent_id, digest, field="cursor")
        if not (isinstance(position, list) and len(position) == 2):
            raise InvalidRequest("cursor is not valid here", field="cursor")
        after = (int(position[0]), str(position[1]))
    rows = Runs(store).list(
        agent_id, trigger_id=trigger_id, status=status, after=after, limit=limit + 1
    )
    more = len(rows) > limit
    rows = rows[:limit]
    next_cursor = (
        signer.encode("runs", agent_id, digest, [rows[-1].created_at, rows[-1].run_id])
        if more
        else None
    )
    return Page(rows, next_cursor)


def versions_page(
    store: Store, signer: Signer, agent_id: str, path: str, cursor: str | None, limit: int
) -> Page[VersionRow]:
    """A memory's versions, oldest first (NotFound for a path with no history); ``path``
    may leave out the leading ``/memories/``. The one definition of this paging: the
    HTTP route, the console and the MCP ``history`` tool all call it, so their pages
    and cursors agree."""
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
    return Page(rows, next_cursor)


# Commits a history page reads from the index at a time: a page stops as soon as its
# change budget is spent, so a bulk commit's neighbours are not decoded for nothing.
_HISTORY_BATCH = 5


def history_page(
    store: Store, agent_id: str, *, before: int | None, limit: int, changes: int
) -> tuple[list[CommitRow], int | None]:
    """Commits newest first from ``before``: at most ``limit`` of them, and no more than
    ``changes`` changes in all (yet always the first commit, however large), with the
    revision to continue from (``before`` of the next page) or None at the end."""
    commits: list[CommitRow] = []
    listed = 0
    cursor = before
    while True:
        batch = store.log(agent_id, before=cursor, limit=_HISTORY_BATCH)
        for commit in batch:
            if len(commits) == limit or (commits and listed + len(commit.changes) > changes):
                return commits, commits[-1].revision
            commits.append(commit)
            listed += len(commit.changes)
        if len(batch) < _HISTORY_BATCH:
            return commits, None
        cursor = batch[-1].revision
