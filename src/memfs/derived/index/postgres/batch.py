"""A write session's commits' rows, gathered in Python and written in ONE statement.

Applying a commit one statement per row (the agents UPDATE, the versions UPDATE and
INSERT, the memory_meta DELETE, the memories upsert, …: twelve per commit) cost this
client ~75 us of Python each in a pipeline and PostgreSQL a parse/bind/execute round
each: psycopg was half of a writer thread's CPU (docs/benchmarks.md). A ``RowBatch``
takes every commit a session applies until its next statement is sent (a group
commit's whole batch, a bulk load's next few hundred entries) and folds them into the
rows they leave, one list per column, written by ``WRITE``: one statement of
data-modifying CTEs reading ``unnest`` of those arrays, whatever the number of commits
and changes.

Every sub-statement of one statement sees the same snapshot (the rows before it) and
none may touch a row another touches, so the fold leaves each row to one of them:

- **agents**: one row per agent (revision and last_ts the highest, the last name
  given); its count and bytes lose the rows the touched paths had before the batch
  (read in the snapshot, as the one-commit UPDATE read them before the memories
  changed) and gain the rows the batch leaves there.
- **versions**: a version opened and closed in the batch (two commits of a path) is
  inserted closed; only versions from before it are UPDATEd.
- **memories**: a path's last state only (a row upserted twice in one ON CONFLICT is
  an error): a path left deleted is DELETEd; a live one upserted, keeping its
  created_at unless it was deleted earlier in the batch (``fresh``: a re-create takes
  the new commit's, as the DELETE then INSERT of one commit at a time left it) or
  created earlier in it (then the first create's).
- **memory_meta**: a path some change of the batch replaced keeps exactly its last
  state's keys: the other keys are DELETEd, those upserted (never both for one row).
- **search_docs**: a path's last state, upserted or DELETEd; **blobs** once each;
  **links** of each inserted version (unique by version).

Nothing here waits for an answer: the statement goes in the session's pipeline with
whatever is sent next (the clock step and COMMIT, or a read, which then sees it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memfs.derived.index.links import LinkRow, link_rows
from memfs.derived.index.postgres import search
from memfs.derived.index.rows import memory_row, metadata_json, version_row
from memfs.domain.commits import Commit
from memfs.domain.content import metadata_text

T, I8, B, BY = "text[]", "int8[]", "bool[]", "bytea[]"


def _unnest(alias: str, columns: str, types: tuple[str, ...]) -> str:
    casts = ", ".join(f"%s::{t}" for t in types)
    return f"unnest({casts}) {alias}({columns})"


_MEMORY_COLUMNS = (
    "agent_id, path, version, sha256, bytes, description, metadata, created_at, updated_at, listing"
)
_MEMORY_SET = (
    "version=excluded.version, sha256=excluded.sha256, bytes=excluded.bytes,"
    " description=excluded.description, metadata=excluded.metadata,"
    " updated_at=excluded.updated_at, listing=excluded.listing"
)
_SEARCH_COLUMNS = (
    "agent_id, path, sha256, description, body, path_words, folded_path_words,"
    " folded_description, folded_body"
)
# The parameters' order: the arrays of each CTE, in the order of the CTEs below.
WRITE = (
    "WITH touched AS (SELECT * FROM "
    + _unnest("p", "agent_id, path", (T, T))
    + "), a AS (UPDATE agents t SET revision=GREATEST(t.revision, s.revision),"
    " last_ts=GREATEST(t.last_ts, s.ts), name=COALESCE(s.name, t.name),"
    " memory_count=t.memory_count-COALESCE(o.n, 0)+s.n,"
    " memory_bytes=t.memory_bytes-COALESCE(o.b, 0)+s.b FROM "
    + _unnest("s", "agent_id, revision, ts, name, n, b", (T, I8, I8, T, I8, I8))
    + " LEFT JOIN (SELECT m.agent_id, COUNT(*) AS n, SUM(m.bytes) AS b FROM touched p"
    " JOIN memories m ON m.agent_id=p.agent_id AND m.path=p.path GROUP BY m.agent_id) o"
    " ON o.agent_id=s.agent_id WHERE t.agent_id=s.agent_id),"
    " c AS (INSERT INTO commits(agent_id, revision, ts, visible_at, actor, message,"
    " change_count, head_changes, changes) SELECT * FROM "
    + _unnest(
        "s",
        "agent_id, revision, ts, visible_at, actor, message, change_count, head_changes, changes",
        (T, I8, I8, I8, T, T, I8, T, T),
    )
    + "), vc AS (UPDATE versions t SET valid_to=s.valid_to, visible_to=s.visible_to FROM "
    + _unnest("s", "agent_id, path, version, valid_to, visible_to", (T, T, I8, I8, I8))
    + " WHERE t.agent_id=s.agent_id AND t.path=s.path AND t.version=s.version),"
    " vi AS (INSERT INTO versions(agent_id, path, version, revision, operation, sha256,"
    " bytes, description, metadata, valid_from, visible_from, valid_to, visible_to)"
    " SELECT * FROM "
    + _unnest(
        "s",
        "agent_id, path, version, revision, operation, sha256, bytes, description,"
        " metadata, valid_from, visible_from, valid_to, visible_to",
        (T, T, I8, I8, T, T, I8, T, T, I8, I8, I8, I8),
    )
    + "), md AS (DELETE FROM memories t USING "
    + _unnest("s", "agent_id, path", (T, T))
    + " WHERE t.agent_id=s.agent_id AND t.path=s.path),"
    " mrows AS (SELECT * FROM "
    + _unnest("s", _MEMORY_COLUMNS + ", fresh", (T, T, I8, T, I8, T, T, I8, I8, T, B))
    + f"), mu AS (INSERT INTO memories SELECT {_MEMORY_COLUMNS} FROM mrows WHERE NOT fresh"
    f" ON CONFLICT(agent_id, path) DO UPDATE SET {_MEMORY_SET}),"
    f" mf AS (INSERT INTO memories SELECT {_MEMORY_COLUMNS} FROM mrows WHERE fresh"
    f" ON CONFLICT(agent_id, path) DO UPDATE SET {_MEMORY_SET}, created_at=excluded.created_at),"
    " keys AS (SELECT * FROM "
    + _unnest("s", "agent_id, path, key, value", (T, T, T, T))
    + "), kd AS (DELETE FROM memory_meta t USING "
    + _unnest("s", "agent_id, path", (T, T))
    + " WHERE t.agent_id=s.agent_id AND t.path=s.path AND NOT EXISTS(SELECT 1 FROM keys k"
    " WHERE k.agent_id=t.agent_id AND k.path=t.path AND k.key=t.key)),"
    " ki AS (INSERT INTO memory_meta SELECT * FROM keys"
    " ON CONFLICT(agent_id, path, key) DO UPDATE SET value=excluded.value),"
    " bl AS (INSERT INTO blobs SELECT * FROM "
    + _unnest("s", "agent_id, sha256, content", (T, T, BY))
    + " ON CONFLICT DO NOTHING), sd AS (DELETE FROM search_docs t USING "
    + _unnest("s", "agent_id, path", (T, T))
    + " WHERE t.agent_id=s.agent_id AND t.path=s.path),"
    f" su AS (INSERT INTO search_docs({_SEARCH_COLUMNS}, doc) SELECT {_SEARCH_COLUMNS},"
    f" {search.doc_of('s.w_path', 's.w_description', 's.w_body')} FROM "
    + _unnest("s", _SEARCH_COLUMNS + ", w_path, w_description, w_body", (T,) * 12)
    + f" ON CONFLICT(agent_id, path) DO UPDATE SET {search.UPSERT_SET}),"
    " l AS (INSERT INTO links SELECT * FROM "
    + _unnest("s", "agent_id, path, version, idx, target, visible_from", (T, T, I8, I8, T, I8))
    + " ON CONFLICT(agent_id, path, version, idx) DO UPDATE SET target=excluded.target,"
    " visible_from=excluded.visible_from) SELECT 1"
)


@dataclass
class _Agent:
    revision: int
    ts: int
    name: str | None
    paths: set[str] = field(default_factory=set)


@dataclass
class _Path:
    """A path's state as the batch leaves it."""

    row: tuple[Any, ...] | None = None  # the memories row, None: deleted
    deleted: bool = False  # deleted by a change of the batch (before its last state)
    replaced: bool = False  # some change had a ``before``: its old keys go
    keys: dict[str, str] = field(default_factory=dict)  # the last state's metadata
    doc: tuple[Any, ...] | None = None  # the search_docs row, None: deleted


