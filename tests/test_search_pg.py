"""memory:query on the PostgreSQL index: the same matches as the SQLite index's FTS5
for the same queries (hostile ones included), through a real ``memfs serve --index``,
after a migration from an index made before full-text search, and after an erasure.
The quality cases (phrases, stems, prefixes, exclusions, accents, weights) run on both
engines in tests/test_search_quality.py."""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from hashlib import sha256
from pathlib import Path

import psycopg
import pytest

from engine_postgres import PostgresServer
from memfs.core import maintenance
from memfs.core.planner import Put
from memfs.core.search import search
from memfs.core.store import Store
from memfs.core.tokens import Signer
from memfs.derived.index.schema import SCHEMA_VERSION
from memfs.testing.search_quality import generated_corpus
from servers_real import RealServer
from test_index_migrations_pg import OLDER

AGENT = "users/alice/assistant"
SIGNER = Signer(b"pg-search-test-key" * 2)

CORPUS = {
    "/memories/music/rock.md": "Rock & roll | jazz: it's loud.\n",
    "/memories/music/jazz.md": "Jazz clubs close late; rock bands play early.\n",
    "/memories/docs/api.md": "See docs/api.md and https://example.com/path for the API.\n",
    "/memories/notes/quotes.md": "O'Brien said \"don't\" twice, back\\slash and all.\n",
    "/memories/notes/cafe.md": (
        "---\ndescription: Café notes\n---\nThe crème brûlée at the café is running out.\n"
    ),
    "/memories/notes/stop.md": "The it and a of words are searched too.\n",
    "/memories/notes/numbers.md": "Version v2 ships 3.14 and abc123 on 2026-12-01.\n",
}

# Plain words, stems, phrases, prefixes, exclusions, accents — and every piece of
# tsquery (and FTS5) syntax, which must be searched for as words, never obeyed.
QUERIES = [
    "rock",
    "rocks jazz",
    '"rock roll"',
    '"roll rock"',
    "jaz*",
    '"rock & roll"*',
    "rock -jazz",
    'jazz -"rock bands"',
    "cafe",
    "CRÈME brulee",
    "run",
    "the it a of",
    "api.md",
    "docs/api.md",
    "example.com",
    "rock & roll",
    "rock | jazz",
    "!jazz",
    "jazz:*",
    "rock <-> roll",
    "rock:A",
    "'rock'",
    "o'brien",
    "don't",
    "back\\slash",
    "rock\\",
    "(rock | jazz) & !roll",
    "rock' | 'jazz",
    '"it\'s loud"',
    "v2 abc123",
    "3.14",
    "2026-12-01",
    "NEAR(rock jazz)",
    "rock OR jazz",
    "ab* -abc*",
]


def _open(data: Path, location: str | None) -> Store:
    store = Store(data, index_location=location)
    store.create_agent(AGENT)
    store.apply(AGENT, [Put(p, t.encode()) for p, t in CORPUS.items()], actor="t")
    return store


@pytest.fixture(scope="module")
def stores(
    postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Store, Store]]:
    """The corpus twice: SQLite's FTS5 index and PostgreSQL's full-text search."""
    sqlite = _open(tmp_path_factory.mktemp("lite") / "data", None)
    pg = _open(tmp_path_factory.mktemp("pg") / "data", postgres_server.new_database())
    try:
        yield sqlite, pg
    finally:
        sqlite.close()
        pg.close()


def found(store: Store, query: str) -> list[str]:
    page = search(store, SIGNER, agent_id=AGENT, query=query, limit=50)
    return [h.path for h in page.results]


@pytest.mark.parametrize("query", QUERIES)
def test_postgresql_matches_what_sqlite_matches(stores: tuple[Store, Store], query: str) -> None:
    sqlite, pg = stores
    assert sorted(found(pg, query)) == sorted(found(sqlite, query))


