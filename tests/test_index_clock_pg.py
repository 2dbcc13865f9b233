"""The PostgreSQL index's clock step: the statement that moves the visibility clock
also moves every row the session stamped (commits, versions opened and closed, run
steps) past it when another agent's commit took the clock past their stamps meanwhile,
and a commit's write session sends it as one statement (real PostgreSQL)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from memfs.derived.index.postgres import PgWrite, PostgresIndex
from memfs.domain.commits import CREATED, MODIFIED, Change, Commit
from pg_round_trips import count_round_trips, index_with_agents


@pytest.fixture
def idx(postgres_url: str) -> Iterator[PostgresIndex]:
    yield from index_with_agents(postgres_url, pool_size=2)


def _write(s: PgWrite, agent: str, revision: int, version: int, at: int) -> None:
    """Commit ``revision`` of ``agent``: /memories/p.md at ``version``, stamped ``at``."""
    data = f"v{version}\n".encode()
    sha = hashlib.sha256(data).hexdigest()
    before = None if version == 1 else hashlib.sha256(f"v{version - 1}\n".encode()).hexdigest()
    kind = CREATED if version == 1 else MODIFIED
    change = Change("/memories/p.md", kind, version, before, sha, len(data), content=data.decode())
    commit = Commit(agent, revision, at, "t", "m", (change,))
    assert s.apply_commit(commit, at, {sha: data}, commit.to_bytes())


def _stamps(url: str) -> dict[str, list[Any]]:
    with psycopg.connect(url) as conn:
        return {
            "commits": conn.execute(
                "SELECT visible_at FROM commits WHERE agent_id='b' ORDER BY revision"
            ).fetchall(),
            "versions": conn.execute(
                "SELECT version, visible_from, visible_to FROM versions WHERE agent_id='b'"
                " ORDER BY version"
            ).fetchall(),
            "steps": conn.execute("SELECT visible_at FROM run_steps WHERE agent_id='b'").fetchall(),
        }


def test_rows_stamped_under_a_clock_that_moved_are_shifted_past_it_in_order(
    idx: PostgresIndex, postgres_url: str
) -> None:
    """Agent b's session stamps three commits of one path (its version 2 opened and
    closed in the same session) and a run step at X..X+2; agent a's session raises the
    clock to X+1000 and commits first. Every b row then lands past X+1000, each stamp
    shifted by the same amount (their order kept), none lost."""
    x = 10**12
    with idx.write_session() as b:
        b.agent("b")
        for revision in (1, 2, 3):
            _write(b, "b", revision, revision, x + revision - 1)
        b.add_run_step("b", "run1", 1, x, x + 2, "started", 1, "{}")
        with idx.write_session() as a:  # another agent: no lock in common
            a.agent("a")
            a.raise_clock(x + 1000)
        with idx.read_session() as r:
            pin = r.clock()
        assert pin == x + 1000
    stamps = _stamps(postgres_url)
    shift = (x + 1000 + 1) - x  # past the clock, from the least stamp on
    assert stamps["commits"] == [(x + shift,), (x + 1 + shift,), (x + 2 + shift,)]
    assert stamps["versions"] == [
        (1, x + shift, x + 1 + shift),
        (2, x + 1 + shift, x + 2 + shift),
        (3, x + 2 + shift, None),
    ]
    assert stamps["steps"] == [(x + 2 + shift,)]
    with idx.read_session() as r:
        assert r.live_version_at("b", "/memories/p.md", pin) is None
        assert r.live_version_at("b", "/memories/p.md", r.clock()) == 3
        assert r.clock() == x + 2 + shift


def test_rows_stamped_past_the_clock_keep_their_stamps(
    idx: PostgresIndex, postgres_url: str
) -> None:
    x = 10**12
    with idx.write_session() as b:
        b.agent("b")
        _write(b, "b", 1, 1, x)
        _write(b, "b", 2, 2, x + 5)
    assert _stamps(postgres_url)["versions"] == [(1, x, x + 5), (2, x + 5, None)]
    with idx.read_session() as r:
        assert r.clock() == x + 5


def test_a_commit_sends_its_clock_step_and_shifts_as_one_statement(
    idx: PostgresIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The statements after a commit's rows: one clock step (that also moves the
    stamped rows) and COMMIT, where there were a clock step and an UPDATE per kind of
    stamped row (each a statement for the server to run and the client to send)."""
    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def counting(self: psycopg.Cursor[Any], query: Any, *args: Any, **kw: Any) -> Any:
        sent.append(str(query))
        return execute(self, query, *args, **kw)

    monkeypatch.setattr(psycopg.Cursor, "execute", counting)
    with idx.write_session() as b:
        row = b.agent("b")
        assert row is not None
        _write(b, "b", 1, 1, 10**12)
        _write(b, "b", 2, 2, 10**12 + 1)
    after_rows = sent[next(i for i, q in enumerate(sent) if "meta SET value" in q) :]
    assert len(after_rows) == 2 and after_rows[-1] == "COMMIT", after_rows
    assert not any(q.startswith("UPDATE commits SET visible_at") for q in sent)


def test_a_commit_after_its_agents_row_is_two_round_trips_and_still_idempotent(
    idx: PostgresIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group commit reads the agent's row under its lock, then applies: the commit
    row's insert needs no answer of its own (the row said the commit is new), so the
    session is two round trips (BEGIN, lock and row; the rows, the clock step and
    COMMIT), not three. The same commit applied again in that session is refused."""
    trips = count_round_trips(monkeypatch)
    data = b"v1\n"
    sha = hashlib.sha256(data).hexdigest()
    change = Change("/memories/p.md", CREATED, 1, None, sha, len(data), content="v1\n")
    commit = Commit("b", 1, 10**12, "t", "m", (change,))
    with idx.write_session() as b:
        assert b.agent("b") is not None
        assert b.apply_commit(commit, 10**12, {sha: data}, commit.to_bytes())
    assert trips == ["pipeline", "pipeline"], trips
    with idx.write_session() as b:
        b.agent("b")
        assert not b.apply_commit(commit, 10**12, {sha: data}, commit.to_bytes())
    with idx.write_session() as b:  # no row read first: the insert's answer decides
        assert not b.apply_commit(commit, 10**12, {sha: data}, commit.to_bytes())
    with idx.read_session() as r:
        assert r.agent_stats("b") == (1, 3)
        row = r.agent("b")
        assert row is not None and row.revision == 1
