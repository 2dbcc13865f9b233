"""A write session's commits' rows, gathered in Python and written in ONE statement.

Applying a commit one statement per row (the agents UPDATE, the versions UPDATE and
INSERT, the memory_meta DELETE, the memories upsert, …: twelve per commit) cost this
client ~75 us of Python each in a pipeline and PostgreSQL a parse/bind/execute round
each: psycopg was half of a writer thread's CPU (docs/benchmarks.md). A ``RowBatch``
takes every commit a session applies until its next statement is sent (a group
commit's whole batch, a bulk load's next few hundred entries) and folds them into the
rows they leave, one JSON text per table, written by ``WRITE``: one statement of
data-modifying CTEs reading those texts (``json_to_recordset``), whatever the number
of commits and changes. The write transaction first turns hash and merge joins off
(``KEYED_JOINS``), so each row it touches is found by its primary key.

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
  created_at unless it was deleted earlier in the batch (the ``fresh`` rows: a re-create takes
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

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from memfs.derived.index.links import LinkRow, link_rows
from memfs.derived.index.postgres import search
from memfs.derived.index.postgres.reads import encode_text
from memfs.derived.index.rows import memory_row, metadata_json, version_row
from memfs.domain.commits import Commit
from memfs.domain.content import metadata_text

# Each source of rows: its columns and their types, read from ONE parameter, a JSON
# array of objects (``json_to_recordset``). Arrays per column (``unnest``) were measured
# first: psycopg dumps a list in Python, ~70 us each, and this statement's ~90 arrays
# made it too long and too many parameters for psycopg's cache of parsed queries (4 KiB,
# 50 parameters) and gave it a new prepared statement for each mix of empty and
# non-empty arrays; JSON texts are made by the C encoder, one text parameter each.
_SOURCES: dict[str, tuple[tuple[str, str], ...]] = {
    "touched": (("agent_id", "text"), ("path", "text")),
    "g": (
        ("agent_id", "text"),
        ("revision", "int8"),
        ("ts", "int8"),
        ("name", "text"),
        ("n", "int8"),
        ("b", "int8"),
    ),
    "commits": (
        ("agent_id", "text"),
        ("revision", "int8"),
        ("ts", "int8"),
        ("visible_at", "int8"),
        ("actor", "text"),
        ("message", "text"),
        ("change_count", "int8"),
        ("head_changes", "text"),
        ("changes", "text"),
    ),
    "closes": (
        ("agent_id", "text"),
        ("path", "text"),
        ("version", "int8"),
        ("valid_to", "int8"),
        ("visible_to", "int8"),
    ),
    "versions": (
        ("agent_id", "text"),
        ("path", "text"),
        ("version", "int8"),
        ("revision", "int8"),
        ("operation", "text"),
        ("sha256", "text"),
        ("bytes", "int8"),
        ("description", "text"),
        ("metadata", "text"),
        ("valid_from", "int8"),
        ("visible_from", "int8"),
        ("valid_to", "int8"),
        ("visible_to", "int8"),
    ),
    "gone": (("agent_id", "text"), ("path", "text")),
    "memories": (
        ("agent_id", "text"),
        ("path", "text"),
        ("version", "int8"),
        ("sha256", "text"),
        ("bytes", "int8"),
        ("description", "text"),
        ("metadata", "text"),
        ("created_at", "int8"),
        ("updated_at", "int8"),
        ("listing", "text"),
    ),
    "fresh": (
        ("agent_id", "text"),
        ("path", "text"),
        ("version", "int8"),
        ("sha256", "text"),
        ("bytes", "int8"),
        ("description", "text"),
        ("metadata", "text"),
        ("created_at", "int8"),
        ("updated_at", "int8"),
        ("listing", "text"),
    ),
    "keys": (("agent_id", "text"), ("path", "text"), ("key", "text"), ("value", "text")),
    "replaced": (("agent_id", "text"), ("path", "text")),
    "blobs": (("agent_id", "text"), ("sha256", "text"), ("content", "text")),  # hex
    "docs": (
        ("agent_id", "text"),
        ("path", "text"),
        ("sha256", "text"),
        ("description", "text"),
        ("body", "text"),
        ("path_words", "text"),
        ("folded_path_words", "text"),
        ("folded_description", "text"),
        ("folded_body", "text"),
        ("w_path", "text"),
        ("w_description", "text"),
        ("w_body", "text"),
    ),
    "links": (
        ("agent_id", "text"),
        ("path", "text"),
        ("version", "int8"),
        ("idx", "int8"),
        ("target", "text"),
        ("visible_from", "int8"),
    ),
}


def _columns(source: str) -> str:
    return ", ".join(name for name, _ in _SOURCES[source])


# Sources whose rows are a table's rows: read as that table's row type (the statement
# is shorter: psycopg caches the parsing of statements of up to 4 KiB only).
_TABLE_ROWS = {
    "commits": "commits",
    "versions": "versions",
    "memories": "memories",
    "fresh": "memories",
    "keys": "memory_meta",
    "links": "links",
}


def _rows(source: str) -> str:
    """The rows of ``source``, as a FROM item named after it."""
    table = _TABLE_ROWS.get(source)
    if table is not None:
        return f"json_populate_recordset(NULL::{table}, %({source})s::json) {source}"
    spec = ", ".join(f"{name} {kind}" for name, kind in _SOURCES[source])
    return f"json_to_recordset(%({source})s::json) {source}({spec})"


_MEMORY_SET = (
    "version=excluded.version, sha256=excluded.sha256, bytes=excluded.bytes,"
    " description=excluded.description, metadata=excluded.metadata,"
    " updated_at=excluded.updated_at, listing=excluded.listing"
)
_SEARCH_COLUMNS = _columns("docs").removesuffix(", w_path, w_description, w_body")
_SAME = "t.agent_id={0}.agent_id AND t.path={0}.path"
# Named parameters: one JSON text per source (``RowBatch.take``).
WRITE = (
    f"WITH a AS (UPDATE agents t SET revision=GREATEST(t.revision, g.revision),"
    " last_ts=GREATEST(t.last_ts, g.ts), name=COALESCE(g.name, t.name),"
    " memory_count=t.memory_count-COALESCE(o.n, 0)+g.n,"
    f" memory_bytes=t.memory_bytes-COALESCE(o.b, 0)+g.b FROM {_rows('g')}"
    " LEFT JOIN (SELECT m.agent_id, COUNT(*) AS n, SUM(m.bytes) AS b"
    f" FROM {_rows('touched')} JOIN memories m ON m.agent_id=touched.agent_id"
    " AND m.path=touched.path GROUP BY m.agent_id) o"
    " ON o.agent_id=g.agent_id WHERE t.agent_id=g.agent_id),"
    f" c AS (INSERT INTO commits SELECT * FROM {_rows('commits')}),"
    " vc AS (UPDATE versions t SET valid_to=closes.valid_to, visible_to=closes.visible_to"
    f" FROM {_rows('closes')} WHERE {_SAME.format('closes')} AND t.version=closes.version),"
    f" vi AS (INSERT INTO versions SELECT * FROM {_rows('versions')}),"
    f" gone AS (SELECT * FROM {_rows('gone')}),"
    f" md AS (DELETE FROM memories t USING gone WHERE {_SAME.format('gone')}),"
    f" mu AS (INSERT INTO memories SELECT * FROM {_rows('memories')}"
    f" ON CONFLICT(agent_id, path) DO UPDATE SET {_MEMORY_SET}),"
    f" mf AS (INSERT INTO memories SELECT * FROM {_rows('fresh')}"
    f" ON CONFLICT(agent_id, path) DO UPDATE SET {_MEMORY_SET}, created_at=excluded.created_at),"
    f" k AS (SELECT * FROM {_rows('keys')}),"
    f" kd AS (DELETE FROM memory_meta t USING {_rows('replaced')}"
    f" WHERE {_SAME.format('replaced')} AND NOT EXISTS(SELECT 1 FROM k"
    " WHERE k.agent_id=t.agent_id AND k.path=t.path AND k.key=t.key)),"
    " ki AS (INSERT INTO memory_meta SELECT * FROM k"
    " ON CONFLICT(agent_id, path, key) DO UPDATE SET value=excluded.value),"
    " bl AS (INSERT INTO blobs SELECT agent_id, sha256, decode(content, 'hex')"
    f" FROM {_rows('blobs')} ON CONFLICT DO NOTHING),"
    f" sd AS (DELETE FROM search_docs t USING gone WHERE {_SAME.format('gone')}),"
    f" su AS (INSERT INTO search_docs({_SEARCH_COLUMNS}, doc) SELECT {_SEARCH_COLUMNS},"
    f" {search.doc_of('w_path', 'w_description', 'w_body')} FROM {_rows('docs')}"
    f" ON CONFLICT(agent_id, path) DO UPDATE SET {search.UPSERT_SET}),"
    f" l AS (INSERT INTO links SELECT * FROM {_rows('links')}"
    " ON CONFLICT(agent_id, path, version, idx) DO UPDATE SET target=excluded.target,"
    " visible_from=excluded.visible_from) SELECT 1"
)
# Sent once per transaction before its first ``WRITE``. The planner takes every row
# source of ``WRITE`` for 100 rows (a set-returning function's default estimate), and
# with that many it joins a table of a few thousand rows by a hash of a whole scan of
# it, where a batch names a handful of keys: measured, the statement then cost more than
# the twelve statements per commit it replaced, and it grows with the table until the
# planner turns to the primary keys (about 100k rows). Without hash and merge joins,
# each key is looked up by its primary key. For the rest of the transaction only (the
# clock step, COMMIT, a read by key).
KEYED_JOINS = (
    "SELECT set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)"
)
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _json(source: str, rows: Collection[Sequence[Any]]) -> str:
    """``rows`` as ``_rows(source)`` reads them, each text as stored (``encode_text``):
    the encoder escapes the two characters that need it (NUL, ``_MARK``) as ``\\u0000``
    and ``\\u0001``, so a text without either is the rows as they are, encoded once."""
    names = [name for name, _ in _SOURCES[source]]
    text = str(_dumps([dict(zip(names, row, strict=True)) for row in rows]))
    if "\\u0000" not in text and "\\u0001" not in text:
        return text
    return str(_dumps([dict(zip(names, map(encode_text, row), strict=True)) for row in rows]))


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

    def take(self) -> dict[str, str]:
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
        rows = [s.row for s in self.paths.values() if s.row is not None and not s.deleted]
        fresh = [s.row for s in self.paths.values() if s.row is not None and s.deleted]
        keys = [(*key, k, v) for key, s in self.paths.items() for k, v in s.keys.items()]
        replaced = [key for key, s in self.paths.items() if s.replaced]
        blobs = [(*key, content.hex()) for key, content in self.blobs.items()]
        docs = [s.doc for s in self.paths.values() if s.doc is not None]
        sources: dict[str, Collection[Sequence[Any]]] = {
            "touched": touched,
            "g": agents,
            "commits": self.commits,
            "closes": closes,
            "versions": list(self.versions.values()),
            "gone": gone,
            "memories": rows,
            "fresh": fresh,
            "keys": keys,
            "replaced": replaced,
            "blobs": blobs,
            "docs": docs,
            "links": self.links,
        }
        params = {source: _json(source, rows) for source, rows in sources.items()}
        self.clear()
        return params
