"""The derived SQLite index: every query memfs answers, rebuilt from the log at will.

Tables (schema ``SCHEMA_VERSION``):
  agents(agent_id, name, store_id, created_at, revision, last_ts, memory_count,
         memory_bytes)           the counts kept by every commit (summaries read them)
  commits(agent_id, revision, ts, visible_at, actor, message, change_count,
          head_changes, changes)  each commit's changes, and its count and first
                                  ones apart (the console's log reads only those)
  versions(agent_id, path, version, …, valid_from, valid_to, visible_from, visible_to)
  memories(agent_id, path, …, listing)   live memories only, keyset-listed by path;
                                          ``listing`` is the memory's listing JSON
  memory_meta(agent_id, path, key, value) scalar frontmatter, for metadata filters
  blobs(agent_id, sha256, content)       a read cache of contents
  damage(agent_id, file, reason)         agents found damaged (their routes answer 503)
  search_docs(doc, agent_id, path, sha256) + search_fts(path, description, body)
                                          the FTS5 full-text index of live memories
  search_pending(agent_id, path)          paths whose full-text rows wait for a flush
                                          (written by commits; search.flush)
  links(agent_id, path, version, idx, target, visible_from)
                                          each stored version's links (inspect's edges)
  meta(key, value)                        schema version and the visibility clock

The file is watched: a transaction that finds it deleted or replaced (another inode)
drops its connection, and ``IndexGone`` tells the store to rebuild it from the log.

``visible_at`` is when a commit became visible in this index (taken from the clock in
the transaction that applies it: its timestamp unless the clock passed it while its log
entry was made durable, later for an entry caught up after a crash); pinned reads compare
against it so that what a reader saw at a ``readTimestamp`` never changes.
Applying a commit is idempotent: a revision already present is skipped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memfs.derived.index import base
from memfs.derived.index.bulk import bulk_load
from memfs.derived.index.connection import Index, file_is_current
from memfs.derived.index.links import link_rows
from memfs.derived.index.reads import (
    PathStates,
    agent,
    agent_heads,
    agent_ids,
    agent_stats,
    agents,
    blob,
    cached_blobs,
    commit_entry,
    commit_revisions,
    commits,
    count_memories,
    damaged_agents,
    ever_written,
    first_revision_with,
    has_version_larger_than,
    is_folder,
    last_version,
    list_memories,
    list_memories_json,
    live_contents,
    live_paths,
    live_rows,
    memory,
    path_states,
    runs_by_status,
    schema,
    version,
    versions,
)
from memfs.derived.index.rows import (
    AgentRow,
    CommitRow,
    Connection,
    FolderEntry,
    IndexGone,
    ListingJson,
    MemoryRow,
    PathState,
    VersionRow,
    listing_page,
    listing_text,
)
from memfs.derived.index.runs import (
    RUN_COLUMNS,
    RUN_FIELDS,
    RunRow,
    add_run_step,
    due_run_rows,
    finished_deliveries,
    forget_delivery,
    put_run,
    run_counts,
    run_row,
    run_rows,
)
from memfs.derived.index.schema import DERIVED_TABLES, SCHEMA_VERSION
from memfs.derived.index.search import search_rows
from memfs.derived.index.sessions import SqliteRead, SqliteWrite
from memfs.derived.index.walks import live_version_at, step_rows, version_rows
from memfs.derived.index.writes import (
    apply_commit,
    clear_damage,
    clear_tables,
    clock,
    damage,
    drop_agent,
    mark_damaged,
    purge_search,
    put_agent,
    raise_clock,
    release,
    rollback_to,
    savepoint,
)

__all__ = [
    "DERIVED_TABLES",
    "RUN_COLUMNS",
    "RUN_FIELDS",
    "SCHEMA_VERSION",
    "AgentRow",
    "CommitRow",
    "Connection",
    "FolderEntry",
    "Index",
    "IndexGone",
    "ListingJson",
    "MemoryRow",
    "PathState",
    "PathStates",
    "RunRow",
    "SqliteRead",
    "SqliteWrite",
    "VersionRow",
    "add_run_step",
    "agent",
    "agent_heads",
    "agent_ids",
    "agent_stats",
    "agents",
    "apply_commit",
    "base",
    "blob",
    "bulk_load",
    "cached_blobs",
    "clear_damage",
    "clear_tables",
    "clock",
    "commit_entry",
    "commit_revisions",
    "commits",
    "count_memories",
    "damage",
    "damaged_agents",
    "drop_agent",
    "due_run_rows",
    "ever_written",
    "file_is_current",
    "finished_deliveries",
    "first_revision_with",
    "forget_delivery",
    "has_version_larger_than",
    "is_folder",
    "last_version",
    "link_rows",
    "list_memories",
    "list_memories_json",
    "listing_page",
    "listing_text",
    "live_contents",
    "live_paths",
    "live_rows",
    "live_version_at",
    "mark_damaged",
    "memory",
    "path_states",
    "purge_search",
    "put_agent",
    "put_run",
    "raise_clock",
    "release",
    "rollback_to",
    "run_counts",
    "run_row",
    "run_rows",
    "runs_by_status",
    "savepoint",
    "schema",
    "search_rows",
    "step_rows",
    "version",
    "version_rows",
    "versions",
]

if TYPE_CHECKING:  # mypy checks the SQLite index and its sessions implement the seam

    def _implements(idx: Index, r: SqliteRead, w: SqliteWrite) -> tuple[base.Index, ...]:
        read: base.ReadSession = r
        write: base.WriteSession = w
        del read, write
        return (idx,)
