"""Commit forever on one agent, printing each acknowledged commit; the parent kills us.

Usage: crash_child.py DATA_DIR SEED

Prints ``{"ready": true}`` once the store is open, then one JSON line per commit,
written and flushed only after the store call returned:
  {"op": "put", "path", "sha", "rev"}
  {"op": "batch", "changes": [[path, sha], ...], "rev"}
  {"op": "delete", "path", "rev"}
  {"op": "mv", "src", "dst", "sha", "rev"}
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import sys
from pathlib import Path

from memfs.core.store import Put, Store
from memfs.errors import Conflict

AGENT = "crash/agent"
PATHS = [
    "/memories/p0.md",
    "/memories/p1.md",
    "/memories/p2.md",
    "/memories/deep/a.md",
    "/memories/deep/er/b.md",
    "/memories/ünï/ç.md",
]
BIG = 16 * 1024 + 1


def _content(rng: random.Random, seed: int, n: int) -> bytes:
    head = f"---\ndescription: seed {seed} commit {n}\nn: {n}\n---\n# note {seed}.{n}\n"
    # About a third larger than the inline limit, so stored as blobs.
    size = rng.randrange(BIG, 40 * 1024) if rng.random() < 0.35 else rng.randrange(0, 600)
    body = "".join(rng.choice("abcdefghij klmnop\n") for _ in range(min(size, 64)))
    text = head + (body * (size // max(len(body), 1) + 1))[:size]
    return text.encode()


def _emit(record: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def main() -> None:
    data, seed = Path(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    store = Store(data)
    with contextlib.suppress(Conflict):  # made by an earlier run
        store.create_agent(AGENT)
    store.sync(AGENT)
    live = {row.path: row.sha256 for row in store.list_memories(AGENT, limit=1000)[0]}
    _emit({"ready": True})
    n = 0
    while True:
        n += 1
        roll = rng.random()
        free = [p for p in PATHS if p not in live]
        if roll < 0.12 and live:
            path = rng.choice(sorted(live))
            result = store.delete(AGENT, path, actor="crash")
            del live[path]
            _emit({"op": "delete", "path": path, "rev": result.revision})
        elif roll < 0.24 and live and free:
            src, dst = rng.choice(sorted(live)), rng.choice(free)
            result = store.rename(AGENT, src, dst, if_match=live[src], actor="crash")
            live[dst] = live.pop(src)
            _emit({"op": "mv", "src": src, "dst": dst, "sha": live[dst], "rev": result.revision})
        elif roll < 0.36:
            a, b = rng.sample(PATHS, 2)
            ca, cb = _content(rng, seed, n), _content(rng, seed, -n)
            result = store.apply(AGENT, [Put(a, ca), Put(b, cb)], actor="crash")
            assert result.commit is not None
            live[a], live[b] = hashlib.sha256(ca).hexdigest(), hashlib.sha256(cb).hexdigest()
            _emit({"op": "batch", "changes": [[a, live[a]], [b, live[b]]], "rev": result.revision})
        else:
            path = rng.choice(PATHS)
            data_bytes = _content(rng, seed, n)
            written = store.write(AGENT, path, data_bytes, actor="crash", message=f"n{n}")
            assert (
                written.changed and written.memory.sha256 == hashlib.sha256(data_bytes).hexdigest()
            )
            live[path] = written.memory.sha256
            _emit({"op": "put", "path": path, "sha": live[path], "rev": written.revision})


if __name__ == "__main__":
    main()
