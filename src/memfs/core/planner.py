"""The commit planner: operations plus the agent's current states → one commit's changes.

Pure: the current state is read only through ``States`` (in the store, the index inside
the commit's write transaction; in tests, a dict), so every rule of a commit —
preconditions, version numbers, identical content, file/folder clashes, renames — is
testable without SQLite. Each path's row is read at most once per plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from memfs.derived.index import MemoryRow
from memfs.domain import content as contentlib
from memfs.domain import paths
from memfs.domain.commits import CREATED, DELETED, INLINE_LIMIT, MODIFIED, RENAMED, Change, Commit
from memfs.errors import Conflict, InvalidRequest, NotFound, PreconditionFailed


@dataclass(frozen=True)
class Put:
    """Write ``content`` at ``path``; ``if_match`` a sha256, ``create_only`` = If-None-Match.

    ``lenient`` (Claude's memory tool): text the tool would store is stored, so NUL is
    allowed and frontmatter that does not parse just yields no description or metadata.
    """

    path: str
    content: bytes
    if_match: str | None = None
    create_only: bool = False
    lenient: bool = False


@dataclass(frozen=True)
class Delete:
    path: str
    if_match: str | None = None


@dataclass(frozen=True)
class Move:
    src: str
    dst: str
    if_match: str | None = None


Op = Put | Delete | Move


class States(Protocol):
    """What planning reads of the agent's current state."""

    def memory(self, path: str) -> MemoryRow | None:
        """The live memory at ``path`` (None: none)."""

    def is_folder(self, path: str) -> bool:
        """True if some live memory lies below ``path``."""

    def live_paths(self, candidates: Sequence[str]) -> set[str]:
        """Those of ``candidates`` that are live memories."""

    def last_version(self, path: str) -> int:
        """The newest version number ``path`` ever had (0: never written)."""

    def content(self, sha256: str) -> bytes:
        """A current content, checked against its sha256."""


@dataclass
class Plan:
    """Changes being assembled for one commit, with the state they leave behind."""

    changes: list[Change] = field(default_factory=list)
    contents: dict[str, bytes] = field(default_factory=dict)
    after: dict[str, str | None] = field(default_factory=dict)  # path → sha (None: gone)
    # Folders holding a path this plan writes: each path is added once, never undone.
    folders: set[str] = field(default_factory=set)
    # Index rows read while planning (None: no live memory), so each is read once.
    rows: dict[str, MemoryRow | None] = field(default_factory=dict)


def plan(ops: Sequence[Op], states: States, *, memory_bytes: int) -> Plan:
    """The changes ``ops`` make to the state ``states`` reads, in order (an error of
    the memfs tree for the first op that can't apply)."""
    return _Planner(states, memory_bytes).run(ops)


def written_row(plan: Plan, commit: Commit, path: str | None) -> MemoryRow | None:
    """The index row ``commit`` gave ``path``, as apply_commit wrote it (None: not one
    the commit wrote, read it instead)."""
    for change in commit.changes:
        if change.path == path and change.after is not None:
            before = plan.rows.get(path)
            return MemoryRow(
                path=path,
                version=change.version,
                sha256=change.after,
                size=change.size,
                description=change.description,
                metadata=dict(change.metadata),
                # An update keeps the memory's created_at (a live row was read to plan it).
                created_at=before.created_at if before is not None else commit.ts,
                updated_at=commit.ts,
            )
    return None


class _Planner:
    def __init__(self, states: States, memory_bytes: int) -> None:
        self.states = states
        self.memory_bytes = memory_bytes
        self.plan = Plan()

    def run(self, ops: Sequence[Op]) -> Plan:
        for op in ops:
            if isinstance(op, Put):
                self._plan_put(op)
            elif isinstance(op, Delete):
                self._plan_delete(op)
            else:
                self._plan_move(op)
        return self.plan

    def _row(self, path: str) -> MemoryRow | None:
        """The index row of ``path`` before this plan (cached for the plan)."""
        if path not in self.plan.rows:
            self.plan.rows[path] = self.states.memory(path)
        return self.plan.rows[path]

    def _current(self, path: str) -> str | None:
        if path in self.plan.after:
            return self.plan.after[path]
        row = self._row(path)
        return row.sha256 if row else None

    def _check_place(self, path: str) -> None:
        """A file and a folder can't share a name."""
        pending_below = path in self.plan.folders
        if pending_below or self.states.is_folder(path):
            raise Conflict(f"{path} is a folder; a memory can't have the same name", field="path")
        folders = paths.parent_folders(path)
        live = self.states.live_paths([f for f in folders if f not in self.plan.after])
        for folder in folders:
            if self.plan.after.get(folder) is not None or folder in live:
                raise Conflict(
                    f"{folder} is a memory, so it can't be a folder for {path}", field="path"
                )

    def _add(self, change: Change, data: bytes | None) -> None:
        if change.path in self.plan.after:
            raise InvalidRequest(f"one commit can change {change.path} only once", field="path")
        self.plan.changes.append(change)
        self.plan.after[change.path] = change.after
        if change.after is not None:
            self.plan.folders.update(paths.parent_folders(change.path))
        if change.after is not None and data is not None:
            self.plan.contents[change.after] = data

    def _next_version(self, path: str) -> int:
        row = self._row(path)
        if row is not None:  # a live memory's version is its path's newest
            return row.version + 1
        return self.states.last_version(path) + 1  # after a delete, if any

    def _plan_put(self, op: Put) -> None:
        parsed = contentlib.parse(op.content, limit=self.memory_bytes, lenient=op.lenient)
        current = self._current(op.path)
        if op.create_only and current is not None:
            raise PreconditionFailed(f"{op.path} already exists (If-None-Match: *)", field="path")
        if op.if_match is not None and current != op.if_match:
            raise PreconditionFailed(_mismatch(op.path, op.if_match, current), field="If-Match")
        if current == parsed.sha256:
            return  # identical content: nothing to commit
        if current is None:
            self._check_place(op.path)
        text = op.content.decode() if parsed.size <= INLINE_LIMIT else None
        change = Change(
            path=op.path,
            operation=MODIFIED if current is not None else CREATED,
            version=self._next_version(op.path),
            before=current,
            after=parsed.sha256,
            size=parsed.size,
            content=text,
            description=parsed.description,
            metadata=parsed.metadata,
        )
        self._add(change, op.content)

    def _plan_delete(self, op: Delete) -> None:
        current = self._current(op.path)
        if current is None:
            raise NotFound(f"{op.path} does not exist", field="path")
        if op.if_match is not None and current != op.if_match:
            raise PreconditionFailed(_mismatch(op.path, op.if_match, current), field="If-Match")
        change = Change(
            path=op.path,
            operation=DELETED,
            version=self._next_version(op.path),
            before=current,
            after=None,
        )
        self._add(change, None)

    def _plan_move(self, op: Move) -> None:
        current = self._current(op.src)
        if current is None:
            raise NotFound(f"{op.src} does not exist", field="path")
        if op.if_match is not None and current != op.if_match:
            raise PreconditionFailed(_mismatch(op.src, op.if_match, current), field="If-Match")
        if op.src == op.dst:
            raise InvalidRequest("a memory can't be renamed to its own path", field="newPath")
        if self._current(op.dst) is not None:
            raise Conflict(f"{op.dst} already exists", field="newPath")
        data = self.plan.contents.get(current) or self.states.content(current)
        row = self._row(op.src)
        description = row.description if row else None
        metadata = row.metadata if row else {}
        self._add(
            Change(
                path=op.src,
                operation=RENAMED,
                version=self._next_version(op.src),
                before=current,
                after=None,
                renamed_to=op.dst,
            ),
            None,
        )
        self._check_place(op.dst)
        self._add(
            Change(
                path=op.dst,
                operation=RENAMED,
                version=self._next_version(op.dst),
                before=None,
                after=current,
                size=len(data),
                content=data.decode() if len(data) <= INLINE_LIMIT else None,
                renamed_from=op.src,
                description=description,
                metadata=metadata,
            ),
            data,
        )


def _mismatch(path: str, expected: str, current: str | None) -> str:
    now = f"is at {current[:12]}…" if current else "does not exist"
    return f"{path} {now}, not {expected[:12]}…; re-read it and retry"
