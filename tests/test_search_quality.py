"""Search quality on a seeded corpus: the memory a person means is the top hit, and
the ranking agrees with a reference BM25 (rank-bm25) where the two should agree."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memfs.core.planner import Put
from memfs.core.search import search
from memfs.core.store import Store
from memfs.core.tokens import Signer
from memfs.testing.search_quality import Reference, agreement, generated_corpus

AGENT = "users/alice/assistant"
SIGNER = Signer(b"quality-test-key" * 2)

CORPUS = {
    "/memories/projects/garden.md": "Tomatoes and basil grow in the raised beds.\n",
    "/memories/sport/running.md": "She runs five kilometres before work on Mondays.\n",
    "/memories/travel/paris.md": "The café on the corner serves the best croissants.\n",
    "/memories/work/review.md": "Every code review needs two approvals and a green build.\n",
    "/memories/work/code.md": "Review the code style guide; code formatting uses ruff.\n",
    "/memories/work/deploy.md": "Deployments happen on Tuesdays after the staging check.\n",
    "/memories/work/deploy-draft.md": "Draft: deployments might move to Thursdays.\n",
    "/memories/prefs/editor.md": (
        "---\ndescription: Preferred editor settings\n---\n"
        "Tabs are four spaces wide; the theme is dark.\n"
    ),
    "/memories/misc/settings.md": (
        "Settings, settings everywhere: the editor has many settings to tweak.\n"
    ),
    "/memories/people/zoe.md": "Zoë prefers tea over coffee.\n",
    "/memories/misc/internationalization.md": "Internationalization means translating UI strings.\n",
}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def corpus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    """The corpus in a store whose index is SQLite's FTS5, or PostgreSQL's full-text
    search: every quality case below holds on both engines."""
    location = None
    if request.param == "postgresql":
        location = request.getfixturevalue("postgres_server").new_database()
    store = Store(tmp_path_factory.mktemp("quality") / "data", index_location=location)
    try:
        store.create_agent(AGENT)
        store.apply(AGENT, [Put(p, t.encode()) for p, t in CORPUS.items()], actor="t")
        yield store
    finally:
        store.close()


def top(store: Store, query: str) -> list[str]:
    return [h.path for h in search(store, SIGNER, agent_id=AGENT, query=query).results]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ('"code review"', "/memories/work/review.md"),  # the phrase, not both words apart
        ("running", "/memories/sport/running.md"),  # stem: "runs"
        ("kilometre", "/memories/sport/running.md"),
        ("tomato", "/memories/projects/garden.md"),  # stem: plural
        ("internation*", "/memories/misc/internationalization.md"),  # prefix
        ("croiss*", "/memories/travel/paris.md"),
        ("cafe", "/memories/travel/paris.md"),  # accents folded
        ("CAFÉ", "/memories/travel/paris.md"),  # and case
        ("zoe", "/memories/people/zoe.md"),
        ("editor settings", "/memories/prefs/editor.md"),  # description outranks body
        ("garden", "/memories/projects/garden.md"),  # the path counts
    ],
)
def test_the_expected_memory_is_the_top_hit(corpus: Store, query: str, expected: str) -> None:
    found = top(corpus, query)
    assert found and found[0] == expected, found


def test_an_exclusion_removes_what_it_names(corpus: Store) -> None:
    assert set(top(corpus, "deployments")) == {
        "/memories/work/deploy.md",
        "/memories/work/deploy-draft.md",
    }
    assert top(corpus, "deployments -draft") == ["/memories/work/deploy.md"]
    assert top(corpus, 'code -"code review"') == ["/memories/work/code.md"]


def test_a_phrase_needs_its_words_in_order(corpus: Store) -> None:
    assert top(corpus, '"review code"') == []
    assert top(corpus, '"review the code"') == ["/memories/work/code.md"]


# ---- agreement with a reference BM25 -----------------------------------------------


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_top_10_agrees_with_a_reference_bm25(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """PostgreSQL's ts_rank has no IDF; normalised by document length it still ranks
    these top tens as BM25 does (see docs/scale-out.md)."""
    docs = generated_corpus(400)
    location = None
    if engine == "postgresql":
        location = request.getfixturevalue("postgres_server").new_database()
    store = Store(tmp_path / "data", index_location=location)
    try:
        store.create_agent(AGENT)
        ops = [
            Put(f"/memories/d{i:05}.md", (" ".join(d) + "\n").encode()) for i, d in enumerate(docs)
        ]
        store.apply(AGENT, ops, actor="t")

        def memfs_top(terms: list[str]) -> list[int]:
            page = search(store, SIGNER, agent_id=AGENT, query=" ".join(terms))
            return [
                int(h.path.removeprefix("/memories/d").removesuffix(".md")) for h in page.results
            ]

        mean = agreement(Reference(docs), memfs_top, 30)
        assert mean >= 0.9, f"top-10 agreement {mean:.2f}"
    finally:
        store.close()
