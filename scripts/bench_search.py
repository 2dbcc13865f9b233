#!/usr/bin/env python3
"""Benchmark memory:query: ranking agreement with a reference BM25, query latency at
10k and 100k memories, and what the full-text index adds to a commit.

Run from the repository root:

    .venv/bin/python scripts/bench_search.py            # 10k and 100k memories (~3 min)
    .venv/bin/python scripts/bench_search.py --quick    # 2k and 20k memories, ~40 s

1. Agreement: a generated 10k-document corpus (``memfs.testing.search_quality``:
   Porter-invariant pseudo-words, Zipf frequencies) is indexed in one agent, and the
   top 10 of memfs (``core.search``, in-process) is compared with rank-bm25's Okapi
   BM25 (k1 1.2, b 0.75) for one- and two-word queries of middling words.
2. Latency: ``core.search`` called in-process (as the HTTP route does) on the same
   agent at 10k memories, then grown to 100k: p50 and p99 over a query mix of
   uniformly drawn vocabulary words (one word, two words, a two-word phrase, a
   prefix), plus one of the corpus's ten most common words apart (the worst case:
   BM25 ranks every matching memory).
3. Commit cost: single-memory PUT commits (``Store.write``, fsync'd) with the
   full-text index against the same commits with its writes switched off, in
   alternating rounds in the same run; the ratio of the medians.

Every comparison is a ratio between runs in the same process; absolute figures vary
with the machine and its load. Nothing here asserts: a MISS is a finding to explain.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import benchkit
from benchkit import Report, ms, say

from memfs.core.search import search
from memfs.core.store import Put, Store
from memfs.core.tokens import Signer
from memfs.derived.index import search as fts
from memfs.derived.worktree import WorkTree
from memfs.testing.search_quality import Reference, agreement, generated_corpus

AGENT = "bench/search"
ACTOR = "bench"


def grow(store: Store, docs: list[list[str]], start: int, stop: int, batch: int = 500) -> float:
    """Index documents ``start`` to ``stop`` as memories, ``batch`` per commit; seconds."""
    began = time.perf_counter()
    for low in range(start, stop, batch):
        ops = [
            Put(f"/memories/f{i % 100:02d}/d{i:06d}.md", (" ".join(docs[i]) + "\n").encode())
            for i in range(low, min(stop, low + batch))
        ]
        store.apply(AGENT, ops, actor=ACTOR, message=f"bulk {low}")
    return time.perf_counter() - began


def number_of(path: str) -> int:
    return int(path.rsplit("/d", 1)[1].removesuffix(".md"))


def query_mix(docs: list[list[str]], count: int, seed: int = 5) -> list[str]:
    rng = random.Random(seed)
    vocabulary = sorted({w for d in docs[:2000] for w in d})
    out: list[str] = []
    for i in range(count):
        kind = i % 4
        if kind == 0:
            out.append(rng.choice(vocabulary))
        elif kind == 1:
            out.append(" ".join(rng.sample(vocabulary, 2)))
        elif kind == 2:
            doc = rng.choice(docs)
            at = rng.randrange(len(doc) - 1)
            out.append(f'"{doc[at]} {doc[at + 1]}"')
        else:
            out.append(rng.choice(vocabulary)[:4] + "*")
    return out


KINDS = ("one word", "two words", "phrase", "prefix")


def latencies(store: Store, signer: Signer, queries: list[str], repeat: int) -> list[float]:
    samples: list[float] = []
    for _ in range(repeat):
        for q in queries:
            began = time.perf_counter()
            search(store, signer, agent_id=AGENT, query=q)
            samples.append(time.perf_counter() - began)
    return samples


def by_kind(samples: list[float], count: int) -> dict[str, float]:
    """p50 per query kind (query_mix cycles through KINDS)."""
    return {
        kind: benchkit.median([t for i, t in enumerate(samples) if i % count % 4 == k])
        for k, kind in enumerate(KINDS)
    }


def listing_page(store: Store, repeat: int) -> list[float]:
    """The baseline: a plain indexed SELECT of a page of 10 (a listing), in-process."""
    samples: list[float] = []
    for _ in range(repeat):
        began = time.perf_counter()
        store.list_memories(AGENT, "/memories/f07", after=None, limit=10)
        samples.append(time.perf_counter() - began)
    return samples


@contextmanager
def joined_ranking() -> Iterator[None]:
    """The ranking as it was before search_index_tuned: every match joined, then ranked."""
    saved = fts._ranked_fast

    def never(*_args: Any) -> None:
        return None

    fts._ranked_fast = never  # type: ignore[assignment]
    try:
        yield
    finally:
        fts._ranked_fast = saved


def measure(
    store: Store, signer: Signer, queries: list[str], common: str, repeat: int
) -> dict[str, list[float]]:
    """Both ranking paths, interleaved pass by pass so load drift hits both alike."""
    out: dict[str, list[float]] = {"mix": [], "old mix": [], "common": [], "old common": []}
    for _ in range(repeat):
        out["mix"] += latencies(store, signer, queries, 1)
        out["common"] += latencies(store, signer, [common], 1)
        with joined_ranking():
            out["old mix"] += latencies(store, signer, queries, 1)
            out["old common"] += latencies(store, signer, [common], 1)
    out["listing"] = listing_page(store, repeat * len(queries))
    return out


@contextmanager
def full_text_off() -> Iterator[None]:
    """The index's full-text writes switched off: a commit as it was before search."""
    saved = fts.index_doc, fts.unindex_doc

    def nothing(*_args: Any) -> None:
        return None

    fts.index_doc, fts.unindex_doc = nothing, nothing  # type: ignore[assignment]
    try:
        yield
    finally:
        fts.index_doc, fts.unindex_doc = saved


