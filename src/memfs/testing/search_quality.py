"""Search quality against a reference BM25: a generated corpus and the comparison.

Shipped beside the contract suites so that a second full-text engine (PostgreSQL, say)
is measured the same way. ``rank-bm25`` (the dev extra) is the reference; it is
imported only when a ``Reference`` is made.

The corpus is made of pseudo-words the Porter stemmer leaves alone (syllables of
``bdfgkmptvz`` × ``ao``: no suffix rule of Porter applies), in Zipf-distributed
frequencies, so both sides index exactly the same terms and differ only in scoring.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

_SYLLABLES = [c + v for c in "bdfgkmptvz" for v in "ao"]


def generated_corpus(count: int, *, seed: int = 7, vocabulary: int = 2000) -> list[list[str]]:
    """``count`` documents of 20-120 words each."""
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < vocabulary:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))))
    ordered = sorted(words)
    rng.shuffle(ordered)
    weights = [1 / (rank + 1) for rank in range(len(ordered))]
    return [rng.choices(ordered, weights, k=rng.randint(20, 120)) for _ in range(count)]


class Reference:
    """rank-bm25's Okapi BM25 with FTS5's constants (k1 1.2, b 0.75), all words required."""

    def __init__(self, docs: Sequence[list[str]]) -> None:
        from rank_bm25 import BM25Okapi

        self._bm25: Any = BM25Okapi(list(docs), k1=1.2, b=0.75)
        self.sets = [set(d) for d in docs]

    def top(self, terms: Sequence[str], k: int) -> list[int]:
        scores = self._bm25.get_scores(list(terms))
        holding = [i for i, words in enumerate(self.sets) if all(t in words for t in terms)]
        return sorted(holding, key=lambda i: (-scores[i], i))[:k]

    def middling_words(self) -> list[str]:
        """Words in 5 documents up to a quarter of them: a word in more than half has a
        clamped IDF, and each implementation clamps differently (FTS5: 1e-6)."""
        frequency: dict[str, int] = {}
        for words in self.sets:
            for w in words:
                frequency[w] = frequency.get(w, 0) + 1
        return sorted(w for w, n in frequency.items() if 5 <= n <= len(self.sets) // 4)


def agreement(
    reference: Reference,
    engine_top: Callable[[list[str]], list[int]],
    queries: int,
    *,
    seed: int = 11,
) -> float:
    """The mean share of the reference's top 10 found in ``engine_top(terms)`` (the
    engine's top 10 as document numbers), over ``queries`` queries of one or two words."""
    rng = random.Random(seed)
    words = reference.middling_words()
    shares: list[float] = []
    for _ in range(queries):
        terms = rng.sample(words, rng.choice((1, 1, 2)))
        expected = reference.top(terms, 10)
        if expected:
            shares.append(len(set(expected) & set(engine_top(terms))) / len(expected))
    return sum(shares) / len(shares) if shares else 0.0
