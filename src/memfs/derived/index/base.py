"""The Index seam: what the core asks of a derived index, whatever its engine.

An index is opened on a location and answers in sessions: ``with idx.read_session()
as s`` is one read snapshot, ``with idx.write_session() as s`` one write transaction
holding the index's one write lock (committed when the block ends, rolled back on any
error). Every query the core makes is a session method — memories, versions, commits,
agents, runs and steps, deliveries, the inspect walkers, the visibility clock and the
planner's batched path states, full-text search — so a second engine (PostgreSQL, say) implements these
protocols and runs ``memfs.testing.IndexContract``. The SQLite index
(``derived/index/``) is the one implementation today.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from memfs.derived.index.rows import MemoryRead
from memfs.derived.index.runs import RunRow
from memfs.domain.commits import Commit
from memfs.domain.records import (
    AgentRow,
    CommitRow,
    FolderEntry,
    ListingJson,
    MemoryRow,
    PathState,
    PlanHead,
    SearchHit,
    VersionRow,
)


class ReadSession(Protocol):
    """The queries of one read snapshot (also available inside a write session)."""

    def agent(self, agent_id: str) -> AgentRow | None: ...
    def agent_heads(self) -> list[tuple[str, int]]: ...
    def agent_ids(self) -> set[str]: ...
    def agent_stats(self, agent_id: str) -> tuple[int, int]: ...
    def agents(self, prefix: str, after: str | None, limit: int) -> list[AgentRow]: ...
    def blob(self, agent_id: str, sha256: str) -> bytes | None: ...
    def cached_blobs(self, agent_id: str) -> list[tuple[str, bytes]]: ...
    def commit_entry(self, agent_id: str, revision: int) -> tuple[int, str, str, str] | None: ...
    def commit_revisions(self, agent_id: str) -> list[int]: ...
    def commits(
        self, agent_id: str, *, before: int | None, limit: int, path: str | None = None
    ) -> list[CommitRow]: ...
    def count_memories(
        self,
        agent_id: str,
        folder: str,
        *,
        depth_one: bool,
        filters: Sequence[tuple[str, str]] = (),
    ) -> int: ...
    def damage(self, agent_id: str) -> tuple[str, str] | None: ...
    def damaged_agents(self) -> list[tuple[str, str, str]]: ...
    def ever_written(self, agent_id: str) -> bool: ...
    def first_revision_with(self, agent_id: str, sha256: str) -> int | None: ...
    def has_version_larger_than(self, agent_id: str, sha256: str, size: int) -> bool: ...
    def is_folder(self, agent_id: str, path: str) -> bool: ...
    def last_version(self, agent_id: str, path: str) -> int: ...
    def list_memories(
        self,
        agent_id: str,
        folder: str,
        *,
        after: str | None,
        limit: int,
        depth_one: bool,
        filters: Sequence[tuple[str, str]] = (),
    ) -> tuple[list[MemoryRow | FolderEntry], bool]: ...
    def list_memories_json(
        self,
        agent_id: str,
        folder: str,
        *,
        after: str | None,
        limit: int,
        depth_one: bool,
        filters: Sequence[tuple[str, str]] = (),
    ) -> ListingJson: ...
    def live_contents(self, agent_id: str) -> list[tuple[str, str]]: ...
    def live_paths(self, agent_id: str, candidates: Sequence[str]) -> set[str]: ...
    def live_rows(self, agent_id: str) -> list[tuple[Any, ...]]: ...
    def memory(self, agent_id: str, path: str) -> MemoryRow | None: ...
    # (damage, memory row, the index's copy of its content) in one lookup; None if the
    # agent does not exist. Store.read's common case.
    def memory_read(self, agent_id: str, path: str) -> MemoryRead | None: ...
    def path_states(self, agent_id: str, paths: Sequence[str]) -> dict[str, PathState]: ...
    # ``agent`` (with its damage and the clock) and ``path_states`` from one snapshot,
    # even in a statement session: a commit's planning read.
    def plan_head(self, agent_id: str, paths: Sequence[str]) -> PlanHead: ...
    def runs_by_status(self) -> dict[str, int]: ...
    def schema(self) -> int | None: ...
    def version(self, agent_id: str, path: str, number: int) -> VersionRow | None: ...
    def versions(self, agent_id: str, path: str, after: int, limit: int) -> list[VersionRow]: ...
    def due_run_rows(self, now: int, limit: int) -> list[RunRow]: ...
    def finished_deliveries(self, before: int) -> list[tuple[str, str, str]]: ...
    def run_counts(self, agent_id: str) -> dict[str, Any]: ...
    def run_row(self, agent_id: str, run_id: str) -> RunRow | None: ...
    def run_rows(
        self,
        agent_id: str,
        *,
        trigger_id: str | None,
        status: str | None,
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[RunRow]: ...
    def clock(self) -> int: ...
    def version_rows(
        self, seek: tuple[str, str, int], high: str, pin: int, limit: int
    ) -> list[tuple[Any, ...]]: ...
    def live_version_at(self, agent_id: str, path: str, pin: int) -> int | None: ...
    # Inspect's edges: the links table's rows after ``seek`` = (agent, path, version,
    # idx), each with its target's version live at ``pin``; ``agent_links`` is fsck's.
    def link_rows(
        self, seek: tuple[str, str, int, int], high: str, pin: int, limit: int
    ) -> list[tuple[Any, ...]]: ...
    def agent_links(self, agent_id: str) -> list[tuple[str, int, int, str, int]]: ...
    # Inspect's log: commit or run-step rows in visible order (``walks.step_rows``);
    # ``heads``: each commit with its first LOG_HEAD changes and its change count only.
    def step_rows(
        self,
        kind: str,
        ident: str,
        seek: tuple[Any, ...],
        pin: int,
        limit: int,
        *,
        commits: bool,
        heads: bool = False,
    ) -> list[tuple[Any, ...]]: ...
    # Full-text search (memory:query): ``match`` is an FTS5 expression written by
    # domain.search_query (an engine without FTS5 translates that small grammar);
    # ``target`` is ("agent" | "scope", id).
    def search(
        self,
        match: str,
        target: tuple[str, str],
        folder: str,
        filters: Sequence[tuple[str, str]],
        limit: int,
        offset: int,
    ) -> list[SearchHit]: ...
    def search_rows(self, agent_id: str) -> dict[str, str | None]: ...


class WriteSession(ReadSession, Protocol):
    """The writes of one transaction; ``raise_clock`` is the one way the clock moves."""

    def apply_commit(
        self, commit: Commit, visible_at: int, contents: dict[str, bytes], entry: bytes
    ) -> bool: ...
    # Several agents' rows at once (a group commit's agents, before their commits): an
    # engine that locks per agent takes every lock first, in one order for every
    # writer (no deadlock between two batches), and may answer in one round trip.
    def agent_rows(self, agent_ids: Sequence[str]) -> dict[str, AgentRow | None]: ...
    def bulk_load(
        self,
        agent: str,
        entries: Iterable[tuple[str, str, dict[str, Any]]],
        blob: Callable[[str], bytes],
    ) -> int: ...
    def clear_damage(self, agent_id: str) -> None: ...
    def clear_tables(self, tables: Iterable[str]) -> None: ...
    def drop_agent(self, agent_id: str, *, runs: bool = True) -> None: ...
    def mark_damaged(self, agent_id: str, file: str, reason: str) -> None: ...
    def put_agent(self, agent_id: str, name: str, store_id: str, created_at: int) -> None: ...
    def raise_clock(self, at: int) -> None: ...
    def release(self, name: str) -> None: ...
    def rollback_to(self, name: str) -> None: ...
    def savepoint(self, name: str) -> None: ...
    def put_run(self, values: Sequence[Any]) -> None: ...
    def add_run_step(
        self,
        agent_id: str,
        run_id: str,
        seq: int,
        at: int,
        visible_at: int,
        kind: str,
        attempt: int,
        detail: str,
    ) -> None: ...
    def forget_delivery(self, agent_id: str, run_id: str) -> None: ...
    def purge_search(self) -> None: ...


class NextCommit(Protocol):
    """What a write session MAY offer besides ``WriteSession`` (SQLite's does; the
    core asks with ``getattr``): a group commit's flush applies a commit without
    reading the agent's row first, when the row is the one the commit was planned on.

    ``apply_next_commit`` is ``apply_commit`` of ``commit`` made visible at its own
    timestamp, done only when the agent's row is that of store ``store_id`` at revision
    ``commit.revision - 1`` and the clock is before ``commit.ts``: its visible_at, else
    None and nothing written (the caller then reads the row and decides: gone, behind,
    applied before, or visible later than its timestamp)."""

    def apply_next_commit(
        self, commit: Commit, store_id: str, contents: dict[str, bytes], entry: bytes
    ) -> int | None: ...


class Rebuild(Protocol):
    """What a write session MAY offer besides ``WriteSession`` (SQLite's does; reindex
    asks with ``getattr``): an agent's rows rebuilt from its whole log with nothing
    written until every entry and content has been read and checked, so a damaged log
    leaves the agent's rows as they were without a savepoint around the rebuild.

    ``rebuild_agent`` reads and checks ``entries`` (raising CorruptionError before any
    write), then calls ``clear()`` (the agent's old rows out, its record in), then
    writes the rows ``bulk_load`` would; it returns the number of commits. In SQLite a
    savepoint made every page the rebuild touched go to a journal file as well."""

    def rebuild_agent(
        self,
        agent: str,
        entries: Iterable[tuple[str, str, dict[str, Any]]],
        blob: Callable[[str], bytes],
        clear: Callable[[], None],
    ) -> int: ...


class Index(Protocol):
    """A derived index: rebuildable from the log, answering in sessions."""

    # True when opening found no usable index: the store rebuilds it from the log.
    created: bool

    def read_session(self) -> AbstractContextManager[ReadSession]: ...

    # For a caller that asks ONE query: a single statement reads one snapshot on every
    # engine, so an engine may skip the transaction around it (SQLite does: BEGIN and
    # COMMIT were a tenth of a read by path). Two queries need ``read_session``.
    def statement_session(self) -> AbstractContextManager[ReadSession]: ...

    def write_session(self) -> AbstractContextManager[WriteSession]: ...

    def checkpoint(self) -> None: ...

    def close(self) -> None: ...


class WatchedIndex(Index, Protocol):
    """An index in a file the store watches: ``on_reopen`` is called when a session
    finds the file deleted or replaced, so the store checks ``path`` against the log."""

    path: Path
    on_reopen: Callable[[], None] | None
