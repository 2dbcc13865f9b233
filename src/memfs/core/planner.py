"""The commit planner: operations plus the agent's current states → one commit's changes.

Pure: the current state is read only through ``States`` (in the store, the index inside
the commit's write transaction; in tests, a dict), so every rule of a commit —
preconditions, version numbers, identical content, file/folder clashes, renames — is
testable without SQLite. Every path a plan can ask about (each op's paths and the
folders above the paths it may create) is read in one batched ``path_states`` call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from memfs.domain import content as contentlib
from memfs.domain import paths
from memfs.domain.commits import CREATED, DELETED, INLINE_LIMIT, MODIFIED, RENAMED, Change, Commit
from memfs.domain.records import MemoryRow, PathState
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

    def path_states(self, paths: Sequence[str]) -> Mapping[str, PathState]:
        """The state of each of ``paths`` (every one of them answered), in one read."""

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
    # Index rows of the paths the ops name (None: no live memory), read before planning.
    rows: dict[str, MemoryRow | None] = field(default_factory=dict)


def plan(
    ops: Sequence[Op],
    states: States,
    *,
    memory_bytes: int,
    read: Mapping[str, PathState] | None = None,
) -> Plan:
    """The changes ``ops`` make to the state ``states`` reads, in order (an error of
    the memfs tree for the first op that can't apply). ``read``: the states of
    ``paths_read(ops)``, read already (with the agent's head, in one statement)."""
    return _Planner(states, memory_bytes).run(ops, read)


def paths_read(ops: Sequence[Op]) -> list[str]:
    """Every path planning ``ops`` may ask about, each once: the paths the ops name,
    and the folders above a path an op may create (a file can't be a folder)."""
    wanted: list[str] = []
    for op in ops:
        if isinstance(op, Put):
            wanted += [op.path, *paths.parent_folders(op.path)]
        elif isinstance(op, Delete):
            wanted.append(op.path)
        else:
            wanted += [op.src, op.dst, *paths.parent_folders(op.dst)]
    return list(dict.fromkeys(wanted))


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
        self.read: dict[str, PathState] = {}

    def run(self, ops: Sequence[Op], read: Mapping[str, PathState] | None) -> Plan:
        if read is None:
            read = self.states.path_states(paths_read(ops))
        self.read = dict(read)
        for op in ops:
            if isinstance(op, Put):
                self._plan_put(op)
            elif isinstance(op, Delete):
                self._plan_delete(op)
            else:
                self._plan_move(op)
        return self.plan

    def _state(self, path: str) -> PathState:
        """``path``'s state before this plan (read up front with every other path)."""
        if path not in self.read:  # paths_read names every path asked; a second read
            self.read.update(self.states.path_states([path]))  # only if it missed one
        return self.read[path]

    def _row(self, path: str) -> MemoryRow | None:
        """The index row of ``path`` before this plan (kept in the plan)."""
        if path not in self.plan.rows:
            self.plan.rows[path] = self._state(path).memory
        return self.plan.rows[path]

    def _current(self, path: str) -> str | None:
        if path in self.plan.after:
            return self.plan.after[path]
        row = self._row(path)
        return row.sha256 if row else None

    def _check_place(self, path: str) -> None:
        """A file and a folder can't share a name."""
        pending_below = path in self.plan.folders
        if pending_below or self._state(path).is_folder:
            raise Conflict(f"{path} is a folder; a memory can't have the same name", field="path")
        folders = paths.parent_folders(path)
        for folder in folders:
            pending = folder in self.plan.after
            live = not pending and self._state(folder).memory is not None
            if self.plan.after.get(folder) is not None or live:
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
        return self._state(path).last_version + 1  # after a delete, if any

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