def test_the_corpus_queries_find_what_they_name_on_postgresql(stores: tuple[Store, Store]) -> None:
    _, pg = stores
    assert found(pg, '"rock roll"') == ["/memories/music/rock.md"]
    assert found(pg, "rock -jazz") == []
    assert found(pg, "CRÈME brulee") == ["/memories/notes/cafe.md"]
    assert found(pg, "the it a of") == ["/memories/notes/stop.md"]  # no stop words dropped
    assert found(pg, "api.md") == ["/memories/docs/api.md"]
    assert found(pg, "o'brien") == ["/memories/notes/quotes.md"]
    assert found(pg, "!jazz") == found(pg, "jazz") != []  # "!" is no negation
    assert found(pg, "(rock | jazz) & !roll") == ["/memories/music/rock.md"]  # all words
    # The description weighs more than the body: "café" is in both documents' text
    # only once, but in the description of one.
    assert found(pg, "cafe")[0] == "/memories/notes/cafe.md"


def test_a_snippet_marks_the_matched_words_on_postgresql(stores: tuple[Store, Store]) -> None:
    _, pg = stores
    (hit,) = search(pg, SIGNER, agent_id=AGENT, query="brulee").results
    assert "«brûlée»" in hit.snippet and "\n" not in hit.snippet
    assert hit.description == "Café notes" and hit.score > 0
    # Accents are folded for matching only: the passage is the original text.
    (hit,) = search(pg, SIGNER, agent_id=AGENT, query="creme BRULEE").results
    assert hit.snippet.endswith("«crème» «brûlée» at the café is running out.")
    (hit,) = search(pg, SIGNER, agent_id=AGENT, query="CAFÉ notes").results
    assert hit.snippet == "The crème brûlée at the «café» is running"


