"""The records the layers pass around: what the index answers, the store returns and
the edges render (plain frozen dataclasses, no behaviour)."""

from __future__ import annotations

from dataclasses import dataclass

from memfs.domain.content import Scalar


@dataclass(frozen=True)
class AgentRow:
    agent_id: str
    name: str
    store_id: str
    created_at: int
    revision: int
    last_ts: int


@dataclass(frozen=True)
class MemoryRow:
    path: str
    version: int
    sha256: str
    size: int
    description: str | None
    metadata: dict[str, Scalar]
    created_at: int
    updated_at: int


@dataclass(frozen=True)
class VersionRow:
    path: str
    version: int
    revision: int
    operation: str
    sha256: str | None
    size: int
    description: str | None
    metadata: dict[str, Scalar]
    valid_from: int
    valid_to: int | None
    actor: str
    message: str


@dataclass(frozen=True)
class CommitRow:
    revision: int
    ts: int
    visible_at: int
    actor: str
    message: str
    changes: list[dict[str, object]]


@dataclass(frozen=True)
class FolderEntry:
    path: str  # the folder, e.g. /memories/conventions


@dataclass(frozen=True)
class ListingJson:
    """A page of ``list_memories`` with each memory already as JSON text."""

    memories: bytes  # the memories' listing objects joined by "," (a JSON array's inside)
    folders: list[str]  # depth-one subfolders, in order
    last: str | None  # the page's last entry as an ``after``: a path, or a folder + "/"
    more: bool


@dataclass(frozen=True)
class PathState:
    """What a commit plan needs to know of one path, read for all its paths at once.

    ``memory`` is the live memory there (None: none), ``last_version`` the newest
    version the path ever had (0: never written), ``is_folder`` whether some live
    memory lies below it.
    """

    memory: MemoryRow | None
    last_version: int
    is_folder: bool


@dataclass(frozen=True)
class PlanHead:
    """A commit's planning read, from one snapshot: the agent's row (None: it does
    not exist), its damage as (file, reason), the visibility clock, and the state of
    each path asked for (``PathState``)."""

    agent: AgentRow | None
    damage: tuple[str, str] | None
    clock: int
    states: dict[str, PathState]


@dataclass(frozen=True)
class SearchHit:
    """One memory:query result: a live memory, its rank and its best passage."""

    agent_id: str
    path: str
    version: int
    sha256: str
    description: str | None
    updated_at: int
    score: float  # higher is better (BM25, column-weighted)
    snippet: str  # matched terms between SNIPPET_OPEN and SNIPPET_CLOSE
