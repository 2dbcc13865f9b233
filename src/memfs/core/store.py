"""The Store: agents, memories, versions and the commit log, on a Backend.

Every change is one commit (``core/commit.py``): planned on the index's head, log entry
N+1 created with create-if-absent while no index lock is held, then indexed in a group
commit with the other commits of the moment; only then is the caller answered. Losing
the create (to another writer sharing the backend) means catching up and re-checking
at N+2. HTTP, CLI and client all call these methods.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from memfs.canonical import durable, layout
from memfs.canonical.backend import Backend, LocalBackend, MissingObject
from memfs.core import fault_points
from memfs.core.commit import CommitResult as CommitResult
from memfs.core.commit import Committer, verified
from memfs.core.commit import require_agent as _require_agent
from memfs.core.group_commit import GroupCommit, WakingGroupCommit
from memfs.core.planner import Delete as Delete
from memfs.core.planner import Move as Move
from memfs.core.planner import Op as Op
from memfs.core.planner import Put as Put
from memfs.derived import index
from memfs.derived.index import AgentRow, CommitRow, FolderEntry, MemoryRow, VersionRow
from memfs.derived.index.base import ReadSession, WatchedIndex, WriteSession
from memfs.derived.index.factory import open_index
from memfs.domain import paths
from memfs.domain.commits import (
    CREATED,
    Commit,
    format_ts,
    now_us,
    parse_ts,
)
from memfs.domain.content import Scalar
from memfs.errors import (
    Conflict,
    CorruptionError,
    Damaged,
    InvalidRequest,
    NotFound,
)

log = logging.getLogger("memfs.store")

DEFAULT_MEMORY_BYTES = 100 * 1024

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _records_damage(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """Damage found inside a transaction (rolled back with it) is recorded in the
    index once the transaction is over, so every process refuses that agent."""

    @functools.wraps(method)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return method(*args, **kwargs)
        except Damaged as exc:
            store = args[0]
            assert isinstance(store, Store)
            store.record_damage(exc)
            raise

    return wrapper


@dataclass(frozen=True)
class Memory:
    path: str
    content: bytes
    sha256: str
    size: int
    description: str | None
    metadata: dict[str, Scalar]
    version: int
    created_at: int
    updated_at: int


@dataclass(frozen=True)
class WriteResult:
    created: bool
    memory: MemoryRow
    revision: int
    changed: bool


@dataclass(frozen=True)
class Agent:
    agent_id: str
    name: str
    memory_store_id: str
    created_at: int
    revision: int
    last_ts: int

    @classmethod
    def of(cls, row: AgentRow) -> Agent:
        return cls(row.agent_id, row.name, row.store_id, row.created_at, row.revision, row.last_ts)


class Store:
    def __init__(
        self,
        data_dir: Path,
        *,
        backend: Backend | None = None,
        memory_bytes: int = DEFAULT_MEMORY_BYTES,
        index_file: Path | None = None,
        index_location: str | None = None,
        worktree: bool = True,
    ) -> None:
        self.data_dir = data_dir
        # Off when objects are on S3 (core.objects): the tree is a single-node feature.
        self.worktree = worktree
        durable.private_folder(data_dir)
        fault_points.install()  # test-only, and a no-op unless MEMFS_TEST_FAULT asks
        # A backend made here is this Store's to close; one passed in is its caller's.
        self._own_backend: LocalBackend | None = None
        if backend is None:
            backend = self._own_backend = LocalBackend(data_dir)
        self.backend: Backend = backend
        # Typed as the seam: the core reaches the index only through sessions. Where it
        # is: ``index_location`` (MEMFS_INDEX, postgresql://…), else SQLite in the folder.
        file = index_file or layout.index_path(data_dir)
        self.index: WatchedIndex = open_index(index_location, file)
        # Concurrent run registrations share one index transaction (core.runs).
        # (Woken when their flush ends, not when they get the leader lock: a delivery's
        # 202 waits for both queues.)
        self.registrations: GroupCommit[Any] = WakingGroupCommit()
        # Concurrent new delivery records share one durability point (core.delivery_records).
        self.deliveries: GroupCommit[Any] = WakingGroupCommit()
        # The triggers deliveries were checked against, each with the bytes of its
        # newest record: checked again (one read, one stat) before each use
        # (core.triggers ``Triggers.get_seen``, the type ``triggers.Seen``).
        self.triggers_seen: dict[tuple[str, str], Any] = {}
        # True while this process rebuilds a deleted or replaced index (memfs.core.healing).
        self.index_rebuilding = False
        self.healed_inode: int | None = None  # the index file last checked against the log
        self.index.on_reopen = self._index_replaced
        self.memory_bytes = memory_bytes
        # Plans, publishes and (in a group commit) indexes commits (core/commit.py).
        self.commits = Committer(self)
        # Called after each commit this Store makes (the server counts them for /metrics).
        self.on_commit: Callable[[], None] | None = None
        # Called once per deleted or replaced index file a session finds: a server sets
        # it to start the rebuild (memfs.core.healing.watch). A hook, not an import:
        # healing rebuilds through maintenance, above the store, so the store can't call it.
        self.on_index_replaced: Callable[[], None] | None = None

    def _index_replaced(self) -> None:
        """A thread found the index file replaced: check it against the log, once per
        file (every thread of the process reconnects, one by one)."""
        try:
            inode: int | None = os.stat(self.index.path).st_ino
        except FileNotFoundError:
            inode = None
        if inode is not None and inode == self.healed_inode:
            return
        self.healed_inode = inode
        if self.on_index_replaced is not None:
            self.on_index_replaced()

    def close(self) -> None:
        self.index.close()
        self.commits.close()
        if self._own_backend is not None:
            self._own_backend.close()

    # ---- agents ----------------------------------------------------------------

    def create_agent(self, agent_id: str, name: str | None = None) -> Agent:
        paths.agent_id(agent_id)
        name = agent_id if name is None else _agent_name(name)
        with self.index.write_session() as ix:
            # Canonical but not indexed (a crash before the index commit, or a lost
            # index): adopt it in its own transaction, so the Conflict below keeps it.
            if ix.agent(agent_id) is None:
                existing = self.agent_record(agent_id)
                if existing is not None:
                    self.adopt_record(ix, existing)
        with self.index.write_session() as ix:
            if ix.agent(agent_id) is not None:
                raise Conflict(f"agent {agent_id!r} already exists", field="agentId")
            # Leftovers of an erase that was interrupted must not leak into a new agent.
            for key in list(self.backend.list(layout.agent_prefix(agent_id))):
                self.backend.delete(key)
            shutil.rmtree(layout.worktree_root(self.data_dir, agent_id), ignore_errors=True)
            created = now_us()
            store_id = str(uuid.uuid4())
            record = {"format": 1, "agentId": agent_id, "name": name, "memoryStoreId": store_id}
            record["createdAt"] = format_ts(created)
            body = json.dumps(record, ensure_ascii=False).encode() + b"\n"
            if not self.backend.put_if_absent(layout.agent_key(agent_id), body):
                raise Conflict(f"agent {agent_id!r} already exists", field="agentId")
            ix.put_agent(agent_id, name, store_id, created)
            if self.worktree:
                durable.ensure_dir(layout.worktree_root(self.data_dir, agent_id))
            row = ix.agent(agent_id)
        assert row is not None
        return Agent.of(row)

    def agent_record(self, agent_id: str) -> dict[str, str] | None:
        """The canonical record (agent.json) of an agent, None if there is none."""
        try:
            data = self.backend.get(layout.agent_key(agent_id))
        except MissingObject:
            return None
        try:
            record = json.loads(data)
            if record["agentId"] != agent_id:
                raise ValueError("agent id does not match its folder")
            return dict(record)
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptionError(f"agent record of {agent_id!r} is unreadable: {exc}") from None

    def adopt_record(self, ix: WriteSession, record: Mapping[str, Any]) -> None:
        """Index an agent from its canonical record (reindex, import, a lost index)."""
        ix.put_agent(
            record["agentId"],
            record["name"],
            record["memoryStoreId"],
            parse_ts(record["createdAt"]),
        )

    def rename_agent(self, agent_id: str, name: str, *, actor: str) -> Agent:
        name = _agent_name(name)
        self._commit(agent_id, [], actor=actor, message=f"rename agent to {name}", agent_name=name)
        return self.get_agent(agent_id)

    def get_agent(self, agent_id: str) -> Agent:
        paths.agent_id(agent_id)
        # Two statements in autocommit (no BEGIN/COMMIT): the row and its damage need
        # no common snapshot, and every delivery asks (core/deliveries.py ``target``).
        with self.index.statement_session() as ix:
            return Agent.of(_require_agent(ix, agent_id))

    def list_agents(
        self, prefix: str = "", *, after: str | None = None, limit: int = 200
    ) -> list[Agent]:
        with self.index.read_session() as ix:
            return [Agent.of(r) for r in ix.agents(prefix, after, limit)]

    def agent_stats(self, agent_id: str) -> tuple[int, int]:
        """(number of memories, their total bytes)."""
        with self.index.read_session() as ix:
            _require_agent(ix, agent_id)
            return ix.agent_stats(agent_id)

    def ever_written(self, agent_id: str) -> bool:
        """Whether a memory of the agent was ever written (its summary is ``waiting`` until)."""
        with self.index.read_session() as ix:
            return ix.ever_written(agent_id)

    def erase_agent(self, agent_id: str) -> None:
        """Erase an agent and its whole history, irrecoverably."""
        paths.agent_id(agent_id)
        with self.index.write_session() as ix:
            if ix.agent(agent_id) is None and self.agent_record(agent_id) is None:
                raise NotFound(f"agent {agent_id!r} does not exist", field="agentId")
            ix.drop_agent(agent_id)
            ix.purge_search()  # its words leave the full-text index's segments
            # The record goes first: without it, whatever an interrupted erase leaves is
            # a leftover that fsck reports and the next create of this id removes.
            self.backend.delete(layout.agent_key(agent_id))
            for key in list(self.backend.list(layout.agent_prefix(agent_id))):
                self.backend.delete(key)
            shutil.rmtree(layout.agent_folder(self.data_dir, agent_id), ignore_errors=True)
        # The rows were zeroed as they were deleted (secure_delete); the WAL still holds
        # page images from before, until it is checkpointed and truncated.
        self.index.checkpoint()

    # ---- writing -----------------------------------------------------------------

    def write(
        self,
        agent_id: str,
        path: str,
        data: bytes,
        *,
        if_match: str | None = None,
        create_only: bool = False,
        actor: str,
        message: str = "",
    ) -> WriteResult:
        """Write one memory. Identical content is a no-op that answers the current version."""
        path = paths.memory_path(path)
        result = self._commit(
            agent_id,
            [Put(path, data, if_match=if_match, create_only=create_only)],
            actor=actor,
            message=message,
            read_back=path,
        )
        row = result.row
        assert row is not None
        created = result.commit is not None and result.commit.changes[0].operation == CREATED
        return WriteResult(created, row, result.revision, result.commit is not None)

    def delete(
        self,
        agent_id: str,
        path: str,
        *,
        if_match: str | None = None,
        actor: str,
        message: str = "",
    ) -> CommitResult:
        return self.apply(agent_id, [Delete(path, if_match)], actor=actor, message=message)

    def rename(
        self,
        agent_id: str,
        src: str,
        dst: str,
        *,
        if_match: str | None = None,
        actor: str,
        message: str = "",
    ) -> CommitResult:
        return self.apply(agent_id, [Move(src, dst, if_match)], actor=actor, message=message)

    def apply(
        self, agent_id: str, ops: Sequence[Op], *, actor: str, message: str = ""
    ) -> CommitResult:
        """Apply ``ops`` as one commit, all or nothing."""
        if not ops:
            raise InvalidRequest("a commit needs at least one change")
        return self._commit(agent_id, ops, actor=actor, message=message)

    @_records_damage
    def _commit(
        self,
        agent_id: str,
        ops: Sequence[Op],
        *,
        actor: str,
        message: str,
        agent_name: str | None = None,
        read_back: str | None = None,
    ) -> CommitResult:
        """Commit ``ops``; with ``read_back``, also the index row that path has afterwards
        (as the commit wrote it, or read in the same transaction)."""
        paths.agent_id(agent_id)
        ops = [_validated(op) for op in ops]
        return self.commits.commit(
            agent_id, ops, actor=actor, message=message, agent_name=agent_name,
            read_back=read_back,
        )

    # ---- reading -----------------------------------------------------------------

    def _read_blob(self, ix: ReadSession, agent_id: str, sha256: str) -> bytes:
        """A content, checked against its sha256 (Damaged if no copy of it is intact)."""
        data = ix.blob(agent_id, sha256)
        if data is not None:
            if hashlib.sha256(data).hexdigest() == sha256:
                return data
            log.error("the index's copy of content %s of %r is damaged", sha256, agent_id)
        key = layout.blob_key(agent_id, sha256)
        try:
            blob = self.backend.get(key)
        except MissingObject:
            if data is None:
                raise Damaged(agent_id, key, "content is missing") from None
            # Inline in a log entry: the index's copy was the only one at hand.
            first = ix.first_revision_with(agent_id, sha256)
            where = layout.log_key(agent_id, first) if first else key
            reason = f"content does not match its sha256 {sha256[:12]}…"
            raise Damaged(agent_id, where, reason) from None
        return verified(agent_id, sha256, blob, key)

    def record_damage(self, exc: Damaged) -> None:
        """Remember that ``exc.agent_id`` is damaged: its routes answer 503 until fsck."""
        if exc.known:
            return
        exc.known = True
        log.error("agent %r is damaged: %s: %s", exc.agent_id, exc.file, exc.reason)
        try:
            with self.index.write_session() as ix:
                ix.mark_damaged(exc.agent_id, exc.file, exc.reason)
        except Exception as error:  # the request is refused either way
            log.error("could not record the damage of %r: %s", exc.agent_id, error)

    def read(self, agent_id: str, path: str, version: int | None = None) -> Memory:
        """The current memory at ``path``, or its version ``version`` (past ones too)."""
        path = paths.memory_path(path)
        if version is None:
            # The common case in one statement, no transaction (four and a BEGIN/COMMIT were
            # most of a read); the rest (no agent, damage, ...) goes to a session, as before.
            with self.index.statement_session() as one:
                damage, row, data = one.memory_read(agent_id, path) or (None, None, None)
            # Every content read is checked against its sha256 (~2 µs for 2 KiB).
            if damage is None and row is not None and data is not None and (
                hashlib.sha256(data).hexdigest() == row.sha256
            ):
                # A Memory is its row's fields (the same names) and the content, set in
                # one dict update rather than a frozen __init__'s setattr per field (a
                # read by path is tens of µs, and that was a few of them).
                memory = object.__new__(Memory)
                fields = memory.__dict__
                fields.update(row.__dict__)
                fields["content"] = data
                return memory
        # Only a session can find damage (raised, then recorded): the common case above
        # has none to record and skips that wrapper's frame.
        return self._read_in_session(agent_id, path, version)

    @_records_damage
    def _read_in_session(self, agent_id: str, path: str, version: int | None) -> Memory:
        with self.index.read_session() as ix:
            _require_agent(ix, agent_id)
            if version is None:
                row = ix.memory(agent_id, path)
                if row is None:
                    raise NotFound(f"{path} does not exist", field="path")
                return Memory(content=self._read_blob(ix, agent_id, row.sha256), **vars(row))
            if version < 1:
                raise InvalidRequest("version must be an integer >= 1", field="version")
            # SQLite integers are 64-bit: a larger version can't exist (nor be bound).
            past = ix.version(agent_id, path, version) if version < 2**63 else None
            if past is None:
                raise NotFound(f"{path} has no version {version}", field="version")
            if past.sha256 is None:
                raise NotFound(
                    f"version {version} of {path} is its deletion; read version {version - 1}",
                    field="version",
                )
            data = self._read_blob(ix, agent_id, past.sha256)
            return Memory(
                path,
                data,
                past.sha256,
                past.size,
                past.description,
                past.metadata,
                past.version,
                past.valid_from,
                past.valid_from,
            )

    def list_memories(
        self,
        agent_id: str,
        folder: str = "",
        *,
        after: str | None = None,
        limit: int = 200,
        depth_one: bool = False,
        filters: Sequence[tuple[str, str]] = (),
    ) -> tuple[list[MemoryRow | FolderEntry], bool]:
        """A page of one folder's memories (and subfolders with ``depth_one``)."""
        folder = paths.folder_prefix(folder)
        with self.index.read_session() as ix:
            _require_agent(ix, agent_id)
            return ix.list_memories(
                agent_id,
                folder,
                after=after,
                limit=limit,
                depth_one=depth_one,
                filters=filters,
            )

    def list_page_json(
        self,
        agent_id: str,
        folder: str,
        *,
        after: str | None,
        limit: int,
        depth_one: bool,
        filters: list[tuple[str, str]],
    ) -> index.ListingJson:
        """A listing page as the stored listing JSON of its memories (no Python object
        per memory: the fast path of ``GET …/memories``); through ``list_memories`` for
        an agent the index doesn't hold, to answer its 404."""
        with self.index.read_session() as ix:
            if ix.agent(agent_id) is not None:
                return ix.list_memories_json(
                    agent_id,
                    folder,
                    after=after,
                    limit=limit,
                    depth_one=depth_one,
                    filters=filters,
                )
        items, more = self.list_memories(
            agent_id, folder, after=after, limit=limit, depth_one=depth_one, filters=filters
        )
        return index.listing_page(items, more)

    def count_memories(
        self,
        agent_id: str,
        folder: str = "",
        *,
        depth_one: bool = False,
        filters: Sequence[tuple[str, str]] = (),
    ) -> int:
        folder = paths.folder_prefix(folder)
        with self.index.read_session() as ix:
            _require_agent(ix, agent_id)
            return ix.count_memories(agent_id, folder, depth_one=depth_one, filters=filters)

    def versions(
        self, agent_id: str, path: str, *, after: int = 0, limit: int = 200
    ) -> list[VersionRow]:
        path = paths.memory_path(path)
        with self.index.read_session() as ix:
            _require_agent(ix, agent_id)
            rows = ix.versions(agent_id, path, after, limit)
            if not rows and after == 0:
                raise NotFound(f"{path} has no history", field="path")
            return rows

    def log(
        self, agent_id: str, *, path: str | None = None, before: int | None = None, limit: int = 200
    ) -> list[CommitRow]:
        """Commits newest first, optionally only those that touched ``path``."""
        if path is not None:
            path = paths.memory_path(path)
        with self.index.read_session() as ix:
            _require_agent(ix, agent_id)
            return ix.commits(agent_id, before=before, limit=limit, path=path)

    def commit_at(self, agent_id: str, revision: int) -> Commit:
        """The canonical log entry of ``revision``, read from the backend."""
        agent = self.get_agent(agent_id)
        if not 1 <= revision <= agent.revision:
            raise NotFound(
                f"agent {agent_id!r} has no revision {revision} (head is {agent.revision})",
                field="revision",
            )
        key = layout.log_key(agent_id, revision)
        try:
            return Commit.from_bytes(self.backend.get(key), where=key)
        except MissingObject:
            raise CorruptionError(f"log entry {key} is missing; run 'memfs fsck'") from None

    @_records_damage
    def content_of(self, agent_id: str, sha256: str) -> bytes:
        with self.index.read_session() as ix:
            return self._read_blob(ix, agent_id, sha256)

    def sync(self, agent_id: str | None = None) -> int:
        """Apply log entries a crashed writer left unindexed; returns how many agents moved."""
        ids = [agent_id] if agent_id else [a.agent_id for a in self.iter_agents()]
        moved = 0
        for one in ids:
            try:
                with self.index.write_session() as ix:
                    row = ix.agent(one)
                    if row is not None and self.commits.catch_up(ix, row) is not row:
                        moved += 1
            except Damaged as exc:  # that agent is refused; the others catch up
                self.record_damage(exc)
        return moved

    def iter_agents(self) -> list[Agent]:
        out: list[Agent] = []
        after: str | None = None
        while True:
            page = self.list_agents(after=after, limit=1000)
            out.extend(page)
            if len(page) < 1000:
                return out
            after = page[-1].agent_id


def _validated(op: Op) -> Op:
    if isinstance(op, Put):
        if op.if_match is not None:
            _sha(op.if_match)
        return Put(paths.memory_path(op.path), op.content, op.if_match, op.create_only, op.lenient)
    if isinstance(op, Delete):
        if op.if_match is not None:
            _sha(op.if_match)
        return Delete(paths.memory_path(op.path), op.if_match)
    if op.if_match is not None:
        _sha(op.if_match)
    return Move(paths.memory_path(op.src), paths.memory_path(op.dst, field="newPath"), op.if_match)


def _sha(value: str) -> str:
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise InvalidRequest(
            "If-Match must be a lowercase hex sha256 (64 characters)", field="If-Match"
        )
    return value


def _agent_name(name: str) -> str:
    if (
        not isinstance(name, str)
        or not name.strip()
        or len(name) > 256
        or any(ord(c) < 32 for c in name)
    ):
        raise InvalidRequest("agent name must be 1-256 printable characters", field="name")
    return name


__all__ = [
    "Agent",
    "CommitResult",
    "Delete",
    "Memory",
    "Move",
    "Op",
    "Put",
    "Store",
    "WriteResult",
]
