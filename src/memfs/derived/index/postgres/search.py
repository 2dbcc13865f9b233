"""The PostgreSQL index's full-text search: a ``tsvector`` per live memory, and the
memory:query read (the SQLite index's FTS5 table, ``derived/index/search.py``).

``search_docs(agent_id, path, sha256, description, body, doc)`` holds, for each live
memory, the texts it was indexed from and ``doc``: the path (without /memories/) at
weight B, the description at A, the body at D. Their words are cut and their accents
folded here, in Python (``search_query.words_of`` and ``fold_accents``, as FTS5's
``unicode61 remove_diacritics 2`` does), then parsed with the ``memfs_search`` text
search configuration: English stemming only (a Snowball dictionary with no stop-word
list, so "the" or "it" are searched like any word, as FTS5's porter tokenizer does).
No extension is needed: the ``unaccent`` dictionary is missing from some builds (the
``pgserver`` wheel's) and some managed databases. A GIN index answers ``@@``. Rows are
written in the transaction of the commit that changes the memory.

Snippets are ``ts_headline`` over the folded text (so an accented word matches its
folded query word), mapped back to the original: folding is one character for one,
so the passage's place in the folded text is its place in the original. A text with
nothing to fold keeps no folded copy (``folded_*`` NULL).

The query is the parser's terms (``domain.search_query``) written as a tsquery text:
each word a quoted lexeme (quotes doubled, backslashes escaped), a phrase's words
joined by ``<->``, ``:*`` on a prefix's last word, ``!`` before an excluded term; no
user text reaches tsquery as an operator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from psycopg import Connection

from memfs.derived.index.rows import _AFTER_SLASH
from memfs.derived.index.search import (
    SNIPPET_CLOSE,
    SNIPPET_OPEN,
    SNIPPET_TOKENS,
    path_text,
)
from memfs.domain.content import body_text
from memfs.domain.search_query import SearchQuery, Term, fold_accents, words_of

Conn = Connection[Any]  # any row factory: the schema's and the sessions' connections


class Executes(Protocol):
    """Where a statement goes: a connection (a write session's rows go through
    ``doc_row`` and ``postgres/batch.py`` instead)."""

    def execute(self, query: str, params: Sequence[Any]) -> object: ...


CONFIG = "memfs_search"
# ts_rank's weights, in the order {D, C, B, A}: body 1/8, path 1/2, description 1 —
# the 1 : 4 : 8 of SQLite's bm25() column weights (body, path, description).
RANK_WEIGHTS = "{0.125, 0, 0.5, 1.0}"
# ts_rank's normalisation 1: the rank divided by 1 + log(the document's length in
# words), so a long memory does not win by length alone (as BM25's b does); ts_rank has
# no IDF (a rare word counts as much as a common one).
RANK_NORMALISATION = 1
_WORD_TOKENS = (
    "asciiword, asciihword, hword_asciipart, word, hword, hword_part,"
    " numword, numhword, hword_numpart"
)
# The words' mapping: English stemming only (accents are folded before, in Python).
MAPPING = (
    f"ALTER TEXT SEARCH CONFIGURATION {CONFIG} ALTER MAPPING FOR {_WORD_TOKENS} WITH memfs_english"
)
OBJECTS = (
    "CREATE TEXT SEARCH DICTIONARY memfs_english (TEMPLATE = snowball, LANGUAGE = english)",
    f"CREATE TEXT SEARCH CONFIGURATION {CONFIG} (COPY = simple)",
    MAPPING,
)
# Whether the configuration still maps a word through another dictionary than
# memfs_english (an index made before accents were folded in Python: unaccent first).
OTHER_DICTIONARIES = (
    "SELECT 1 FROM pg_ts_config_map m JOIN pg_ts_config c ON c.oid=m.mapcfg"
    " JOIN pg_ts_dict d ON d.oid=m.mapdict"
    " WHERE c.cfgname=%s AND pg_ts_config_is_visible(c.oid) AND d.dictname<>'memfs_english'"
    " LIMIT 1"
)

TABLE = """CREATE TABLE IF NOT EXISTS search_docs(
  agent_id TEXT COLLATE "C" NOT NULL, path TEXT COLLATE "C" NOT NULL, sha256 TEXT,
  description TEXT NOT NULL, body TEXT NOT NULL, doc TSVECTOR NOT NULL,
  path_words TEXT, folded_path_words TEXT, folded_description TEXT, folded_body TEXT,
  PRIMARY KEY(agent_id, path))"""
# The folded copies, added to a table made before them (schema 5's fold_accents step).
FOLDED_COLUMNS = tuple(
    f"ALTER TABLE search_docs ADD COLUMN IF NOT EXISTS {name} TEXT"
    for name in ("path_words", "folded_path_words", "folded_description", "folded_body")
)
GIN = "CREATE INDEX IF NOT EXISTS search_docs_words ON search_docs USING GIN(doc)"
# A tsvector holds at most 1 MiB, and its size is at most about five times the words it
# is made from (each distinct lexeme: its bytes, a 4-byte entry and 2-byte positions):
# the words indexed per field are capped so a memory of any allowed size
# (MEMFS_MEMORY_BYTES goes up to 64 MiB) is indexed, by its first 160 KiB of words.
PATH_WORD_BYTES = 4 * 1024
DESCRIPTION_WORD_BYTES = 16 * 1024
BODY_WORD_BYTES = 160 * 1024


def doc_of(path_words: str, description_words: str, body_words: str) -> str:
    """The ``doc`` tsvector of the words given (SQL expressions or placeholders)."""
    return (
        f"setweight(to_tsvector('{CONFIG}', {path_words}), 'B')"
        f" || setweight(to_tsvector('{CONFIG}', {description_words}), 'A')"
        f" || setweight(to_tsvector('{CONFIG}', {body_words}), 'D')"
    )


_DOC = doc_of("%s", "%s", "%s")
# What an upsert of a row replaces: everything but its key.
UPSERT_SET = (
    "sha256=excluded.sha256, description=excluded.description, body=excluded.body,"
    " doc=excluded.doc, path_words=excluded.path_words,"
    " folded_path_words=excluded.folded_path_words,"
    " folded_description=excluded.folded_description, folded_body=excluded.folded_body"
)
_UPSERT = (
    "INSERT INTO search_docs(agent_id, path, sha256, description, body, path_words,"
    " folded_path_words, folded_description, folded_body, doc)"
    f" VALUES(%s, %s, %s, %s, %s, %s, %s, %s, %s, {_DOC})"
    f" ON CONFLICT(agent_id, path) DO UPDATE SET {UPSERT_SET}"
)
_REFRESH = (
    "UPDATE search_docs SET path_words=%s, folded_path_words=%s, folded_description=%s,"
    " folded_body=%s,"
    f" doc={_DOC} WHERE agent_id=%s AND path=%s"
)
# One passage of at most SNIPPET_TOKENS words around the best cover (the whole text
# when shorter), as FTS5's snippet(); PostgreSQL marks no cut with an ellipsis.
_HEADLINE = (
    f'StartSel="{SNIPPET_OPEN}", StopSel="{SNIPPET_CLOSE}",'
    f" MaxWords={SNIPPET_TOKENS}, MinWords={SNIPPET_TOKENS // 2}"
)


def _clean(text: str) -> str:
    # PostgreSQL text holds no NUL; a searchable text needs none (a space separates).
    return text.replace("\x00", " ")


def index_doc(
    conn: Executes,
    agent_id: str,
    path: str,
    sha256: str | None,
    description: str | None,
    content: bytes | None,
) -> None:
    """(Re)index the live memory at ``path``; ``content`` None: not at hand (a row
    without a body and without a sha256, as the SQLite index makes)."""
    conn.execute(_UPSERT, doc_row(agent_id, path, sha256, description, content))


def doc_row(
    agent_id: str, path: str, sha256: str | None, description: str | None, content: bytes | None
) -> tuple[str | None, ...]:
    """The parameters of ``_UPSERT`` (the row's columns, then its three fields' words)
    for the live memory at ``path`` (``index_doc``)."""
    if content is None:
        sha256 = None
    body = _clean(body_text(content)) if content is not None else ""
    described = _clean(description or "")
    return (agent_id, path, sha256, described, body, *_derived(path, described, body))


def refresh_doc(conn: Conn, agent_id: str, path: str, description: str, body: str) -> None:
    """Make the row's words and folded copies again from its kept texts (a migration
    that changes how words are made)."""
    conn.execute(_REFRESH, (*_derived(path, description, body), agent_id, path))


def _derived(path: str, described: str, body: str) -> tuple[str | None, ...]:
    """The path's words (its passage: PostgreSQL's parser would read a path as one
    token, and a regular expression under the "C" collation knows no accented letter),
    the folded copies (None: nothing to fold) of those, the description and the body,
    and the words the tsvector is made of. The texts are kept as they are (for
    ts_headline's passages); the words are cut as the SQLite index cuts them
    (search_query.words_of) and their accents folded as its tokenizer folds them."""
    path_words = " ".join(words_of(path_text(path)))
    folded = (path_words, *(_folded(t) for t in (path_words, described, body)))
    words = [
        _capped(fold_accents(" ".join(words_of(text))), cap)
        for text, cap in (
            (path_text(path), PATH_WORD_BYTES),
            (described, DESCRIPTION_WORD_BYTES),
            (body, BODY_WORD_BYTES),
        )
    ]
    return (*folded, *words)


def _folded(text: str) -> str | None:
    folded = fold_accents(text)
    return None if folded == text else folded


def _capped(words: str, limit: int) -> str:
    """The first whole words of ``words`` within ``limit`` UTF-8 bytes."""
    data = words.encode()
    if len(data) <= limit:
        return words
    head = data[: limit + 1].decode("utf-8", "ignore")
    return head.rsplit(" ", 1)[0]


def _lexeme(word: str) -> str:
    # Inside a quoted tsquery lexeme a backslash escapes the next character and a
    # quote is doubled: the word is then one operand, whatever it holds.
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def _term(term: Term) -> str | None:
    # Cut as the documents were (words_of): "api.md" is the phrase api <-> md.
    words = [_lexeme(fold_accents(w)) for w in words_of(term.text)]
    if not words:
        return None
    if term.prefix:
        words[-1] += ":*"
    return "(" + " <-> ".join(words) + ")"


def tsquery_text(query: SearchQuery) -> str | None:
    """The tsquery text (for ``to_tsquery``) of a parsed query; None when no term to
    include has a word (nothing can match)."""
    wanted = [t for t in (_term(t) for t in query.include) if t is not None]
    if len(wanted) < len(query.include):
        return None  # a required term without a word: FTS5 matches nothing either
    unwanted = ["!" + t for t in (_term(t) for t in query.exclude) if t is not None]
    return " & ".join(wanted + unwanted)


def search_sql(
    query: SearchQuery,
    target: tuple[str, str],
    folder: str,
    filters: list[tuple[str, str]],
    limit: int,
    offset: int,
) -> tuple[str, list[object]]:
    """The query and its parameters giving (agent_id, path, version, sha256,
    description, updated_at, score, body headline, description headline, path
    headline) of the live memories matching,
    best first (ts_rank, then agent and path bytewise), from ``offset``; headlines
    are made for the page's rows only."""
    kind, ident = target
    where = ["d.doc @@ q.q"]
    params: list[object] = [tsquery_text(query) or ""]
    if kind == "agent":
        where.append("d.agent_id=%s")
        params.append(ident)
    else:
        where.append("(d.agent_id=%s OR (d.agent_id>%s AND d.agent_id<%s))")
        params += [ident, ident + "/", ident + _AFTER_SLASH]
    if folder != "/memories":
        where.append("d.path>%s AND d.path<%s")
        params += [folder + "/", folder + _AFTER_SLASH]
    for key, value in filters:
        where.append(
            "EXISTS(SELECT 1 FROM memory_meta m WHERE m.agent_id=d.agent_id"
            " AND m.path=d.path AND m.key=%s AND m.value=%s)"
        )
        params += [key, value]
    sql = (
        f"WITH q AS (SELECT to_tsquery('{CONFIG}', %s) AS q),"
        " ranked AS (SELECT d.agent_id, d.path,"
        f" ts_rank(%s::float4[], d.doc, q.q, {RANK_NORMALISATION}) AS score,"
        " d.description, d.body, d.path_words, d.folded_path_words, d.folded_description,"
        " d.folded_body, q.q"
        " FROM search_docs d, q"
        f" WHERE {' AND '.join(where)}"
        " ORDER BY score DESC, d.agent_id, d.path LIMIT %s OFFSET %s)"
        " SELECT r.agent_id, r.path, m.version, m.sha256, m.description, m.updated_at,"
        " r.score, hb.h, hb.o, hd.h, hd.o, hp.h, hp.o"
        " FROM ranked r JOIN memories m ON m.agent_id=r.agent_id AND m.path=r.path"
        f" CROSS JOIN LATERAL {_passage('r.body', 'r.folded_body')} hb"
        f" CROSS JOIN LATERAL {_passage('r.description', 'r.folded_description')} hd"
        f" CROSS JOIN LATERAL {_passage('r.path_words', 'r.folded_path_words')} hp"
        " ORDER BY r.score DESC, r.agent_id, r.path"
    )
    return sql, [params[0], RANK_WEIGHTS, *params[1:], limit, offset, *[_HEADLINE] * 3]


def _passage(text: str, folded: str) -> str:
    """A subquery of one row: ``h``, the headline of ``text`` (over its folded copy when
    it has one), and ``o``, when it has one, the original of the headline's passage (the
    same characters, unfolded; None when the passage was not found verbatim in the
    folded text, as when ts_headline replaced an HTML tag by a space)."""
    plain = f"replace(replace(w.h, '{SNIPPET_OPEN}', ''), '{SNIPPET_CLOSE}', '')"
    return (
        "(SELECT y.h, CASE WHEN y.at > 0 THEN substr(y.t, y.at, y.n) END AS o FROM"
        f" (SELECT w.t, w.h, strpos(w.f, {plain}) AS at, length({plain}) AS n FROM"
        f" (SELECT x.t, x.f, ts_headline('{CONFIG}', COALESCE(x.f, x.t), r.q, %s) AS h FROM"
        f" (SELECT {text} AS t, {folded} AS f) x) w) y)"
    )


def restored(headline: object, original: object) -> str:
    """A headline made over a folded text, with the original's characters put back
    around its marks (``original``: the passage unfolded, or None: keep the headline)."""
    text = str(headline or "")
    if not isinstance(original, str):
        return text
    marks = (SNIPPET_OPEN, SNIPPET_CLOSE)
    if len(text) - sum(text.count(m) for m in marks) != len(original):
        return text
    out: list[str] = []
    chars = iter(original)
    for ch in text:
        out.append(ch if ch in marks else next(chars))
    return "".join(out)
