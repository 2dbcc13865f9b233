"""Races on one SeaweedFS bucket, with real processes.

- If-Match writers, each a separate ``memfs`` process with a data folder (and so a local
  index) of its own, as separate nodes would be: If-None-Match: * on the next log entry
  decides, so each round has exactly one winner and the log no gap or duplicate.
- Thirty deliveries of one webhook-id split across two workers: one run, run once.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine_seaweedfs import SeaweedFS
from memfs.canonical import layout
from servers_real import RealServer
from test_races import _race_cli
from test_webhook_processes import (
    AGENT,
    RUN_OPTIONS,
    duplicate_deliveries,
    set_up,
    wait_terminal,
)


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


def test_thirty_concurrent_deliveries_of_one_id_on_s3_start_one_run(
    seaweedfs: SeaweedFS, tmp_path: Path
) -> None:
    """Two workers race on the delivery record in the bucket: one 202, 29 × 200, one
    run, claimed and executed once (read from its canonical events in the bucket)."""
    backend = seaweedfs.backend("once")
    env = {**seaweedfs.env(), "MEMFS_OBJECTS": f"s3://{backend.bucket}/once"}
    srv = RealServer(tmp_path / "data", workers=2, env=env, extra_args=RUN_OPTIONS)
    with srv:
        secret = set_up(srv, "gh", prompt="file it")
        body = json.dumps({"action": "opened"})
        limits = httpx.Limits(max_connections=40, max_keepalive_connections=40)
        with httpx.Client(base_url=srv.url, timeout=120, limits=limits) as client:
            answers = duplicate_deliveries([client], secret, "gh", "msg_s3", body, 30, timeout=60)
        assert sorted(code for code, _ in answers) == [200] * 29 + [202], answers
        (run_id,) = {run_id for _, run_id in answers}
        (run,) = wait_terminal(srv, 1, timeout=90)
        assert run["id"] == run_id and run["status"] == "succeeded" and run["attempt"] == 1
    agent = layout.agent_prefix(AGENT)
    assert len(list(backend.list(agent + "deliveries/gh/"))) == 1
    run_keys = list(backend.list(f"{agent}runs/{run_id}."))
    assert [k for k in run_keys if ".c" in k.rsplit("/", 1)[1]] == [
        f"{agent}runs/{run_id}.c0001.json"
    ]
    kinds = [json.loads(backend.get(k))["type"] for k in run_keys if ".e" in k.rsplit("/", 1)[1]]
    assert kinds.count("claimed") == 1 and kinds.count("succeeded") == 1, kinds
    assert "failed" not in kinds, kinds
