"""One commit's rows in ONE statement: the PostgreSQL write session's fast path.

``PgWrite._apply_changes`` writes a commit's rows as about ten statements (the commit,
the agent's counts out and in, the versions closed and opened, the memory, its
metadata, the cached content, the full-text row, the links). Each costs this client
and the server about as much again, held in a pipeline or not (docs/benchmarks.md), so
``apply_commit`` sends them as data-modifying CTEs of one statement instead, with a
fixed text (the rows go as arrays, ``unnest``-ed), so it is prepared once per
connection like any other.

All the CTEs of a statement see one snapshot and must not touch a row twice, so the
statement is used only for a commit that names each path once and has every content
it stores at hand (a rename's content comes from the blobs table: a read first);
``rows`` answers None for any other, which takes the statement-per-row way. What the
two ways write is the same, row for row (``tests/test_index_apply_pg.py``):

- every CTE after the commit's insert runs only if that insert happened (``EXISTS``
  on its RETURNING): a commit already there writes nothing, and the answer says so;
- the agent's count and bytes: its touched paths' old rows (read in the snapshot,
  before the upsert) out and the new live rows in, in one UPDATE of the agent's row;
- a path's metadata rows: those of keys the new version lacks are deleted, the others
  upserted (rather than all deleted and inserted again: the same rows at the end).
"""

from __future__ import annotations

from typing import Any

from memfs.derived.index.links import link_rows
from memfs.derived.index.postgres import search
from memfs.derived.index.rows import listing_text, live_delta, metadata_json
from memfs.domain.commits import Commit
from memfs.domain.content import metadata_text

_ON = "EXISTS(SELECT 1 FROM c)"
_A = "%(agent)s"

SQL = (
    "WITH c AS (INSERT INTO commits(agent_id, revision, ts, visible_at, actor, message,"
    " change_count, head_changes, changes) VALUES(%(agent)s, %(revision)s, %(ts)s,"
    " %(visible)s, %(actor)s, %(message)s, %(change_count)s, %(head_changes)s,"
    " %(changes)s) ON CONFLICT DO NOTHING RETURNING 1),"
    # The touched paths' rows before this commit: the snapshot's.
    " old AS (SELECT COUNT(*) AS n, COALESCE(SUM(bytes), 0) AS b FROM memories"
    f" WHERE agent_id={_A} AND path=ANY(%(touched)s::text[])),"
    " ag AS (UPDATE agents SET revision=GREATEST(revision, %(revision)s),"
    " last_ts=GREATEST(last_ts, %(ts)s), name=COALESCE(%(name)s::text, name),"
    " memory_count=memory_count - old.n + %(live_count)s,"
    " memory_bytes=memory_bytes - old.b + %(live_bytes)s"
    f" FROM old WHERE agent_id={_A} AND {_ON}),"
    " vc AS (UPDATE versions t SET valid_to=%(ts)s, visible_to=%(visible)s"
    " FROM unnest(%(closed_paths)s::text[], %(closed_versions)s::int8[]) s(path, version)"
    f" WHERE {_ON} AND t.agent_id={_A} AND t.path=s.path AND t.version=s.version),"
    " vi AS (INSERT INTO versions SELECT %(agent)s, s.path, s.version, %(revision)s,"
    " s.operation, s.sha256, s.bytes, s.description, s.metadata, %(ts)s, NULL,"
    " %(visible)s, NULL FROM unnest(%(v_paths)s::text[], %(v_versions)s::int8[],"
    " %(v_operations)s::text[], %(v_shas)s::text[], %(v_bytes)s::int8[],"
    " %(v_descriptions)s::text[], %(v_metadata)s::text[])"
    f" s(path, version, operation, sha256, bytes, description, metadata) WHERE {_ON}),"
    " mmd AS (DELETE FROM memory_meta t"
    f" WHERE {_ON} AND t.agent_id={_A} AND t.path=ANY(%(meta_cleared)s::text[])"
    " AND NOT EXISTS(SELECT 1 FROM unnest(%(meta_paths)s::text[], %(meta_keys)s::text[])"
    " n(path, key) WHERE n.path=t.path AND n.key=t.key)),"
    " mmi AS (INSERT INTO memory_meta SELECT %(agent)s, n.path, n.key, n.value"
    " FROM unnest(%(meta_paths)s::text[], %(meta_keys)s::text[], %(meta_values)s::text[])"
    f" n(path, key, value) WHERE {_ON}"
    " ON CONFLICT(agent_id, path, key) DO UPDATE SET value=excluded.value),"
    " md AS (DELETE FROM memories"
    f" WHERE {_ON} AND agent_id={_A} AND path=ANY(%(gone)s::text[])),"
    " mi AS (INSERT INTO memories SELECT %(agent)s, s.path, s.version, s.sha256, s.bytes,"
    " s.description, s.metadata, %(ts)s, %(ts)s, s.listing"
    " FROM unnest(%(m_paths)s::text[], %(m_versions)s::int8[], %(m_shas)s::text[],"
    " %(m_bytes)s::int8[], %(m_descriptions)s::text[], %(m_metadata)s::text[],"
    f" %(m_listings)s::text[]) s(path, version, sha256, bytes, description, metadata,"
    f" listing) WHERE {_ON}"
    # An update keeps the memory's created_at.
    " ON CONFLICT(agent_id, path) DO UPDATE SET version=excluded.version,"
    " sha256=excluded.sha256, bytes=excluded.bytes, description=excluded.description,"
    " metadata=excluded.metadata, updated_at=excluded.updated_at, listing=excluded.listing),"
    " bi AS (INSERT INTO blobs SELECT %(agent)s, b.sha256, b.content"
    " FROM unnest(%(b_shas)s::text[], %(b_contents)s::bytea[]) b(sha256, content)"
    f" WHERE {_ON} ON CONFLICT DO NOTHING),"
    " sd AS (DELETE FROM search_docs"
    f" WHERE {_ON} AND agent_id={_A} AND path=ANY(%(gone)s::text[])),"
    " si AS (INSERT INTO search_docs(agent_id, path, sha256, description, body,"
    " path_words, folded_path_words, folded_description, folded_body, doc)"
    " SELECT %(agent)s, d.path, d.sha256, d.description, d.body, d.path_words,"
    " d.folded_path, d.folded_description, d.folded_body, "
    + search.DOC_SQL.format("d.path_words_in", "d.description_words", "d.body_words")
    + " FROM unnest(%(d_paths)s::text[], %(d_shas)s::text[], %(d_descriptions)s::text[],"
    " %(d_bodies)s::text[], %(d_path_words)s::text[], %(d_folded_paths)s::text[],"
    " %(d_folded_descriptions)s::text[], %(d_folded_bodies)s::text[],"
    " %(d_path_words_in)s::text[], %(d_description_words)s::text[],"
    " %(d_body_words)s::text[]) d(path, sha256, description, body, path_words,"
    " folded_path, folded_description, folded_body, path_words_in, description_words,"
    f" body_words) WHERE {_ON}"
    f" ON CONFLICT(agent_id, path) DO UPDATE SET {search.DOC_UPDATE}),"
    " li AS (INSERT INTO links SELECT %(agent)s, l.path, l.version, l.idx, l.target,"
    " %(visible)s FROM unnest(%(l_paths)s::text[], %(l_versions)s::int8[],"
    f" %(l_idx)s::int8[], %(l_targets)s::text[]) l(path, version, idx, target) WHERE {_ON}"
    " ON CONFLICT(agent_id, path, version, idx)"
    " DO UPDATE SET target=excluded.target, visible_from=excluded.visible_from)"
    " SELECT COUNT(*) FROM c"
)
# The array parameters of SQL, by the rows they make (each row one item of each).
_GROUPS = {
    "closed": ("closed_paths", "closed_versions"),
    "versions": (
        "v_paths",
        "v_versions",
        "v_operations",
        "v_shas",
        "v_bytes",
        "v_descriptions",
        "v_metadata",
    ),
    "cleared": ("meta_cleared",),
    "meta": ("meta_paths", "meta_keys", "meta_values"),
    "gone": ("gone",),
    "memories": (
        "m_paths",
        "m_versions",
        "m_shas",
        "m_bytes",
        "m_descriptions",
        "m_metadata",
        "m_listings",
    ),
    "blobs": ("b_shas", "b_contents"),
    "docs": (
        "d_paths",
        "d_shas",
        "d_descriptions",
        "d_bodies",
        "d_path_words",
        "d_folded_paths",
        "d_folded_descriptions",
        "d_folded_bodies",
        "d_path_words_in",
        "d_description_words",
        "d_body_words",
    ),
    "links": ("l_paths", "l_versions", "l_idx", "l_targets"),
}


