"""Search quality on a seeded corpus: the memory a person means is the top hit, and
the ranking agrees with a reference BM25 (rank-bm25) where the two should agree."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from memfs.core.planner import Put
from memfs.core.search import search
from memfs.core.store import Store
from memfs.core.tokens import Signer

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


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Store:
    store = Store(tmp_path_factory.mktemp("quality") / "data")
    store.create_agent(AGENT)
    store.apply(AGENT, [Put(p, t.encode()) for p, t in CORPUS.items()], actor="t")
    return store


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

# Syllables whose words the Porter stemmer leaves alone (no vowel-y endings, no 'e',
# 's', 'y' or 'u': no suffix rule applies), so both sides see the same terms.
_SYLLABLES = [c + v for c in "bdfgkmptvz" for v in "ao"]


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))))
    return sorted(words)


def generated_corpus(count: int, seed: int = 7) -> list[list[str]]:
    """Documents of Zipf-distributed words (a natural text's shape)."""
    rng = random.Random(seed)
    vocabulary = _vocabulary(rng, 2000)
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    return [rng.choices(vocabulary, weights, k=rng.randint(20, 120)) for _ in range(count)]


class Reference:
    """rank-bm25's Okapi BM25 (k1 1.2, b 0.75: FTS5's constants) over the same words."""

    def __init__(self, docs: list[list[str]]) -> None:
        from rank_bm25 import BM25Okapi  # the dev extra's reference implementation

        self.bm25 = BM25Okapi(docs, k1=1.2, b=0.75)
        self.sets = [set(d) for d in docs]

    def top(self, terms: list[str], k: int) -> list[int]:
        scores = self.bm25.get_scores(terms)
        # memfs requires every word: rank, among the documents holding all, by score.
        holding = [i for i, words in enumerate(self.sets) if all(t in words for t in terms)]
        return sorted(holding, key=lambda i: (-scores[i], i))[:k]


def agreement(store: Store, docs: list[list[str]], queries: int, seed: int = 11) -> float:
    """The mean share of the reference's top 10 that memfs's top 10 holds."""
    reference = Reference(docs)
    rng = random.Random(seed)
    frequency: dict[str, int] = {}
    for words in reference.sets:
        for w in words:
            frequency[w] = frequency.get(w, 0) + 1
    # Words of middling frequency: a common word's IDF is clamped differently by each
    # implementation (FTS5: 1e-6, rank-bm25: a fraction of the mean).
    middling = sorted(w for w, n in frequency.items() if 5 <= n <= len(docs) // 4)
    shares: list[float] = []
    for _ in range(queries):
        terms = rng.sample(middling, rng.choice((1, 1, 2)))
        expected = reference.top(terms, 10)
        got = [
            int(h.path.removeprefix("/memories/d").removesuffix(".md"))
            for h in search(store, SIGNER, agent_id=AGENT, query=" ".join(terms)).results
        ]
        if expected:
            shares.append(len(set(expected) & set(got)) / len(expected))
    return sum(shares) / len(shares)


def test_top_10_agrees_with_a_reference_bm25(tmp_path: Path) -> None:
    docs = generated_corpus(400)
    store = Store(tmp_path / "data")
    try:
        store.create_agent(AGENT)
        ops = [
            Put(f"/memories/d{i:05}.md", (" ".join(d) + "\n").encode()) for i, d in enumerate(docs)
        ]
        store.apply(AGENT, ops, actor="t")
        mean = agreement(store, docs, 30)
        assert mean >= 0.9, f"top-10 agreement {mean:.2f}"
    finally:
        store.close()
