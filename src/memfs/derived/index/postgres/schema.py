"""The PostgreSQL index's tables and its migrations: small named steps, applied in order.

The tables are the SQLite index's (``derived/index/schema.py``), with the same schema
numbers, so ``ReadSession.schema()`` means the same on both engines. Every key column
is ``COLLATE "C"``: listings page by path in bytewise UTF-8 order, as SQLite compares
text, whatever collation the database was created with (a managed database's default
is usually a linguistic one, where "B" < "a" and "/" sorts after "0").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from psycopg import Connection

from memfs.derived.index.links import BACKFILL_SELECT, backfill
from memfs.derived.index.postgres import search
from memfs.derived.index.postgres.reads import decode_row
from memfs.derived.index.rows import listing_text
from memfs.derived.index.schema import BACKFILL_COUNTS, SCHEMA_VERSION
from memfs.domain.commits import LOG_HEAD

C = 'TEXT COLLATE "C"'

TABLES = (
    'CREATE TABLE IF NOT EXISTS meta(key TEXT COLLATE "C" PRIMARY KEY, value BIGINT NOT NULL)',
    f"""CREATE TABLE IF NOT EXISTS agents(
  agent_id {C} PRIMARY KEY, name TEXT NOT NULL, store_id TEXT NOT NULL,
  created_at BIGINT NOT NULL, revision BIGINT NOT NULL DEFAULT 0,
  last_ts BIGINT NOT NULL DEFAULT 0, memory_count BIGINT NOT NULL DEFAULT 0,
  memory_bytes BIGINT NOT NULL DEFAULT 0)""",
    f"""CREATE TABLE IF NOT EXISTS commits(
  agent_id {C} NOT NULL, revision BIGINT NOT NULL, ts BIGINT NOT NULL,
  visible_at BIGINT NOT NULL, actor TEXT NOT NULL, message TEXT NOT NULL,
  changes TEXT NOT NULL, change_count BIGINT NOT NULL DEFAULT 0,
  head_changes TEXT NOT NULL DEFAULT '[]', PRIMARY KEY(agent_id, revision))""",
    "CREATE INDEX IF NOT EXISTS commits_by_visibility ON commits(visible_at, agent_id, revision)",
    "CREATE INDEX IF NOT EXISTS commits_by_agent_visibility"
    " ON commits(agent_id, visible_at, revision)",
    f"""CREATE TABLE IF NOT EXISTS versions(
  agent_id {C} NOT NULL, path {C} NOT NULL, version BIGINT NOT NULL,
  revision BIGINT NOT NULL, operation TEXT NOT NULL, sha256 TEXT, bytes BIGINT NOT NULL,
  description TEXT, metadata TEXT NOT NULL, valid_from BIGINT NOT NULL, valid_to BIGINT,
  visible_from BIGINT NOT NULL, visible_to BIGINT,
  PRIMARY KEY(agent_id, path, version))""",
    "CREATE INDEX IF NOT EXISTS versions_by_content ON versions(agent_id, sha256)",
    f"""CREATE TABLE IF NOT EXISTS memories(
  agent_id {C} NOT NULL, path {C} NOT NULL, version BIGINT NOT NULL,
  sha256 TEXT NOT NULL, bytes BIGINT NOT NULL, description TEXT, metadata TEXT NOT NULL,
  created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL, listing TEXT NOT NULL,
  PRIMARY KEY(agent_id, path))""",
    f"""CREATE TABLE IF NOT EXISTS memory_meta(
  agent_id {C} NOT NULL, path {C} NOT NULL, key {C} NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY(agent_id, path, key))""",
    f"""CREATE TABLE IF NOT EXISTS runs(
  agent_id {C} NOT NULL, run_id {C} NOT NULL, trigger_id TEXT NOT NULL,
  webhook_id TEXT NOT NULL, status TEXT NOT NULL, attempt BIGINT NOT NULL,
  max_attempts BIGINT NOT NULL, next_retry_at BIGINT, created_at BIGINT NOT NULL,
  started_at BIGINT, finished_at BIGINT, exit_code BIGINT, output TEXT, error TEXT,
  events BIGINT NOT NULL, delivery_key TEXT, PRIMARY KEY(agent_id, run_id))""",
    "CREATE INDEX IF NOT EXISTS runs_by_status ON runs(status, next_retry_at)",
    "CREATE INDEX IF NOT EXISTS runs_by_status_age ON runs(status, created_at)",
    "CREATE INDEX IF NOT EXISTS runs_by_creation ON runs(agent_id, created_at, run_id)",
    f"""CREATE TABLE IF NOT EXISTS run_steps(
  agent_id {C} NOT NULL, run_id {C} NOT NULL, seq BIGINT NOT NULL, at BIGINT NOT NULL,
  visible_at BIGINT NOT NULL, type TEXT NOT NULL, attempt BIGINT NOT NULL,
  detail TEXT NOT NULL, PRIMARY KEY(agent_id, run_id, seq))""",
    "CREATE INDEX IF NOT EXISTS run_steps_by_visibility"
    " ON run_steps(visible_at, agent_id, run_id, seq)",
    "CREATE INDEX IF NOT EXISTS run_steps_by_agent_visibility"
    " ON run_steps(agent_id, visible_at, run_id, seq)",
    f"""CREATE TABLE IF NOT EXISTS blobs(
  agent_id {C} NOT NULL, sha256 {C} NOT NULL, content BYTEA NOT NULL,
  PRIMARY KEY(agent_id, sha256))""",
    f"""CREATE TABLE IF NOT EXISTS damage(
  agent_id {C} PRIMARY KEY, file TEXT NOT NULL, reason TEXT NOT NULL)""",
)

# Each stored version's links (the SQLite index's ``links.py``).
LINKS_TABLE = f"""CREATE TABLE IF NOT EXISTS links(
  agent_id {C} NOT NULL, path {C} NOT NULL, version BIGINT NOT NULL, idx BIGINT NOT NULL,
  target {C} NOT NULL, visible_from BIGINT NOT NULL,
  PRIMARY KEY(agent_id, path, version, idx))"""
ADD_LINK = (
    "INSERT INTO links VALUES(%s,%s,%s,%s,%s,%s) ON CONFLICT(agent_id, path, version, idx)"
    " DO UPDATE SET target=excluded.target, visible_from=excluded.visible_from"
)


def _add_listing_column(conn: Connection[tuple[object, ...]]) -> None:
    """Each live memory keeps its listing JSON (filled here, once)."""
    conn.execute("ALTER TABLE memories ADD COLUMN listing TEXT NOT NULL DEFAULT ''")
    rows = conn.execute(
        "SELECT agent_id, path, bytes, sha256, description, version, updated_at FROM memories"
    ).fetchall()
    updates = []
    for agent, path, size, sha, description, version, updated in rows:
        text = listing_text(
            str(path),
            int(str(size)),
            str(sha),
            description if isinstance(description, str) else None,
            int(str(version)),
            int(str(updated)),
        )
        updates.append((text, agent, path))
    with conn.cursor() as cur:
        cur.executemany("UPDATE memories SET listing=%s WHERE agent_id=%s AND path=%s", updates)


def ensure_search(conn: Connection[tuple[object, ...]]) -> None:
    """The full-text state (``search.py``): the text search configuration, the table
    and its GIN index, made when missing; a table made here is filled from the live
    memories and their cached contents (a content not cached gives a row without body,
    which fsck reports stale)."""
    found = conn.execute(
        "SELECT 1 FROM pg_ts_config WHERE cfgname=%s AND pg_ts_config_is_visible(oid)",
        (search.CONFIG,),
    ).fetchone()
    if found is None:
        for statement in search.OBJECTS:
            conn.execute(statement)
    existed = conn.execute("SELECT to_regclass('search_docs')").fetchone()
    conn.execute(search.TABLE)
    conn.execute(search.GIN)
    if existed is not None and existed[0] is not None:
        return
    rows = conn.execute(
        "SELECT m.agent_id, m.path, m.sha256, m.description, b.content FROM memories m"
        " LEFT JOIN blobs b ON b.agent_id=m.agent_id AND b.sha256=m.sha256"
    ).fetchall()
    for row in rows:
        agent_id, path, sha256, description, content = decode_row(row)
        search.index_doc(
            conn,
            str(agent_id),
            str(path),
            str(sha256),
            description if isinstance(description, str) else None,
            bytes(content) if isinstance(content, (bytes, memoryview)) else None,
        )


def _fold_accents(conn: Connection[tuple[object, ...]]) -> None:
    """Accents are folded in Python, no longer by the ``unaccent`` dictionary (which
    some builds lack): the configuration maps words to the stemmer only, each row gains
    its folded copies, and its words are made again (unaccent folded more than FTS5
    does: æ, ß, ø). The unaccent extension itself is left installed: it may predate
    memfs, and other users of the database may need it."""
    for statement in search.FOLDED_COLUMNS:
        conn.execute(statement)
    if conn.execute(search.OTHER_DICTIONARIES, (search.CONFIG,)).fetchone() is None:
        return  # made by this memfs (a step before made it): nothing to redo
    conn.execute(search.MAPPING)
    rows = conn.execute("SELECT agent_id, path, description, body FROM search_docs").fetchall()
    for row in rows:
        agent_id, path, description, body = decode_row(row)
        search.refresh_doc(conn, str(agent_id), str(path), str(description), str(body))


def _add_links(conn: Connection[tuple[object, ...]]) -> None:
    """Inspect's graph edges read each stored version's links from a table kept by
    every commit (filled here once from the versions and their cached contents)."""
    conn.execute(LINKS_TABLE)
    conn.execute("DELETE FROM links")
    select = BACKFILL_SELECT.replace("?", "%s")
    for batch in backfill(lambda seek: conn.execute(select, seek).fetchall()):
        with conn.cursor() as cur:
            cur.executemany(ADD_LINK, batch)


def _add_agent_counts(conn: Connection[tuple[object, ...]]) -> None:
    """Each agents row keeps its memories' count and total bytes (filled here, once)."""
    conn.execute(
        "ALTER TABLE agents ADD COLUMN IF NOT EXISTS memory_count BIGINT NOT NULL DEFAULT 0"
    )
    conn.execute(
        "ALTER TABLE agents ADD COLUMN IF NOT EXISTS memory_bytes BIGINT NOT NULL DEFAULT 0"
    )
    conn.execute(BACKFILL_COUNTS)