def rows(
    commit: Commit,
    visible_at: int,
    contents: dict[str, bytes],
    head: tuple[int, str, str],
) -> dict[str, Any] | None:
    """The parameters of ``SQL`` for ``commit``; None when it must take the
    statement-per-row way (a path named twice, a content not at hand). ``head``: the
    commits row's change count, first changes and changes (``writes.summary``)."""
    changes = commit.changes
    if len({c.path for c in changes}) != len(changes):
        return None
    if any(c.after is not None and c.after not in contents for c in changes):
        return None
    agent = commit.agent_id
    live_count, live_bytes = live_delta(commit)
    out: dict[str, Any] = {
        "agent": agent,
        "revision": commit.revision,
        "ts": commit.ts,
        "visible": visible_at,
        "actor": commit.actor,
        "message": commit.message,
        "change_count": head[0],
        "head_changes": head[1],
        "changes": head[2],
        "name": commit.agent_name,
        "touched": sorted(c.path for c in changes),
        "live_count": live_count,
        "live_bytes": live_bytes,
    }
    columns: dict[str, list[Any]] = {name: [] for group in _GROUPS.values() for name in group}

    def add(group: str, values: tuple[Any, ...]) -> None:
        for name, value in zip(_GROUPS[group], values, strict=True):
            columns[name].append(value)

    blobs: set[str] = set()
    for change in changes:
        path = change.path
        if change.version > 1:
            add("closed", (path, change.version - 1))
        meta_json = metadata_json(change)
        add(
            "versions",
            (
                path,
                change.version,
                change.operation,
                change.after,
                change.size,
                change.description,
                meta_json,
            ),
        )
        if change.before is not None:
            add("cleared", (path,))
        if change.after is None:
            add("gone", (path,))
            continue
        listing = listing_text(
            path, change.size, change.after, change.description, change.version, commit.ts
        )
        add(
            "memories",
            (
                path,
                change.version,
                change.after,
                change.size,
                change.description,
                meta_json,
                listing,
            ),
        )
        for key, value in (change.metadata or {}).items():
            add("meta", (path, key, metadata_text(value)))
        content = contents[change.after]
        if change.after not in blobs:
            blobs.add(change.after)
            add("blobs", (change.after, content))
        add("docs", search.doc_fields(path, change.after, change.description, content))
        for _, _, version, idx, target, _ in link_rows(
            agent, path, change.version, visible_at, content
        ):
            add("links", (path, version, idx, target))
    out.update(columns)
    return out
