"""The index schema and its migrations: small named steps, applied in order."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from memfs.derived.index.links import LINKS_TABLE, fill_links
from memfs.derived.index.rows import listing_text
from memfs.derived.index.search import DOCS_TABLE, FTS_TABLE, PENDING_TABLE, index_doc
from memfs.domain.commits import LOG_HEAD

SCHEMA_VERSION = 9


# A commit's changes (its log entry's, inline contents taken out), and before them its
# change count and first changes (domain.commits.LOG_HEAD): the console's log shows only
# those, and reads them without decoding, or even reading, a bulk commit's thousands.
# The long ``changes`` text is last, so the leading columns are read from the start of
# the row, not after its overflow pages. And it is a rowid table: in a WITHOUT ROWID
# table the row is the B-tree key, and SQLite reads a whole overflowing key (hundreds
# of KiB for a bulk commit) for every comparison of a seek; a log page's seeks from the
# (agent_id, visible_at) index compared rowids instead.
_COMMITS_TABLE = """CREATE TABLE IF NOT EXISTS {name}(
  agent_id TEXT NOT NULL, revision INTEGER NOT NULL, ts INTEGER NOT NULL,
  visible_at INTEGER NOT NULL, actor TEXT NOT NULL, message TEXT NOT NULL,
  change_count INTEGER NOT NULL, head_changes TEXT NOT NULL,
  changes TEXT NOT NULL, PRIMARY KEY(agent_id, revision)
)"""


def commits_table(name: str = "commits") -> str:
    return _COMMITS_TABLE.format(name=name)


COMMITS_INDEXES = """CREATE INDEX IF NOT EXISTS commits_by_visibility ON commits(visible_at);
CREATE INDEX IF NOT EXISTS commits_by_agent_visibility ON commits(agent_id, visible_at)"""

# The index's copy of each content, by (agent, sha256). A rowid table with a unique
# index rather than WITHOUT ROWID: there the 2 KiB row is the B-tree's key, so the tree
# is deep (about four keys per interior page, each ~1 KiB) and every row spills an
# overflow page; here a read by path seeks the small keys' index, then the row by rowid
# (a whole page, no overflow). A read by path's statement: 57.3k -> 47.8k instructions
# (docs/benchmarks.md).
_BLOBS_TABLE = """CREATE TABLE IF NOT EXISTS {name}(
  agent_id TEXT NOT NULL, sha256 TEXT NOT NULL, content BLOB NOT NULL,
  UNIQUE(agent_id, sha256)
)"""
BLOBS_TABLE = _BLOBS_TABLE.format(name="blobs")

_SCHEMA = (
    f"""
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS agents(
  agent_id TEXT PRIMARY KEY, name TEXT NOT NULL, store_id TEXT NOT NULL,
  created_at INTEGER NOT NULL, revision INTEGER NOT NULL DEFAULT 0,
  last_ts INTEGER NOT NULL DEFAULT 0, memory_count INTEGER NOT NULL DEFAULT 0,
  memory_bytes INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
{commits_table()};
{COMMITS_INDEXES};
CREATE TABLE IF NOT EXISTS versions(
  agent_id TEXT NOT NULL, path TEXT NOT NULL, version INTEGER NOT NULL,
  revision INTEGER NOT NULL, operation TEXT NOT NULL, sha256 TEXT, bytes INTEGER NOT NULL,
  description TEXT, metadata TEXT NOT NULL, valid_from INTEGER NOT NULL, valid_to INTEGER,
  visible_from INTEGER NOT NULL, visible_to INTEGER,
  PRIMARY KEY(agent_id, path, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS memories(
  agent_id TEXT NOT NULL, path TEXT NOT NULL, version INTEGER NOT NULL,
  sha256 TEXT NOT NULL, bytes INTEGER NOT NULL, description TEXT, metadata TEXT NOT NULL,
  created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, listing TEXT NOT NULL,
  PRIMARY KEY(agent_id, path)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS memory_meta(
  agent_id TEXT NOT NULL, path TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY(agent_id, path, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs(
  agent_id TEXT NOT NULL, run_id TEXT NOT NULL, trigger_id TEXT NOT NULL,
  webhook_id TEXT NOT NULL, status TEXT NOT NULL, attempt INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL, next_retry_at INTEGER, created_at INTEGER NOT NULL,
  started_at INTEGER, finished_at INTEGER, exit_code INTEGER, output TEXT, error TEXT,
  events INTEGER NOT NULL, delivery_key TEXT, PRIMARY KEY(agent_id, run_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS runs_by_status ON runs(status, next_retry_at);
CREATE INDEX IF NOT EXISTS runs_by_status_age ON runs(status, created_at);
CREATE INDEX IF NOT EXISTS runs_by_creation ON runs(agent_id, created_at, run_id);
CREATE TABLE IF NOT EXISTS run_steps(
  agent_id TEXT NOT NULL, run_id TEXT NOT NULL, seq INTEGER NOT NULL, at INTEGER NOT NULL,
  visible_at INTEGER NOT NULL, type TEXT NOT NULL, attempt INTEGER NOT NULL,
  detail TEXT NOT NULL, PRIMARY KEY(agent_id, run_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS run_steps_by_visibility ON run_steps(visible_at);
CREATE INDEX IF NOT EXISTS run_steps_by_agent_visibility ON run_steps(agent_id, visible_at);
{BLOBS_TABLE};
CREATE TABLE IF NOT EXISTS damage(
  agent_id TEXT PRIMARY KEY, file TEXT NOT NULL, reason TEXT NOT NULL
) WITHOUT ROWID;
"""
    + f"{DOCS_TABLE};\n{FTS_TABLE};\n{PENDING_TABLE};\n{LINKS_TABLE};\n"
)


# Every table keyed by agent: what erasing an agent or a full reindex clears.
DERIVED_TABLES = (
    "agents",
    "commits",
    "versions",
    "memories",
    "memory_meta",
    "blobs",
    "runs",
    "run_steps",
    "damage",
    "search_docs",  # with its search_fts and search_pending rows (see search.drop_docs)
    "links",
)


def _add_listing_column(conn: sqlite3.Connection) -> None:
    """Each live memory keeps its listing JSON (filled here, once)."""
    conn.execute("ALTER TABLE memories ADD COLUMN listing TEXT NOT NULL DEFAULT ''")
    rows = conn.execute(
        "SELECT agent_id, path, bytes, sha256, description, version, updated_at FROM memories"
    ).fetchall()
    conn.executemany(
        "UPDATE memories SET listing=? WHERE agent_id=? AND path=?",
        [(listing_text(r[1], r[2], r[3], r[4], r[5], r[6]), r[0], r[1]) for r in rows],
    )


def _add_search_index(conn: sqlite3.Connection) -> None:
    """The full-text index of memory:query, filled from the live memories and the
    cached contents (a content not cached gives a row fsck reports stale)."""
    conn.execute(DOCS_TABLE)
    conn.execute(FTS_TABLE)
    rows = conn.execute(
        "SELECT m.agent_id, m.path, m.sha256, m.description, b.content FROM memories m"
        " LEFT JOIN blobs b ON b.agent_id=m.agent_id AND b.sha256=m.sha256"
    ).fetchall()
    for agent_id, path, sha256, description, content in rows:
        index_doc(conn, agent_id, path, sha256, description, content)


# The count and total bytes of an agent's live memories, kept in its agents row: every
# commit moves them in its own transaction, so a summary reads one row instead of
# scanning every memory (130 ms at 100k). Filled here once from the memories.
BACKFILL_COUNTS = (
    "UPDATE agents SET memory_count=(SELECT COUNT(*) FROM memories m"
    " WHERE m.agent_id=agents.agent_id), memory_bytes=(SELECT COALESCE(SUM(bytes), 0)"
    " FROM memories m WHERE m.agent_id=agents.agent_id)"
)


def _add_agent_counts(conn: sqlite3.Connection) -> None:
    """Each agents row keeps its memories' count and total bytes. Idempotent: an index
    whose schema number was lowered by hand may have the columns already."""
    have = {str(r[1]) for r in conn.execute("PRAGMA table_info(agents)")}
    for column in ("memory_count", "memory_bytes"):
        if column not in have:
            conn.execute(f"ALTER TABLE agents ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0")
    conn.execute(BACKFILL_COUNTS)


def _add_commit_heads(conn: sqlite3.Connection) -> None:
    """Each commits row keeps its change count and first changes before its changes
    (``commits_table``): the table is made again, a rowid table in that column order
    (added columns would sit after the long changes text, behind its overflow pages),
    filled from the changes each row holds."""
    conn.execute(commits_table("commits_heads"))
    conn.execute(
        "INSERT INTO commits_heads SELECT agent_id, revision, ts, visible_at, actor, message,"
        " json_array_length(changes), (SELECT json_group_array(value) FROM json_each(changes)"
        f" WHERE key < {LOG_HEAD}), changes FROM commits"
    )
    conn.execute("DROP TABLE commits")
    conn.execute("ALTER TABLE commits_heads RENAME TO commits")
    for statement in COMMITS_INDEXES.split(";"):
        conn.execute(statement)


def _add_search_pending(conn: sqlite3.Connection) -> None:
    """The paths whose full-text rows wait for a flush (search.py): none yet, every row
    of an older index was written by its commit."""
    conn.execute(PENDING_TABLE)


def _blobs_by_rowid(conn: sqlite3.Connection) -> None:
    """The blobs table made again as a rowid table (``BLOBS_TABLE``), in key order; the
    old table's pages are zeroed as they are freed (the connection's secure_delete)."""
    conn.execute(_BLOBS_TABLE.format(name="blobs_rowid"))
    conn.execute("INSERT INTO blobs_rowid SELECT agent_id, sha256, content FROM blobs ORDER BY 1, 2")
    conn.execute("DROP TABLE blobs")
    conn.execute("ALTER TABLE blobs_rowid RENAME TO blobs")


def _nothing(conn: sqlite3.Connection) -> None:
    """A step with nothing to do on this engine (see MIGRATIONS)."""


@dataclass(frozen=True)
class Migration:
    """One named step: turns an index of schema ``source`` into ``source + 1``."""

    name: str
    source: int
    apply: Callable[[sqlite3.Connection], None]


# In order, one per schema version; the last one leads to SCHEMA_VERSION. Tables and
# indexes added without a version bump (damage, inspect's per-agent log seeks) need no
# step: every statement of _SCHEMA is CREATE … IF NOT EXISTS and runs on every open.
MIGRATIONS = (
    Migration("listing_column", 1, _add_listing_column),
    Migration("search_index", 2, _add_search_index),
    Migration("agent_counts", 3, _add_agent_counts),
    # The PostgreSQL index's schema 5 folds accents in Python (its fold_accents step);
    # FTS5's tokenizer folds them here already: nothing changes, the number keeps the
    # two engines' schema numbers alike.
    Migration("fold_accents", 4, _nothing),
    # Inspect's graph edges read each stored version's links from a table kept by every
    # commit, not from every version's content (links.py); filled here once.
    Migration("links_table", 5, fill_links),
    # The console's log reads a commit's change count and first changes, not every
    # change of a bulk commit.
    Migration("commit_heads", 6, _add_commit_heads),
    # A commit records the paths it changes; their full-text rows are made by a flush.
    Migration("search_pending", 7, _add_search_pending),
    # A read by path seeks the content by a small key's index and then by rowid.
    Migration("blobs_rowid", 8, _blobs_by_rowid),
)
KNOWN_SCHEMAS = frozenset({m.source for m in MIGRATIONS} | {SCHEMA_VERSION})


def migrate(conn: sqlite3.Connection, found: int) -> None:
    """Apply every step from schema ``found`` on, in order, inside the caller's write
    transaction: each step in a savepoint of its own, so a failing step leaves the file
    at the schema the previous step reached, and the error names the step."""
    for step in MIGRATIONS:
        if step.source < found:
            continue
        conn.execute(f'SAVEPOINT "{step.name}"')
        try:
            step.apply(conn)
            conn.execute("UPDATE meta SET value=? WHERE key='schema'", (step.source + 1,))
        except BaseException:
            conn.execute(f'ROLLBACK TO "{step.name}"')
            conn.execute(f'RELEASE "{step.name}"')
            raise
        conn.execute(f'RELEASE "{step.name}"')
