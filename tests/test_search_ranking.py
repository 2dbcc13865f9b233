"""The ranking read (derived/index/search.py) answers every page exactly as the query
that joins every match before ranking: ranking the full-text table alone and joining
after the LIMIT is only a shortcut, and it must give way when other agents' rows,
folder or metadata filters or tied scores at the page's edge could change the page."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from memfs.core.search import search
from memfs.core.store import Put, Store
from memfs.core.tokens import Signer
from memfs.derived.index import search as fts

SIGNER = Signer(b"r" * 32)
AGENTS = ("users/ann/a", "users/ann/b", "users/bob/c")
WORDS = ("otter", "heron", "lichen", "basalt", "fjord", "ember")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    root: Path = tmp_path_factory.mktemp("ranking")
    opened = Store(root / "data")
    rng = random.Random(11)
    for agent in AGENTS:
        opened.create_agent(agent)
        ops = []
        for i in range(60):
            # Many identical texts: a lot of exactly tied scores, ordered by agent and path.
            words = [rng.choice(WORDS) for _ in range(rng.choice((2, 4, 4, 6)))]
            meta = f"---\ndescription: note {i % 3}\nkind: k{i % 2}\n---\n"
            body = meta + " ".join(words) + "\n"
            ops.append(Put(f"/memories/{'deep/' if i % 3 == 0 else ''}n{i:02d}.md", body.encode()))
        opened.apply(agent, ops, actor="t", message="seed")
    yield opened
    opened.close()


def every_page(store: Store, query: str, limit: int, **target: object) -> list[list[object]]:
    pages: list[list[object]] = []
    token = ""
    while True:
        page = search(store, SIGNER, query=query, limit=limit, page_token=token, **target)  # type: ignore[arg-type]
        pages.append([(h.agent_id, h.path, h.score, h.snippet) for h in page.results])
        token = page.next_page_token
        if not token:
            return pages


def joined_pages(
    monkeypatch: pytest.MonkeyPatch, store: Store, query: str, limit: int, **target: object
) -> list[list[object]]:
    with monkeypatch.context() as patched:
        patched.setattr(fts, "_ranked_fast", lambda *_args: None)
        return every_page(store, query, limit, **target)


@pytest.fixture(params=[1, 7, 200], autouse=True)
def room(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Rows fetched past the page: small rooms make the ties and other agents' rows
    at the page's edge fall outside what is fetched (the fallback's cases)."""
    monkeypatch.setattr(fts, "_TIE_ROOM", request.param)
    return int(request.param)


CASES: list[tuple[dict[str, object], dict[str, object]]] = [
    ({"agent_id": "users/ann/a"}, {}),
    ({"agent_id": "users/bob/c"}, {"path_prefix": "/memories/deep"}),
    ({"agent_id": "users/ann/b"}, {"metadata": {"kind": "k0"}}),
    ({"scope": "users/ann"}, {}),
    ({"scope": "users"}, {}),
]


@pytest.mark.parametrize(
    "query", ["otter", "heron lichen", '"basalt fjord"', "emb*", "-otter heron"]
)
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("limit", [1, 3, 10])
def test_every_page_equals_the_joined_ranking(
    monkeypatch: pytest.MonkeyPatch, store: Store, query: str, case: int, limit: int
) -> None:
    target, extra = CASES[case]
    kwargs = {**target, **extra}
    fast = every_page(store, query, limit, **kwargs)
    assert fast == joined_pages(monkeypatch, store, query, limit, **kwargs)
    assert sum(len(p) for p in fast) > 0, "each case finds something"


@pytest.fixture(scope="module")
def lone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """One agent (the shortcut's case), its tied memories written in reverse path
    order: the full-text table's order among ties is not the agent/path order."""
    opened = Store(tmp_path_factory.mktemp("lone") / "data")
    opened.create_agent("solo")
    ops = [Put(f"/memories/t{i:02d}.md", b"otter heron\n") for i in reversed(range(25))]
    ops += [Put(f"/memories/n{i:02d}.md", f"otter {'heron ' * i}\n".encode()) for i in range(1, 13)]
    opened.apply("solo", ops, actor="t", message="seed")
    yield opened
    opened.close()


@pytest.mark.parametrize("query", ["otter", "heron", "otter heron", "ott*"])
@pytest.mark.parametrize("limit", [1, 4, 10])
def test_tied_scores_page_as_the_joined_ranking_does(
    monkeypatch: pytest.MonkeyPatch, lone: Store, query: str, limit: int
) -> None:
    fast = every_page(lone, query, limit, agent_id="solo")
    assert fast == joined_pages(monkeypatch, lone, query, limit, agent_id="solo")
    assert sum(len(p) for p in fast) == 37


def test_the_shortcut_answers_unless_ties_or_filters_reach_past_its_room(
    monkeypatch: pytest.MonkeyPatch, store: Store, lone: Store, room: int
) -> None:
    """A page is answered without joining every match when the fetched rows decide
    it; a tie running past them sends it to the joined query."""
    calls: list[bool] = []
    real = fts._ranked_fast

    def spy(*args: object) -> object:
        got = real(*args)  # type: ignore[arg-type]
        calls.append(got is not None)
        return got

    monkeypatch.setattr(fts, "_ranked_fast", spy)
    if room < 200:
        return
    # Every match fits the room: the shortcut answers, even among other agents' rows.
    assert len(search(lone, SIGNER, agent_id="solo", query="heron", limit=5).results) == 5
    search(store, SIGNER, agent_id="users/ann/a", query="otter")
    assert calls == [True, True]
    # One row of room past a page that ends inside a tie: the joined query answers.
    monkeypatch.setattr(fts, "_TIE_ROOM", 1)
    calls.clear()
    assert len(search(lone, SIGNER, agent_id="solo", query="otter", limit=5).results) == 5
    assert calls == [False]