def _nothing(conn: Connection[tuple[object, ...]]) -> None:
    """A step with nothing to do on this engine (see MIGRATIONS)."""


def _add_commit_heads(conn: Connection[tuple[object, ...]]) -> None:
    """Each commits row keeps its change count and first changes (the console's log
    reads them, not every change of a bulk commit): filled here once from the changes
    each row holds. (Column order does not matter here: PostgreSQL keeps a long
    ``changes`` text out of line.)"""
    conn.execute(
        "ALTER TABLE commits ADD COLUMN IF NOT EXISTS change_count BIGINT NOT NULL DEFAULT 0"
    )
    conn.execute(
        "ALTER TABLE commits ADD COLUMN IF NOT EXISTS head_changes TEXT NOT NULL DEFAULT '[]'"
    )
    conn.execute(
        "UPDATE commits SET change_count=jsonb_array_length(changes::jsonb),"
        " head_changes='[' || (SELECT COALESCE(string_agg(e.value, ',' ORDER BY e.n), '')"
        " FROM json_array_elements_text(changes::json) WITH ORDINALITY"
        f" AS e(value, n) WHERE e.n <= {LOG_HEAD}) || ']'"
    )


@dataclass(frozen=True)
class Migration:
    """One named step: turns an index of schema ``source`` into ``source + 1``."""

    name: str
    source: int
    apply: Callable[[Connection[tuple[object, ...]]], None]