def test_a_snippet_keeps_the_original_accents_of_a_path_and_around_html(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    store = Store(tmp_path / "data", index_location=postgres_server.new_database())
    try:
        store.create_agent(AGENT)
        files = {
            "/memories/cv/résumé.md": "Nothing to see.\n",
            "/memories/t.md": "Über <b>naïve</b> Zoë.\n",
        }
        store.apply(AGENT, [Put(p, t.encode()) for p, t in files.items()], actor="t")
        (hit,) = search(store, SIGNER, agent_id=AGENT, query="resume").results
        assert hit.snippet == "cv «résumé» md"
        (hit,) = search(store, SIGNER, agent_id=AGENT, query="zoe uber").results
        # ts_headline replaced the tag by a space: the passage is no copy of the
        # original any more, and the folded passage is shown, still marked.
        assert "«" in hit.snippet and "Zo" in hit.snippet
    finally:
        store.close()


def test_a_real_server_on_postgresql_answers_memory_query(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """``memfs serve`` with MEMFS_INDEX: a write is searchable at once, a rename moves
    its hit, a hostile query is a 200, a malformed one a 400."""
    url = postgres_server.new_database()
    agent = "/v1/agents/demo"
    with (
        RealServer(tmp_path / "data", env={"MEMFS_INDEX": url}) as server,
        server.client() as client,
    ):
        assert client.put(agent, json={"name": "demo"}).status_code == 201
        text = b"---\ndescription: Deploy checklist\n---\nRun the migrations first.\n"
        md = {"Content-Type": "text/markdown"}
        for path, body in (("ops/deploy.md", text), ("ops/other.md", b"a deploy log\n")):
            put = client.put(f"{agent}/memories/{path}", content=body, headers=md)
            assert put.status_code == 201, put.text

        def paths(query: str) -> list[str]:
            page = client.post(f"{agent}/memory:query", json={"query": query})
            assert page.status_code == 200, page.text
            return [r["path"] for r in page.json()["results"]]

        assert paths("deploy") == ["/memories/ops/deploy.md", "/memories/ops/other.md"]
        page = client.post(f"{agent}/memory:query", json={"query": "migration"}).json()
        assert page["results"][0]["snippet"] == "Run the «migrations» first."
        rename = {
            "command": "rename",
            "old_path": "/memories/ops/deploy.md",
            "new_path": "/memories/ops/moved.md",
        }
        assert client.post(f"{agent}/memory:command", json=rename).json()["ok"]
        assert paths("migrations") == ["/memories/ops/moved.md"]
        assert paths("deploy:* & !checklist") == ["/memories/ops/moved.md"]  # words only
        bad = client.post(f"{agent}/memory:query", json={"query": '"unbalanced'})
        assert bad.status_code == 400 and bad.json()["details"]["field"] == "query"


def every_match(store: Store, query: str) -> list[str]:
    """Every memory a query finds, page after page, in path order."""
    paths: list[str] = []
    token = None
    while True:
        page = search(store, SIGNER, agent_id=AGENT, query=query, limit=50, page_token=token)
        paths += [h.path for h in page.results]
        if not page.next_page_token:
            return sorted(paths)
        token = page.next_page_token


def _search_docs(url: str, agent_id: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM search_docs WHERE agent_id=%s", (agent_id,)
        ).fetchone()
        assert row is not None
        return int(row[0])


def test_an_index_made_before_full_text_search_is_migrated_and_filled(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    url = postgres_server.new_database()
    store = _open(tmp_path / "data", url)
    store.close()
    with psycopg.connect(url) as conn:  # back to schema 2: no full-text state at all
        conn.execute("DROP TABLE search_docs")
        conn.execute("DROP TEXT SEARCH CONFIGURATION memfs_search")
        conn.execute("DROP TEXT SEARCH DICTIONARY memfs_english")
        conn.execute("UPDATE meta SET value=2 WHERE key='schema'")
    store = Store(tmp_path / "data", index_location=url)
    try:
        with store.index.read_session() as s:
            assert s.schema() == SCHEMA_VERSION
        assert found(store, '"rock roll"') == ["/memories/music/rock.md"]
        assert _search_docs(url, AGENT) == len(CORPUS)
    finally:
        store.close()
    with psycopg.connect(url) as conn:  # the current schema without the table: made on open
        conn.execute("DROP TABLE search_docs")
    store = Store(tmp_path / "data", index_location=url)
    try:
        assert found(store, "jazz -rock") == []
        assert _search_docs(url, AGENT) == len(CORPUS)
    finally:
        store.close()


def test_full_text_search_needs_no_extension(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """No extension is created (pgserver's build and some managed databases have no
    unaccent): accents are folded by memfs, also with its tables in a schema of their
    own."""
    url = postgres_server.new_database()
    with psycopg.connect(url) as conn:
        conn.execute("CREATE SCHEMA memfs")
    store = _open(tmp_path / "data", url + "?options=-csearch_path%3Dmemfs")
    try:
        assert found(store, "creme BRULÉE") == ["/memories/notes/cafe.md"]
        assert found(store, "CAFÉ")[0] == "/memories/notes/cafe.md"
    finally:
        store.close()
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT extname FROM pg_extension").fetchall() == [("plpgsql",)]


def test_an_index_whose_words_unaccent_folded_is_migrated(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """Schema 4 mapped words through unaccent before the stemmer; schema 5's step
    (fold_accents) maps them to the stemmer only and makes every row's words again.
    ``simple`` stands in for unaccent here (the server may lack it), and the rows'
    words are made unfolded, so a row the step missed would not match."""
    url = postgres_server.new_database()
    _open(tmp_path / "data", url).close()
    with psycopg.connect(url) as conn:
        OLDER[4](conn)  # the shape of schema 4 (test_index_migrations_pg.py)
        conn.execute("UPDATE search_docs SET doc=to_tsvector('simple', body)")
        conn.execute("UPDATE meta SET value=4 WHERE key='schema'")
    store = Store(tmp_path / "data", index_location=url)
    try:
        with store.index.read_session() as s:
            assert s.schema() == SCHEMA_VERSION
        assert found(store, "creme brulee") == ["/memories/notes/cafe.md"]
        assert sorted(found(store, "rocks jazz")) == [
            "/memories/music/jazz.md",
            "/memories/music/rock.md",
        ]
        (hit,) = search(store, SIGNER, agent_id=AGENT, query="creme").results
        assert "«crème»" in hit.snippet
    finally:
        store.close()
    with psycopg.connect(url) as conn:
        dictionaries = conn.execute(
            "SELECT DISTINCT unnest(dictionaries)::text"
            " FROM ts_debug('memfs_search', 'Crème rocks')"
        ).fetchall()
        assert dictionaries == [("memfs_english",)]


def test_erasing_an_agent_removes_its_rows_and_fsck_and_reindex_mend_damage(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    url = postgres_server.new_database()
    store = _open(tmp_path / "data", url)
    try:
        store.create_agent("users/bob/assistant")
        store.apply("users/bob/assistant", [Put("/memories/k.md", b"kept rock\n")], actor="t")
        with psycopg.connect(url) as conn:  # damage the derived state by hand
            conn.execute("DELETE FROM search_docs WHERE path='/memories/music/rock.md'")
            conn.execute("UPDATE search_docs SET sha256='0' WHERE path='/memories/music/jazz.md'")
        problems = [p for p in maintenance.fsck(store).derived if "full-text" in p]
        assert len(problems) == 2 and all("memfs reindex" in p for p in problems)
        maintenance.reindex(store)
        assert found(store, "rock") == ["/memories/music/rock.md", "/memories/music/jazz.md"]
        store.erase_agent(AGENT)
        assert _search_docs(url, AGENT) == 0
        assert _search_docs(url, "users/bob/assistant") == 1
        page = search(store, SIGNER, scope="users", query="rock")
        assert [(h.agent_id, h.path) for h in page.results] == [
            ("users/bob/assistant", "/memories/k.md")
        ]
    finally:
        store.close()


def test_a_memory_too_large_for_one_tsvector_is_indexed_by_its_first_words(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """MEMFS_MEMORY_BYTES may allow memories far larger than PostgreSQL's 1 MiB
    tsvector: such a memory is committed and searchable (its first 160 KiB of words)."""
    rng = random.Random(3)
    words = ["".join(rng.choices(string.ascii_lowercase, k=8)) for _ in range(150_000)]
    store = Store(
        tmp_path / "data",
        index_location=postgres_server.new_database(),
        memory_bytes=4 * 1024 * 1024,
    )
    try:
        store.create_agent(AGENT)
        body = "walrus " + " ".join(words) + " narwhal\n"
        store.apply(AGENT, [Put("/memories/big.md", body.encode())], actor="t")
        assert found(store, "walrus") == ["/memories/big.md"]
        assert found(store, words[1000]) == ["/memories/big.md"]
        assert found(store, "narwhal") == []  # past the cap (SQLite indexes every word)
        with store.index.read_session() as s:
            assert s.search_rows(AGENT) == {"/memories/big.md": sha256(body.encode()).hexdigest()}
    finally:
        store.close()


def test_random_queries_match_the_same_memories_on_both_engines(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    """Words, phrases of neighbours, prefixes and exclusions drawn at random over a
    generated corpus: PostgreSQL finds exactly the memories FTS5 finds."""
    docs = generated_corpus(150)
    ops = [Put(f"/memories/d{i:04}.md", (" ".join(d) + "\n").encode()) for i, d in enumerate(docs)]
    lite = Store(tmp_path / "lite")
    pg = Store(tmp_path / "pg", index_location=postgres_server.new_database())
    try:
        for store in (lite, pg):
            store.create_agent(AGENT)
            store.apply(AGENT, ops, actor="t")
        rng = random.Random(11)
        for _ in range(80):
            doc = rng.choice(docs)
            at = rng.randrange(len(doc) - 2)
            terms = [rng.choice(doc)]
            roll = rng.random()
            if roll < 0.3:
                terms.append(f'"{doc[at]} {doc[at + 1]}"')
            elif roll < 0.6:
                terms.append(rng.choice(doc)[:3] + "*")
            if rng.random() < 0.4:
                terms.append("-" + rng.choice(rng.choice(docs)))
            query = " ".join(terms)
            assert every_match(pg, query) == every_match(lite, query), query
    finally:
        lite.close()
        pg.close()
