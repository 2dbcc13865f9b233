"""A commit's rows in one statement (``postgres/apply.py``) are the rows the
statement-per-row way writes, table for table: the same store operations (creates,
updates that change and drop metadata keys, links, a NUL in a description, a content
shared by two paths, renames, deletes, an agent renamed) are run once each way on
real PostgreSQL, with the same clock, and every index table is compared."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memfs.canonical.backend import MemoryBackend
from memfs.core import commit as commit_module
from memfs.core.planner import Delete, Move, Put
from memfs.core.store import Store
from memfs.derived.index.postgres import apply, writes
from memfs.derived.index.schema import DERIVED_TABLES


def _note(description: str, body: str, **meta: str) -> bytes:
    lines = [f"description: {description}", *(f"{k}: {v}" for k, v in meta.items())]
    return ("---\n" + "\n".join(lines) + "\n---\n" + body).encode()


def _run(store: Store) -> None:
    store.create_agent("t/a", "A")
    agent = "t/a"
    store.write(
        agent, "/memories/one.md", _note("first", "see [two](two.md)\n", tag="x"), actor="t"
    )
    store.apply(
        agent,
        [
            Put("/memories/two.md", _note("second", "same body\n", tag="y", kind="k")),
            Put("/memories/dir/three.md", _note("third", "same body\n")),
            Put("/memories/nul.md", b'---\ndescription: "a\\0b"\n---\nnul\n'),
        ],
        actor="t",
        message="three at once",
    )
    # Metadata changed and a key dropped; a link added; a body rewritten.
    store.write(
        agent, "/memories/two.md", _note("second v2", "[one](one.md)\n", tag="z"), actor="t"
    )
    store.write(agent, "/memories/one.md", b"plain now\n", actor="t")
    store.apply(agent, [Move("/memories/dir/three.md", "/memories/moved.md")], actor="t")
    store.apply(
        agent,
        [Delete("/memories/nul.md"), Put("/memories/new.md", _note("new", "n\n", a="1"))],
        actor="t",
    )
    store.delete(agent, "/memories/one.md", actor="t")
    store.rename_agent(agent, "A renamed", actor="t")
    store.write(agent, "/memories/one.md", _note("back", "again\n", tag="x"), actor="t")


def _tables(url: str) -> dict[str, list[str]]:
    out = {}
    with psycopg.connect(url) as conn:
        for table in DERIVED_TABLES:
            columns = [
                str(r[0])
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name=%s"
                    " AND column_name NOT IN ('store_id', 'created_at')"
                    " ORDER BY ordinal_position",
                    (table,),
                )
            ]
            rows = conn.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall()
            out[table] = sorted(repr(row) for row in rows)
    return out


def _store_run(tmp: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    ticks = itertools.count(1_700_000_000_000_000, 1000)
    monkeypatch.setattr(commit_module, "now_us", lambda: next(ticks))
    store = Store(tmp, backend=MemoryBackend(), index_location=url, worktree=False)
    try:
        _run(store)
    finally:
        store.close()
    return _tables(url)


def test_one_statement_writes_the_rows_a_statement_per_row_writes(
    postgres_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    used: list[bool] = []
    rows = apply.rows

    def watched(*args: Any) -> dict[str, Any] | None:
        made = rows(*args)
        used.append(made is not None)
        return made

    monkeypatch.setattr(apply, "rows", watched)
    fast = _store_run(tmp_path / "fast", postgres_server.new_database(), monkeypatch)
    assert used and all(used)  # every commit of the run in one statement
    monkeypatch.setattr(apply, "rows", lambda *args: None)
    slow = _store_run(tmp_path / "slow", postgres_server.new_database(), monkeypatch)
    assert fast["memories"] and fast["links"] and fast["memory_meta"]
    for table in DERIVED_TABLES:
        assert fast[table] == slow[table], table


def test_a_commit_already_indexed_is_refused_and_writes_nothing(postgres_url: str) -> None:
    from memfs.derived.index.postgres import PostgresIndex
    from memfs.domain.commits import CREATED, Change, Commit

    idx = PostgresIndex(postgres_url, pool_size=1)
    try:
        with idx.write_session() as s:
            s.put_agent("a", "A", "store-a", 1)
        data = b"x\n"
        import hashlib

        sha = hashlib.sha256(data).hexdigest()
        change = Change("/memories/x.md", CREATED, 1, None, sha, 2, content="x\n")
        commit = Commit("a", 1, 10, "t", "m", (change,))
        for expected in (True, False):
            with idx.write_session() as s:
                assert s.apply_commit(commit, 10, {sha: data}, commit.to_bytes()) is expected
        with idx.read_session() as r:
            assert r.agent_stats("a") == (1, 2)  # counted once
    finally:
        idx.close()
    assert writes.PgWrite  # the session under test