# In order, one per schema version, mirroring the SQLite index's steps; the last one
# leads to SCHEMA_VERSION. Tables added without a version bump (damage) need no step:
# every statement of TABLES is CREATE … IF NOT EXISTS and runs on every open.
MIGRATIONS = (
    Migration("listing_column", 1, _add_listing_column),
    Migration("search_index", 2, ensure_search),
    Migration("agent_counts", 3, _add_agent_counts),
    Migration("fold_accents", 4, _fold_accents),
    Migration("links_table", 5, _add_links),
    Migration("commit_heads", 6, _add_commit_heads),
    # The SQLite index's schema 8 leaves a commit's full-text rows to a later flush
    # (its search_pending table); here they stay in the commit: nothing changes, the
    # number keeps the two engines' schema numbers alike.
    Migration("search_pending", 7, _nothing),
    # The SQLite index's schema 9 makes its blobs a rowid table (a read by path's seek);
    # PostgreSQL's heap tables have no WITHOUT ROWID form: nothing changes here.
    Migration("blobs_rowid", 8, _nothing),
)
KNOWN_SCHEMAS = frozenset({m.source for m in MIGRATIONS} | {SCHEMA_VERSION})


def migrate(conn: Connection[tuple[object, ...]], found: int) -> None:
    """Apply every step from schema ``found`` on, in order, inside the caller's
    transaction: each step in a savepoint of its own, so a failing step leaves the
    database at the schema the previous step reached, and the error names the step."""
    for step in MIGRATIONS:
        if step.source < found:
            continue
        conn.execute(f'SAVEPOINT "{step.name}"')
        try:
            step.apply(conn)
            conn.execute("UPDATE meta SET value=%s WHERE key='schema'", (step.source + 1,))
        except BaseException:
            conn.execute(f'ROLLBACK TO SAVEPOINT "{step.name}"')
            conn.execute(f'RELEASE SAVEPOINT "{step.name}"')
            raise
        conn.execute(f'RELEASE SAVEPOINT "{step.name}"')


def create(conn: Connection[tuple[object, ...]]) -> None:
    """Every table and index (IF NOT EXISTS), and the schema and clock rows."""
    for statement in TABLES:
        conn.execute(statement)
    conn.execute(LINKS_TABLE)
    ensure_search(conn)
    conn.execute(
        "INSERT INTO meta VALUES('schema', %s) ON CONFLICT(key) DO NOTHING", (SCHEMA_VERSION,)
    )
    conn.execute("INSERT INTO meta VALUES('clock', 0) ON CONFLICT(key) DO NOTHING")
