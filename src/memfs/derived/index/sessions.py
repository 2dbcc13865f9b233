"""The SQLite index's sessions (``base.ReadSession``/``WriteSession``) over one
connection in a transaction: each method is the named query of the module that owns it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from memfs.derived.index import bulk, links, reads, runs, search, walks, writes
from memfs.derived.index.rows import Connection, MemoryRead
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


class SqliteRead:
    """A read snapshot; ``conn`` is the connection its transaction runs on.

    ``agent`` reads the agent's row, its damage and the clock in one statement (a
    commit's planning asks for all three) and keeps the last two for ``damage`` and
    ``clock``, as the PostgreSQL sessions do: valid while the snapshot holds and this
    connection wrote nothing since (``total_changes``). ``heads=False`` (the
    per-thread session of single statements, each its own snapshot) keeps nothing.
    ``flush`` indexes the pending full-text rows in a write transaction of its own
    (``Index.flush_search``); a search runs it first when its snapshot has some.
    """

    def __init__(
        self, conn: Connection, flush: Callable[[], None] | None = None, *, heads: bool = True
    ) -> None:
        self.conn = conn
        self._flush = flush
        self._heads = heads
        # (agent_id, damage, clock, conn.total_changes when read)
        self._head: tuple[str, tuple[str, str] | None, int, int] | None = None

    def agent(self, agent_id: str) -> AgentRow | None:
        row, damage, clock = reads.agent_head(self.conn, agent_id)
        if self._heads:
            self._head = (agent_id, damage, clock, self.conn.total_changes)
        return row

    def _kept(self) -> tuple[str, tuple[str, str] | None, int, int] | None:
        head = self._head
        if head is not None and head[3] != self.conn.total_changes:
            head = self._head = None  # written since: read again
        return head

    def agent_heads(self) -> list[tuple[str, int]]:
        return reads.agent_heads(self.conn)

    def agent_ids(self) -> set[str]:
        return reads.agent_ids(self.conn)

    def agent_stats(self, agent_id: str) -> tuple[int, int]:
        return reads.agent_stats(self.conn, agent_id)

    def agents(self, prefix: str, after: str | None, limit: int) -> list[AgentRow]:
        return reads.agents(self.conn, prefix, after, limit)

    def blob(self, agent_id: str, sha256: str) -> bytes | None:
        return reads.blob(self.conn, agent_id, sha256)

    def cached_blobs(self, agent_id: str) -> list[tuple[str, bytes]]:
        return reads.cached_blobs(self.conn, agent_id)

    def commit_entry(self, agent_id: str, revision: int) -> tuple[int, str, str, str] | None:
        return reads.commit_entry(self.conn, agent_id, revision)

    def commit_revisions(self, agent_id: str) -> list[int]:
        return reads.commit_revisions(self.conn, agent_id)

    def commits(
        self, agent_id: str, *, before: int | None, limit: int, path: str | None = None
    ) -> list[CommitRow]:
        return reads.commits(self.conn, agent_id, before=before, limit=limit, path=path)

    def count_memories(
        self,
        agent_id: str,
        folder: str,
        *,
        depth_one: bool,
        filters: Sequence[tuple[str, str]] = (),
    ) -> int:
        return reads.count_memories(
            self.conn, agent_id, folder, depth_one=depth_one, filters=filters
        )

    def damage(self, agent_id: str) -> tuple[str, str] | None:
        head = self._kept()
        if head is not None and head[0] == agent_id:
            return head[1]
        return writes.damage(self.conn, agent_id)

    def damaged_agents(self) -> list[tuple[str, str, str]]:
        return reads.damaged_agents(self.conn)

    def ever_written(self, agent_id: str) -> bool:
        return reads.ever_written(self.conn, agent_id)

    def first_revision_with(self, agent_id: str, sha256: str) -> int | None:
        return reads.first_revision_with(self.conn, agent_id, sha256)

    def has_version_larger_than(self, agent_id: str, sha256: str, size: int) -> bool:
        return reads.has_version_larger_than(self.conn, agent_id, sha256, size)

    def is_folder(self, agent_id: str, path: str) -> bool:
        return reads.is_folder(self.conn, agent_id, path)

    def last_version(self, agent_id: str, path: str) -> int:
        return reads.last_version(self.conn, agent_id, path)

    def list_memories(
        self,
        agent_id: str,
        folder: str,
        *,
        after: str | None,
        limit: int,
        depth_one: bool,
        filters: Sequence[tuple[str, str]] = (),
    ) -> tuple[list[MemoryRow | FolderEntry], bool]:
        return reads.list_memories(
            self.conn,
            agent_id,
            folder,
            after=after,
            limit=limit,
            depth_one=depth_one,
            filters=filters,
        )

    def list_memories_json(
        self,
        agent_id: str,
        folder: str,
        *,
        after: str | None,
        limit: int,
        depth_one: bool,
        filters: Sequence[tuple[str, str]] = (),
    ) -> ListingJson:
        return reads.list_memories_json(
            self.conn,
            agent_id,
            folder,
            after=after,
            limit=limit,
            depth_one=depth_one,
            filters=filters,
        )

    def live_contents(self, agent_id: str) -> list[tuple[str, str]]:
        return reads.live_contents(self.conn, agent_id)

    def live_paths(self, agent_id: str, candidates: Sequence[str]) -> set[str]:
        return reads.live_paths(self.conn, agent_id, candidates)

    def live_rows(self, agent_id: str) -> list[tuple[Any, ...]]:
        return reads.live_rows(self.conn, agent_id)

    def memory(self, agent_id: str, path: str) -> MemoryRow | None:
        return reads.memory(self.conn, agent_id, path)

    def memory_read(self, agent_id: str, path: str) -> MemoryRead | None:
        return reads.memory_read(self.conn, agent_id, path)

    def path_states(self, agent_id: str, paths: Sequence[str]) -> dict[str, PathState]:
        return reads.path_states(self.conn, agent_id, paths)

    def plan_head(self, agent_id: str, paths: Sequence[str]) -> PlanHead:
        head = reads.plan_head(self.conn, agent_id, paths)
        if self._heads:
            self._head = (agent_id, head.damage, head.clock, self.conn.total_changes)
        return head

    def runs_by_status(self) -> dict[str, int]:
        return reads.runs_by_status(self.conn)

    def schema(self) -> int | None:
        return reads.schema(self.conn)

    def version(self, agent_id: str, path: str, number: int) -> VersionRow | None:
        return reads.version(self.conn, agent_id, path, number)

    def versions(self, agent_id: str, path: str, after: int, limit: int) -> list[VersionRow]:
        return reads.versions(self.conn, agent_id, path, after, limit)

    def due_run_rows(self, now: int, limit: int) -> list[RunRow]:
        return runs.due_run_rows(self.conn, now, limit)

    def finished_deliveries(self, before: int) -> list[tuple[str, str, str]]:
        return runs.finished_deliveries(self.conn, before)

    def run_counts(self, agent_id: str) -> dict[str, Any]:
        return runs.run_counts(self.conn, agent_id)

    def run_row(self, agent_id: str, run_id: str) -> RunRow | None:
        return runs.run_row(self.conn, agent_id, run_id)

    def run_rows(
        self,
        agent_id: str,
        *,
        trigger_id: str | None,
        status: str | None,
        after: tuple[int, str] | None,
        limit: int,
    ) -> list[RunRow]:
        return runs.run_rows(
            self.conn, agent_id, trigger_id=trigger_id, status=status, after=after, limit=limit
        )

    def clock(self) -> int:
        head = self._kept()
        if head is not None:
            return head[2]
        return writes.clock(self.conn)

    def version_rows(
        self, seek: tuple[str, str, int], high: str, pin: int, limit: int
    ) -> list[tuple[Any, ...]]:
        return walks.version_rows(self.conn, seek, high, pin, limit)

    def live_version_at(self, agent_id: str, path: str, pin: int) -> int | None:
        return walks.live_version_at(self.conn, agent_id, path, pin)

    def link_rows(
        self, seek: tuple[str, str, int, int], high: str, pin: int, limit: int
    ) -> list[tuple[Any, ...]]:
        return walks.link_rows(self.conn, seek, high, pin, limit)

    def agent_links(self, agent_id: str) -> list[tuple[str, int, int, str, int]]:
        return links.agent_links(self.conn, agent_id)

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
    ) -> list[tuple[Any, ...]]:
        return walks.step_rows(
            self.conn, kind, ident, seek, pin, limit, commits=commits, heads=heads
        )

    def search(
        self,
        match: str,
        target: tuple[str, str],
        folder: str,
        filters: Sequence[tuple[str, str]],
        limit: int,
        offset: int,
    ) -> list[SearchHit]:
        if search.pending(self.conn):
            self._flush_pending()
        return search.search(self.conn, match, target, folder, filters, limit, offset)

    def _flush_pending(self) -> None:
        """Index the pending full-text rows, so the search finds every commit made
        before it: in a write transaction of its own, the snapshot of this session
        moving past it (a read session cannot write; a search is the only query of its
        session in the core)."""
        if self._flush is None:
            return
        was = self.conn.in_transaction
        if was:
            self.conn.execute("COMMIT")
        self._head = None
        try:
            self._flush()
        finally:
            if was:
                self.conn.execute("BEGIN")

    def search_rows(self, agent_id: str) -> dict[str, str | None]:
        return search.search_rows(self.conn, agent_id)


class SqliteWrite(SqliteRead):
    """A write transaction holding the index's write lock. ``marked`` counts the
    paths its commits left for a full-text flush (the index's idle flush reads it)."""

    marked = 0

    def apply_commit(
        self, commit: Commit, visible_at: int, contents: dict[str, bytes], entry: bytes
    ) -> bool:
        applied = writes.apply_commit(self.conn, commit, visible_at, contents, entry)
        if applied:
            self.marked += len(commit.changes)
        return applied

    def apply_next_commit(
        self, commit: Commit, store_id: str, contents: dict[str, bytes], entry: bytes
    ) -> int | None:
        """``base.NextCommit``: the agent's row read in the commits row's INSERT."""
        visible_at = writes.apply_next_commit(self.conn, commit, store_id, contents)
        if visible_at is not None:
            self.marked += len(commit.changes)
        return visible_at

    def agent_rows(self, agent_ids: Sequence[str]) -> dict[str, AgentRow | None]:
        # One lock for every agent, held already: each row as ``agent`` reads it.
        return {a: self.agent(a) for a in agent_ids}

    def search(
        self,
        match: str,
        target: tuple[str, str],
        folder: str,
        filters: Sequence[tuple[str, str]],
        limit: int,
        offset: int,
    ) -> list[SearchHit]:
        search.flush(self.conn)  # in this transaction: it holds the write lock
        return search.search(self.conn, match, target, folder, filters, limit, offset)

    def bulk_load(
        self,
        agent: str,
        entries: Iterable[tuple[str, str, dict[str, Any]]],
        blob: Callable[[str], bytes],
    ) -> int:
        return bulk.bulk_load(self.conn, agent, entries, blob)

    def rebuild_agent(
        self,
        agent: str,
        entries: Iterable[tuple[str, str, dict[str, Any]]],
        blob: Callable[[str], bytes],
        clear: Callable[[], None],
    ) -> int:
        """``base.Rebuild``: the whole log read and checked, then ``clear()``, then the
        rows written; a CorruptionError comes before ``clear()``."""
        return bulk.bulk_load(self.conn, agent, entries, blob, before_write=clear)

    def clear_damage(self, agent_id: str) -> None:
        return writes.clear_damage(self.conn, agent_id)

    def clear_tables(self, tables: Iterable[str]) -> None:
        return writes.clear_tables(self.conn, tables)

    def drop_agent(self, agent_id: str, *, runs: bool = True) -> None:
        return writes.drop_agent(self.conn, agent_id, runs=runs)

    def mark_damaged(self, agent_id: str, file: str, reason: str) -> None:
        return writes.mark_damaged(self.conn, agent_id, file, reason)

    def put_agent(self, agent_id: str, name: str, store_id: str, created_at: int) -> None:
        return writes.put_agent(self.conn, agent_id, name, store_id, created_at)

    def raise_clock(self, at: int) -> None:
        return writes.raise_clock(self.conn, at)

    def release(self, name: str) -> None:
        return writes.release(self.conn, name)

    def rollback_to(self, name: str) -> None:
        return writes.rollback_to(self.conn, name)

    def savepoint(self, name: str) -> None:
        return writes.savepoint(self.conn, name)

    def put_run(self, values: Sequence[Any]) -> None:
        return runs.put_run(self.conn, values)

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
    ) -> None:
        return runs.add_run_step(
            self.conn, agent_id, run_id, seq, at, visible_at, kind, attempt, detail
        )

    def forget_delivery(self, agent_id: str, run_id: str) -> None:
        return runs.forget_delivery(self.conn, agent_id, run_id)

    def purge_search(self) -> None:
        return writes.purge_search(self.conn)