def commit_times(store: Store, agent: str, docs: list[list[str]], n: int, tag: str) -> list[float]:
    samples: list[float] = []
    for i in range(n):
        body = (" ".join(docs[i % len(docs)]) + f" {tag}{i}\n").encode()
        began = time.perf_counter()
        store.write(agent, f"/memories/c/{tag}{i % 50}.md", body, actor=ACTOR)
        samples.append(time.perf_counter() - began)
    return samples


def commit_pair(store: Store, agent: str, docs: list[list[str]], i: int) -> tuple[float, float]:
    """One commit with the full-text index and one without, back to back."""
    on = commit_times(store, agent, docs[i:], 1, f"on{i % 50}x")[0]
    with full_text_off():
        off = commit_times(store, agent, docs[i:], 1, f"off{i % 50}x")[0]
    return on, off


def commit_cost(
    store: Store, docs: list[list[str]], rounds: int, per_round: int
) -> tuple[float, float]:
    """Median single-PUT commit with and without the full-text index (alternating)."""
    store.create_agent("bench/commits")
    on: list[float] = []
    off: list[float] = []
    commit_times(store, "bench/commits", docs, 20, "warm")
    # Alternating commit by commit (not round by round): the machine's load changes
    # within seconds, and a ratio of medians taken seconds apart measured that load.
    for i in range(rounds * per_round):
        a, b = commit_pair(store, "bench/commits", docs, i)
        on.append(a)
        off.append(b)
    return benchkit.median(on), benchkit.median(off)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="2k and 20k memories, ~40 s")
    parser.add_argument("--repeat", type=int, default=5, help="passes over the query mix")
    parser.add_argument(
        "--dir", type=Path, default=benchkit.REPO / "data", help="parent of the temp dir"
    )
    parser.add_argument("--keep", action="store_true", help="leave the temp data in place")
    args = parser.parse_args(argv)
    small, big = (2_000, 20_000) if args.quick else (10_000, 100_000)

    args.dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="bench-search-", dir=args.dir))
    say(
        f"memfs search benchmark ({'quick' if args.quick else 'full'}): {small:,} and {big:,} memories"
    )
    facts = benchkit.machine_facts()
    for key, value in facts:
        say(f"  {key}: {value}")
    # The working tree is derived and search never reads it; on ext4 every file it
    # writes is a forced flush that would make building 100k memories take many minutes.
    WorkTree.update = lambda *a, **k: None  # type: ignore[method-assign]
    report = Report()
    began = time.perf_counter()
    store = Store(root / "data")
    try:
        signer = Signer.for_data_dir(root / "data")
        # A vocabulary of 20k words: 100k notes of natural text have more, 2k would
        # make every word common (see docs/benchmarks.md, "Search").
        docs = generated_corpus(big, vocabulary=20_000)
        store.create_agent(AGENT)
        say(f"\n  building {small:,} memories")
        built = grow(store, docs, 0, small)
        say(f"    {small / built:,.0f} memories/s")

        reference = Reference(docs[:small])

        def memfs_top(terms: list[str]) -> list[int]:
            page = search(store, signer, agent_id=AGENT, query=" ".join(terms))
            return [number_of(h.path) for h in page.results]

        share = agreement(reference, memfs_top, 200)
        report.add(
            f"top-10 agreement with rank-bm25, {small:,} documents, 200 queries",
            f"{share:.1%}",
        )
        common = max(reference.sets[0], key=lambda w: sum(w in s for s in reference.sets[:500]))
        queries = query_mix(docs, 40)
        gc.collect()
        at: dict[int, dict[str, list[float]]] = {}
        at[small] = measure(store, signer, queries, common, args.repeat)
        say(f"\n  growing to {big:,} memories")
        built = grow(store, docs, small, big)
        say(f"    {(big - small) / built:,.0f} memories/s")
        gc.collect()
        at[big] = measure(store, signer, queries, common, args.repeat)
        for size, got in at.items():
            mix, old = got["mix"], got["old mix"]
            p50, p99 = benchkit.quantile(mix, 0.5), benchkit.quantile(mix, 0.99)
            base = benchkit.median(got["listing"])
            target = "<= 5 ms" if size == big else ""
            report.add(
                f"query p50 / p99 at {size:,} memories (mix of {len(queries)})",
                f"{ms(p50, 2)} / {ms(p99, 2)}",
                target,
                p50 <= 0.005 if target else None,
            )
            report.add(
                "  the same, every match joined before ranking (the old path)",
                f"{ms(benchkit.quantile(old, 0.5), 2)} / {ms(benchkit.quantile(old, 0.99), 2)}",
            )
            kinds = by_kind(mix, len(queries))
            old_kinds = by_kind(old, len(queries))
            report.add(
                f"  p50 by kind at {size:,}, new (old)",
                ", ".join(f"{k} {ms(v, 2)} ({ms(old_kinds[k], 2)})" for k, v in kinds.items()),
            )
            report.add(
                f"  query p50 / a listing page's p50 ({ms(base, 2)}) at {size:,}",
                f"{p50 / base:.1f}x",
            )
            report.add(
                f"query of a most common word at {size:,} memories (p50), new / old",
                f"{ms(benchkit.median(got['common']), 2)} / {ms(benchkit.median(got['old common']), 2)}",
            )
        a = benchkit.quantile(at[small]["mix"], 0.5)
        b = benchkit.quantile(at[big]["mix"], 0.5)
        report.add(f"query p50 {big:,} / {small:,}", f"{b / a:.2f}x")

        rounds, per_round = (3, 40) if args.quick else (5, 60)
        with_fts, without = commit_cost(store, docs, rounds, per_round)
        added = with_fts / without - 1
        report.add(
            "single-PUT commit with / without the full-text index (median)",
            f"{ms(with_fts, 2)} / {ms(without, 2)} = +{added:.1%}",
            "<= +15%",
            added <= 0.15,
        )
        load = os.getloadavg()
        report.add("load average at the end (1 / 5 / 15 min)", " / ".join(f"{x:.2f}" for x in load))
        say(f"\nfinished in {time.perf_counter() - began:.0f} s\n")
        say("| fact | value |\n|---|---|")
        for key, value in facts:
            say(f"| {key} | {value} |")
        say("")
        say(report.table())
    finally:
        store.close()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
