"""Where each thing of an agent lives: object keys and local folders, in one place.

agents/<dir>/.memfs/agent.json          canonical: id, name, memoryStoreId, createdAt
agents/<dir>/.memfs/log/<revision>.json canonical: one commit each, never rewritten
agents/<dir>/.memfs/objects/ab/cdef…    canonical: contents too large to inline
agents/<dir>/.memfs/triggers/<id>/<seq>.json       canonical: trigger versions (triggers.py)
agents/<dir>/.memfs/deliveries/<trigger>/<h>.json  canonical: one per webhook-id (runs.py)
                                        (names made together: hard links to one file,
                                        core/delivery_records.py)
agents/<dir>/.memfs/runs/<runId>.e<n>.json         canonical: run events (runs.py)
agents/<dir>/.memfs/runs/<runId>.c<k>.json         canonical: attempt claims (runs.py)
agents/<dir>/.memfs/runs/<runId>.g<k>.json         canonical: an attempt's process group
keys/<keyId>.json                       canonical: application keys, secret hashed (keys.py)
agents/<dir>/memories/…                 derived: the working tree
index.sqlite (+ .lock)                  derived: the index (the .lock file queues writers)
admin.key, token.key                    generated secrets, mode 0600
console/sessions/<sha256(id)>.json      console sign-in sessions, mode 0600 (core/sessions.py);
                                        not canonical: a backup leaves them out
(a command attempt's scratch folder is outside the data folder: <tmp>/memfs-run-*,
owned by the run user, who can't enter the data folder; see sandbox.py)
"""

from __future__ import annotations

import functools
from pathlib import Path

from memfs.domain.paths import agent_dir_name

AGENTS = "agents/"
REVISION_DIGITS = 20


def agent_prefix(agent_id: str) -> str:
    return f"{AGENTS}{agent_dir_name(agent_id)}/.memfs/"


def agent_key(agent_id: str) -> str:
    return agent_prefix(agent_id) + "agent.json"


def log_prefix(agent_id: str) -> str:
    return agent_prefix(agent_id) + "log/"


def log_key(agent_id: str, revision: int) -> str:
    return f"{log_prefix(agent_id)}{revision:0{REVISION_DIGITS}d}.json"


def revision_of(key: str) -> int | None:
    """The revision a log key names, None for anything else."""
    name = key.rsplit("/", 1)[-1]
    stem = name.removesuffix(".json")
    if len(stem) == REVISION_DIGITS and stem.isascii() and stem.isdigit() and name != stem:
        return int(stem)
    return None


def blob_key(agent_id: str, sha256: str) -> str:
    return f"{agent_prefix(agent_id)}objects/{sha256[:2]}/{sha256[2:]}"


# One string for pathlib to parse, not a join per part: this runs twice per commit.
def agent_folder(data_dir: Path, agent_id: str) -> Path:
    return Path(f"{data_dir}/agents/{agent_dir_name(agent_id)}")


@functools.lru_cache(maxsize=4096)  # a pure function of its arguments; twice per commit
def worktree_root(data_dir: Path, agent_id: str) -> Path:
    return Path(f"{data_dir}/agents/{agent_dir_name(agent_id)}/memories")


def index_path(data_dir: Path) -> Path:
    return data_dir / "index.sqlite"