class RowBatch:
    """The rows of the commits applied since the last ``take`` (see the module doc)."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Forget every row gathered."""
        self.agents: dict[str, _Agent] = {}
        self.commits: list[tuple[Any, ...]] = []
        self.closes: dict[tuple[str, str, int], tuple[int, int]] = {}
        self.versions: dict[tuple[str, str, int], list[Any]] = {}
        self.paths: dict[tuple[str, str], _Path] = {}
        self.blobs: dict[tuple[str, str], bytes] = {}
        self.links: list[LinkRow] = []

    def __bool__(self) -> bool:
        return bool(self.agents)

    def blob(self, agent_id: str, sha256: str) -> bytes | None:
        """A content this batch holds but has not written yet."""
        return self.blobs.get((agent_id, sha256))

    def add(
        self,
        commit: Commit,
        visible_at: int,
        contents: dict[str, bytes],
        cached: dict[str, bytes | None],
        commit_row: tuple[Any, ...] | None,
    ) -> None:
        """Fold ``commit`` in: ``contents`` holds the contents it brings (their blobs
        rows are written), ``cached`` those of its renames (read from the blobs rows;
        None: not there), ``commit_row`` its commits row (None: already written)."""
        agent = commit.agent_id
        if commit_row is not None:
            self.commits.append(commit_row)
        known = self.agents.get(agent)
        if known is None:
            known = self.agents[agent] = _Agent(commit.revision, commit.ts, commit.agent_name)
        else:
            known.revision = max(known.revision, commit.revision)
            known.ts = max(known.ts, commit.ts)
            if commit.agent_name is not None:
                known.name = commit.agent_name
        for change in commit.changes:
            path = change.path
            known.paths.add(path)
            if change.version > 1:
                closed = (agent, path, change.version - 1)
                opened = self.versions.get(closed)
                if opened is not None:  # opened in this batch: inserted closed
                    opened[11], opened[12] = commit.ts, visible_at
                else:
                    self.closes[closed] = (commit.ts, visible_at)
            meta_json = metadata_json(change)
            self.versions[(agent, path, change.version)] = [
                *version_row(commit, change, visible_at, meta_json),
                None,
                None,
            ]
            state = self.paths.setdefault((agent, path), _Path())
            if change.before is not None:
                state.replaced = True
            if change.after is None:
                state.row = state.doc = None
                state.deleted = True
                state.keys = {}
                continue
            row = memory_row(commit, change, meta_json)
            if state.row is not None:  # created earlier in the batch: its created_at
                row = (*row[:7], state.row[7], *row[8:])
            state.row = row
            state.keys = {k: metadata_text(v) for k, v in change.metadata.items()}
            content = contents.get(change.after)
            if content is not None:
                self.blobs.setdefault((agent, change.after), content)
            else:
                content = cached.get(change.after)
            state.doc = search.doc_row(agent, path, change.after, change.description, content)
            self.links += link_rows(agent, path, change.version, visible_at, content)

    def take(self) -> list[Any]:
        """The parameters of ``WRITE`` for the rows gathered; the batch is then empty."""
        touched = [(a, p) for a, known in self.agents.items() for p in sorted(known.paths)]
        agents = []
        for agent_id, known in self.agents.items():
            live = [s.row for p in known.paths if (s := self.paths[(agent_id, p)]).row is not None]
            agents.append(
                (
                    agent_id,
                    known.revision,
                    known.ts,
                    known.name,
                    len(live),
                    sum(int(r[4]) for r in live),
                )
            )
        closes = [(*key, *at) for key, at in self.closes.items()]
        gone = [key for key, s in self.paths.items() if s.row is None]
        rows = [(*s.row, s.deleted) for s in self.paths.values() if s.row is not None]
        keys = [(*key, k, v) for key, s in self.paths.items() for k, v in s.keys.items()]
        replaced = [key for key, s in self.paths.items() if s.replaced]
        blobs = [(*key, content) for key, content in self.blobs.items()]
        docs = [s.doc for s in self.paths.values() if s.doc is not None]
        params: list[Any] = []
        for table, width in (
            (touched, 2),
            (agents, 6),
            (self.commits, 9),
            (closes, 5),
            (list(self.versions.values()), 13),
            (gone, 2),
            (rows, 11),
            (keys, 4),
            (replaced, 2),
            (blobs, 3),
            (gone, 2),
            (docs, 12),
            (self.links, 6),
        ):
            params.extend([row[i] for row in table] for i in range(width))
        self.clear()
        return params
