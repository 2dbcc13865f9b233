"""The full-text index: an FTS5 table of live memories, and the memory:query read.

``search_docs(doc, agent_id, path, sha256)`` gives each live memory a stable integer
``doc``; ``search_fts`` holds, under that rowid, three columns: the path (relative to
/memories), the frontmatter description and the body (the text after the
frontmatter). The tokenizer is ``porter unicode61 remove_diacritics 2``: case- and
accent-folded words, stemmed for English. ``sha256`` is the content the row was made
from: what fsck compares with the log.

A commit does not write them: it records each path it changes in ``search_pending``
(``mark``), one small row, and ``flush`` brings the two tables to the live memories of
those paths later, many documents per transaction. An FTS5 insert in a transaction of
its own writes its content row, its size row, a new level-0 segment and the index's
structure and averages records (about ten of a create's 26 WAL pages); a flush of a
few hundred documents writes one segment for all of them. Every search flushes first
(the pending rows are in the same file, so a search in any process sees every commit
acknowledged before it), as do erasing an agent and merging the segments; an idle
flush in the background (``connection.Index``) keeps the backlog short.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from memfs.domain.content import body_text
from memfs.domain.paths import ROOT
from memfs.domain.records import SearchHit

DOCS_TABLE = """CREATE TABLE IF NOT EXISTS search_docs(
  doc INTEGER PRIMARY KEY, agent_id TEXT NOT NULL, path TEXT NOT NULL, sha256 TEXT,
  UNIQUE(agent_id, path)
)"""
FTS_TABLE = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS search_fts USING fts5("
    "path, description, body, tokenize='porter unicode61 remove_diacritics 2')"
)
# The paths whose full-text rows are behind their live memory (written by commits,
# emptied by ``flush``). Keyed by path, not by ``doc``: a commit need not touch
# ``search_docs`` (and its UNIQUE index) at all.
PENDING_TABLE = """CREATE TABLE IF NOT EXISTS search_pending(
  agent_id TEXT NOT NULL, path TEXT NOT NULL, PRIMARY KEY(agent_id, path)
) WITHOUT ROWID"""
# Documents a flush indexes per statement batch; a background flush commits after each.
FLUSH_BATCH = 500

# bm25() column weights (path, description, body): a word in the description counts
# as much as eight in the body, one in the path as four; see docs/design-notes.md.
WEIGHTS = (4.0, 8.0, 1.0)
SNIPPET_OPEN, SNIPPET_CLOSE, SNIPPET_ELLIPSIS = "«", "»", "…"
SNIPPET_TOKENS = 16
_BM25 = "bm25(search_fts, {}, {}, {})".format(*WEIGHTS)
_TIE_ROOM = 200  # rows fetched past a page, for the scores tied at its edge
_AFTER_SLASH = "0"  # the character after '/': the end of a folder's key range


def path_text(path: str) -> str:
    """The path as indexed: without the /memories/ every path starts with."""
    return path.removeprefix(ROOT + "/")


def index_doc(
    conn: sqlite3.Connection,
    agent_id: str,
    path: str,
    sha256: str | None,
    description: str | None,
    content: bytes | None,
) -> None:
    """(Re)index the live memory at ``path``; ``content`` None: not at hand (the row is
    made without a body, and with no sha256, so fsck reports it stale)."""
    if content is None:
        sha256 = None
    row = conn.execute(
        "INSERT INTO search_docs(agent_id, path, sha256) VALUES(?,?,?)"
        " ON CONFLICT(agent_id, path) DO UPDATE SET sha256=excluded.sha256 RETURNING doc",
        (agent_id, path, sha256),
    ).fetchone()
    body = body_text(content) if content is not None else ""
    conn.execute(
        "INSERT OR REPLACE INTO search_fts(rowid, path, description, body) VALUES(?,?,?,?)",
        (row[0], path_text(path), description or "", body),
    )


def mark(conn: sqlite3.Connection, agent_id: str, path: str) -> None:
    """The full-text row of ``path`` is to be brought to its live memory (a commit
    changed it): ``flush`` does it."""
    conn.execute("INSERT OR IGNORE INTO search_pending VALUES(?,?)", (agent_id, path))


def pending(conn: sqlite3.Connection) -> bool:
    """Whether some full-text rows wait for a flush (in this snapshot)."""
    return bool(conn.execute("SELECT EXISTS(SELECT 1 FROM search_pending)").fetchone()[0])


# Each pending path with its live memory (none: deleted, or renamed away), the cached
# content its full-text row is made from (none: not cached, the row is made without a
# body and with no sha256, so fsck reports it stale, as a commit made it before) and
# its ``doc`` if it has one.
_PENDING_ROWS = (
    "SELECT p.agent_id, p.path, m.sha256, m.description, b.content, d.doc"
    " FROM search_pending p"
    " LEFT JOIN memories m ON m.agent_id=p.agent_id AND m.path=p.path"
    " LEFT JOIN blobs b ON b.agent_id=m.agent_id AND b.sha256=m.sha256"
    " LEFT JOIN search_docs d ON d.agent_id=p.agent_id AND d.path=p.path LIMIT ?"
)
# The next free ``doc``: past every search_docs row and every full-text row (a row left
# by hand must not collide with a new one).
_TOP_DOC = (
    "SELECT MAX(COALESCE((SELECT MAX(doc) FROM search_docs), 0),"
    " COALESCE((SELECT rowid FROM search_fts ORDER BY rowid DESC LIMIT 1), 0))"
)


def flush(conn: sqlite3.Connection, *, batches: int | None = None) -> int:
    """Bring every pending path's full-text row to its live memory, in the caller's
    write transaction (``batches``: at most that many batches of ``FLUSH_BATCH``);
    the number of paths done. A batch is a few statements, whatever its size: the old
    rows out (FTS5 reads each one's text back to remove its words), then the new ones
    in as one ``executemany``, which FTS5 keeps in memory and writes as one segment.
    A document keeps its ``doc`` across updates; a new one gets the next free number."""
    done = 0
    while batches is None or batches > 0:
        rows = conn.execute(_PENDING_ROWS, (FLUSH_BATCH,)).fetchall()
        if not rows:
            break
        old = [r[5] for r in rows if r[5] is not None]
        if old:
            marks = ",".join("?" * len(old))
            conn.execute(f"DELETE FROM search_fts WHERE rowid IN ({marks})", old)
            conn.executemany(
                "DELETE FROM search_docs WHERE doc=?",
                [(r[5],) for r in rows if r[2] is None and r[5] is not None],
            )
        (top,) = conn.execute(_TOP_DOC).fetchone()
        docs: list[tuple[int, str, str, str | None]] = []
        texts: list[tuple[int, str, str, str]] = []
        for agent_id, path, sha256, description, content, doc in rows:
            if sha256 is None:
                continue  # not live: its rows are gone
            if doc is None:
                top += 1
                doc = top
            data = bytes(content) if content is not None else None
            docs.append((doc, agent_id, path, sha256 if data is not None else None))
            body = body_text(data) if data is not None else ""
            texts.append((doc, path_text(path), description or "", body))
        conn.executemany(
            "INSERT INTO search_docs(doc, agent_id, path, sha256) VALUES(?,?,?,?)"
            " ON CONFLICT(doc) DO UPDATE SET sha256=excluded.sha256",
            docs,
        )
        conn.executemany(
            "INSERT INTO search_fts(rowid, path, description, body) VALUES(?,?,?,?)", texts
        )
        conn.executemany(
            "DELETE FROM search_pending WHERE agent_id=? AND path=?", [r[:2] for r in rows]
        )
        done += len(rows)
        if len(rows) < FLUSH_BATCH:
            break
        if batches is not None:
            batches -= 1
    return done


def index_docs(
    conn: sqlite3.Connection,
    agent_id: str,
    docs: Iterable[tuple[str, str, str | None, bytes | None]],
) -> None:
    """Index many memories of an agent that has none indexed: (path, sha256,
    description, content) each (reindex's bulk load). Two batched statements instead
    of two per memory: the rows get the ``doc`` numbers one-by-one inserts would (an
    INTEGER PRIMARY KEY without AUTOINCREMENT takes the largest + 1), so the rows are
    the same as ``index_doc`` of each in turn."""
    rows = list(docs)
    if not rows:
        return
    (top,) = conn.execute("SELECT COALESCE(MAX(doc), 0) FROM search_docs").fetchone()
    conn.executemany(
        "INSERT INTO search_docs(doc, agent_id, path, sha256) VALUES(?,?,?,?)",
        [
            (top + n, agent_id, path, sha256 if content is not None else None)
            for n, (path, sha256, _description, content) in enumerate(rows, 1)
        ],
    )
    conn.executemany(
        "INSERT OR REPLACE INTO search_fts(rowid, path, description, body) VALUES(?,?,?,?)",
        [
            (
                top + n,
                path_text(path),
                description or "",
                body_text(content) if content is not None else "",
            )
            for n, (path, _sha256, description, content) in enumerate(rows, 1)
        ],
    )


def drop_docs(conn: sqlite3.Connection, agent_id: str | None) -> None:
    """Forget every indexed memory of an agent (None: of every agent), and its pending
    paths: each full-text row is under a ``search_docs`` row until a flush removes both,
    so no row of the agent is left behind."""
    if agent_id is None:
        conn.execute("DELETE FROM search_fts")
        conn.execute("DELETE FROM search_docs")
        conn.execute("DELETE FROM search_pending")
        return
    conn.execute(
        "DELETE FROM search_fts WHERE rowid IN (SELECT doc FROM search_docs WHERE agent_id=?)",
        (agent_id,),
    )
    conn.execute("DELETE FROM search_docs WHERE agent_id=?", (agent_id,))
    conn.execute("DELETE FROM search_pending WHERE agent_id=?", (agent_id,))


def purge(conn: sqlite3.Connection) -> None:
    """Merge the full-text index into one segment: FTS5 deletes only mark words deleted
    in old segments; merging drops them, and secure_delete zeroes the freed pages, so an
    erased agent's words leave the file (SQLite 3.40 has no FTS5 secure-delete). The
    pending paths are flushed first: a memory deleted before the erase still has its
    row until then."""
    flush(conn)
    conn.execute("INSERT INTO search_fts(search_fts) VALUES('optimize')")


def search(
    conn: sqlite3.Connection,
    match: str,
    target: tuple[str, str],
    folder: str,
    filters: Sequence[tuple[str, str]],
    limit: int,
    offset: int,
) -> list[SearchHit]:
    """Live memories matching the FTS5 expression ``match``, best first, from
    ``offset``. ``target`` is ("agent", id) or ("scope", id): the agent, or it and every
    agent below it, ranked in one list. ``folder`` limits to paths below it;
    ``filters`` are (key, value) metadata equalities, all required."""
    kind, ident = target
    where = ["search_fts MATCH ?"]
    params: list[object] = [match]
    if kind == "agent":
        where.append("d.agent_id=?")
        params.append(ident)
    else:
        where.append("(d.agent_id=? OR (d.agent_id>? AND d.agent_id<?))")
        params += [ident, ident + "/", ident + _AFTER_SLASH]
    if folder != ROOT:
        where.append("d.path>? AND d.path<?")
        params += [folder + "/", folder + _AFTER_SLASH]
    for key, value in filters:
        where.append(
            "EXISTS(SELECT 1 FROM memory_meta m WHERE m.agent_id=d.agent_id"
            " AND m.path=d.path AND m.key=? AND m.value=?)"
        )
        params += [key, value]
    ranked = _ranked_fast(conn, match, where[1:], params[1:], limit, offset)
    if ranked is None:
        # Ranked first, passages after: snippet() costs a pass over a document's text,
        # so it runs for the page's rows only, not for every match the ranking sorts.
        ranked = conn.execute(
            # One bm25() per match, named once: ``-bm25`` in the select list and
            # ``bm25`` in ORDER BY would be two expressions, each computed per match.
            f"SELECT search_fts.rowid, d.agent_id, d.path, {_BM25} AS bm FROM search_fts"
            " JOIN search_docs d ON d.doc=search_fts.rowid"
            f" WHERE {' AND '.join(where)}"
            " ORDER BY bm, d.agent_id, d.path LIMIT ? OFFSET ?",
            (*params, limit, offset),
        ).fetchall()
    if not ranked:
        return []
    docs = [r[0] for r in ranked]
    marks = ",".join("?" * len(docs))
    snip = "snippet(search_fts, {}, ?, ?, ?, ?)"
    cut = (SNIPPET_OPEN, SNIPPET_CLOSE, SNIPPET_ELLIPSIS, SNIPPET_TOKENS)
    snippets = {
        doc: passage(columns)
        for doc, *columns in conn.execute(
            f"SELECT rowid, {snip.format(2)}, {snip.format(1)}, {snip.format(0)}"
            f" FROM search_fts WHERE search_fts MATCH ? AND rowid IN ({marks})",
            (*cut, *cut, *cut, match, *docs),
        )
    }
    hits: list[SearchHit] = []
    for doc, agent_id, path, bm in ranked:
        row = conn.execute(
            "SELECT version, sha256, description, updated_at FROM memories"
            " WHERE agent_id=? AND path=?",
            (agent_id, path),
        ).fetchone()
        if row is None:  # not live (a stale row fsck reports): never shown
            continue
        hits.append(
            SearchHit(
                agent_id=agent_id,
                path=path,
                version=row[0],
                sha256=row[1],
                description=row[2],
                updated_at=row[3],
                score=-float(bm),  # bm25() is lower for a better match
                snippet=snippets.get(doc, ""),
            )
        )
    return hits


def _ranked_fast(
    conn: sqlite3.Connection,
    match: str,
    where: Sequence[str],
    params: Sequence[object],
    limit: int,
    offset: int,
) -> list[tuple[int, str, str, float]] | None:
    """The page ranked from the full-text table alone, joined after the LIMIT; None
    when that cannot be proven to equal the joined query (the caller runs it then).

    SQLite 3.40's FTS5 computes bm25() for every match before any LIMIT, and joining
    ``search_docs`` to every match (for the agent, folder and metadata filters and
    the agent/path tie-break) cost about as much again (docs/benchmarks.md, Search).
    The best ``offset + limit + _TIE_ROOM`` rows by score alone are fetched, then
    joined and filtered; the ``offset + limit`` best of those that pass make the page
    when some fetched row scores strictly worse than the last of them (or every match
    was fetched): no row left out can then pass ahead of or tie with a row kept. The
    room covers ties (short notes that hold a word once score alike) and other
    agents' rows in the same pass: FTS5's cost is one bm25() per match whatever the
    LIMIT, and a second pass (or the joined query after this one) pays it again."""
    want = offset + limit
    fetched = conn.execute(
        f"SELECT rowid, {_BM25} AS bm FROM search_fts WHERE search_fts MATCH ? ORDER BY bm LIMIT ?",
        (match, want + _TIE_ROOM),
    ).fetchall()
    if not fetched:
        return []
    marks = ",".join("?" * len(fetched))
    cond = "".join(f" AND {w}" for w in where)
    passing = {
        doc: (agent_id, path)
        for doc, agent_id, path in conn.execute(
            f"SELECT d.doc, d.agent_id, d.path FROM search_docs d NOT INDEXED WHERE d.doc IN ({marks}){cond}",
            (*(doc for doc, _ in fetched), *params),
        )
    }
    kept = [(doc, *passing[doc], float(bm)) for doc, bm in fetched if doc in passing]
    every_match = len(fetched) < want + _TIE_ROOM
    if len(kept) >= want:
        edge = kept[want - 1][3]
        if not every_match and not edge < fetched[-1][1]:
            return None  # rows tied at the page's edge may lie past those fetched
        kept = [row for row in kept if row[3] <= edge]
    elif not every_match:
        return None  # too few of the best rows pass the filters
    kept.sort(key=lambda r: (r[3], r[1], r[2]))
    return kept[offset:want]


def passage(columns: Sequence[object]) -> str:
    """The first of body, description, path with a marked term (a match may lie in
    any; a passage of the body says most), on one line."""
    texts = [str(c or "") for c in columns]
    best = next((t for t in texts if SNIPPET_OPEN in t), texts[0])
    return " ".join(best.split())


def search_rows(conn: sqlite3.Connection, agent_id: str) -> dict[str, str | None]:
    """path → the sha256 its full-text row was made from (None: made without its
    content), for the agent's rows that have their FTS5 row: what fsck checks. A
    pending path counts as the row the next flush makes of it (read in this snapshot,
    not flushed: fsck's other reads share it)."""
    rows = conn.execute(
        "SELECT d.path, d.sha256 FROM search_docs d WHERE d.agent_id=?"
        " AND EXISTS(SELECT 1 FROM search_fts f WHERE f.rowid=d.doc)"
        " AND NOT EXISTS(SELECT 1 FROM search_pending p WHERE p.agent_id=d.agent_id"
        " AND p.path=d.path)"
        " UNION ALL SELECT p.path, CASE WHEN b.sha256 IS NULL THEN NULL ELSE m.sha256 END"
        " FROM search_pending p JOIN memories m ON m.agent_id=p.agent_id AND m.path=p.path"
        " LEFT JOIN blobs b ON b.agent_id=m.agent_id AND b.sha256=m.sha256"
        " WHERE p.agent_id=?",
        (agent_id, agent_id),
    )
    return {str(path): sha for path, sha in rows}
