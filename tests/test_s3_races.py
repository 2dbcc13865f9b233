"""Racing writers on one SeaweedFS bucket, each a separate ``memfs`` process with a data
folder (and so a local index) of its own, as separate nodes would be: If-None-Match: *
on the next log entry decides, so each If-Match round has exactly one winner and the
log has no gap and no duplicate."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from engine_seaweedfs import SeaweedFS
from memfs.canonical import layout
from test_races import _race_cli


def test_if_match_race_across_nodes_has_exactly_one_winner(
    seaweedfs: SeaweedFS, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = seaweedfs.backend("race")
    objects = ["--objects", f"s3://{backend.bucket}/race", "--s3-endpoint", seaweedfs.endpoint]
    for name, value in seaweedfs.env().items():
        monkeypatch.setenv(name, value)  # the credentials, for every racer
    agent, path, rounds, racers = "race/put", "/memories/race.md", 3, 8
    nodes = [tmp_path / f"node{n}" for n in range(racers)]
    for node in nodes:
        node.mkdir()
    first = tmp_path / "first.md"
    first.write_bytes(b"# round 0\n")
    setup = _race_cli(
        tmp_path / "setup",
        [
            [*objects, "--data", str(nodes[0]), "agents", "create", agent],
        ],
    )
    assert setup[0][0] == 0, setup
    made = _race_cli(
        tmp_path / "setup2", [[*objects, "--data", str(nodes[0]), "put", agent, path, str(first)]]
    )
    assert made[0][0] == 0, made
    sha = hashlib.sha256(first.read_bytes()).hexdigest()
    for round_no in range(1, rounds + 1):
        files = []
        for n in range(racers):
            file = tmp_path / f"r{round_no}-{n}.md"
            file.write_bytes(f"# round {round_no} by node {n}\n".encode())
            files.append(file)
        results = _race_cli(
            tmp_path / f"barrier-{round_no}",
            [
                [*objects, "--data", str(node), "put", agent, path, str(f), "--if-match", sha]
                for node, f in zip(nodes, files, strict=True)
            ],
        )
        codes = [code for code, _out, _err in results]
        assert sorted(codes) == [0] + [5] * (racers - 1), results
        sha = hashlib.sha256(files[codes.index(0)].read_bytes()).hexdigest()
    keys = list(backend.list(layout.log_prefix(agent)))
    docs: list[dict[str, Any]] = [json.loads(backend.get(k)) for k in keys]
    assert [d["revision"] for d in docs] == list(range(1, rounds + 2))
    # A node that lost every round still reads the last winner's bytes from the bucket.
    shown = _race_cli(tmp_path / "read", [[*objects, "--data", str(nodes[-1]), "cat", agent, path]])
    assert shown[0][0] == 0 and hashlib.sha256(shown[0][1].encode()).hexdigest() == sha, shown
