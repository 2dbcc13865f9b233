"""Races between real processes on one data folder.

The racers of a round are separate processes released at the same instant: memfs
command lines forked by tests/helpers/cli_zygote.py (``MEMFS_TEST_REAL_CLI=1``: fresh
``python`` processes behind the file barrier of tests/helpers/barrier_run.py), and
Store writer loops behind that barrier.

(a) 8 ``memfs put --if-match <same sha>`` per round, 5 rounds: exactly one wins, the
    other 7 exit 5 with one line on stderr; the log has no gap or duplicate and the
    memory has one version per round plus the first.
(b) 4 processes each writing 25 paths of one agent: every write is there with its
    content, revisions are 1..100, ``memfs fsck`` is ok.
(c) 2 ``memfs agents create`` of one id, 3 rounds: exactly one exits 0, the other 4.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from memfs.canonical import layout
from memfs.core.store import Store
from segment_files import sound_frames

HELPERS = Path(__file__).resolve().parent / "helpers"
WAIT = 180  # seconds; generous for a loaded 2-core machine


def _helper(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"memfs_test_{name}", HELPERS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _race(barrier: Path, commands: list[list[str]]) -> list[tuple[int, str, str]]:
    """Start every command, release them together, return (code, stdout, stderr) each."""
    barrier.mkdir(parents=True)
    procs = [
        subprocess.Popen(
            [sys.executable, str(HELPERS / "barrier_run.py"), str(barrier), str(n), *command],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, command in enumerate(commands)
    ]
    try:
        deadline = time.monotonic() + WAIT
        while len(list(barrier.glob("ready-*"))) < len(procs):
            assert time.monotonic() < deadline, "racers never got ready"
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            time.sleep(0.005)
        (barrier / "go").touch()
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=WAIT)
            results.append((proc.returncode, out, err))
        return results
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def _race_cli(barrier: Path, commands: list[list[str]]) -> list[tuple[int, str, str]]:
    """Race memfs command lines, each in its own process, released together.

    They are forked by tests/helpers/cli_zygote.py (memfs imported once, so a round
    of 8 costs ~0.1 s of CPU rather than ~2.5 s); ``MEMFS_TEST_REAL_CLI=1`` runs each
    through a fresh interpreter behind a file barrier instead.
    """
    if os.environ.get("MEMFS_TEST_REAL_CLI") == "1":
        return _race(barrier, [["cli", *command] for command in commands])
    calls = [{"args": c, "stdin": "", "env": {}, "cwd": None} for c in commands]
    with subprocess.Popen(
        [sys.executable, str(HELPERS / "cli_zygote.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as zygote:
        out, _ = zygote.communicate(json.dumps({"calls": calls}) + "\n", timeout=WAIT)
    assert zygote.returncode == 0
    results = json.loads(out)["results"]
    return [
        (r["code"], base64.b64decode(r["out"]).decode(), base64.b64decode(r["err"]).decode())
        for r in results
    ]


def _log(data: Path, agent: str) -> list[dict[str, Any]]:
    """The log entries as the segment files hold them, in the order they were appended;
    asserts 1..N without gap or duplicate, each frame whole and its checksum right."""
    stored = sound_frames(data, agent)
    docs = [json.loads(payload) for _revision, payload in stored]
    assert [r for r, _p in stored] == [d["revision"] for d in docs]
    assert [d["revision"] for d in docs] == list(range(1, len(docs) + 1))
    return docs


def _fsck_ok(data: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "memfs.cli", "--data", str(data), "fsck", "--json"],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is True and report["derived"] == [] and report["damaged"] == []
    assert report["uncommitted"] == []


def test_if_match_race_has_exactly_one_winner(tmp_path: Path) -> None:
    data, agent, path = tmp_path / "data", "race/put", "/memories/race.md"
    rounds, racers = 5, 8
    store = Store(data)
    try:
        store.create_agent(agent)
        sha = store.write(agent, path, b"# round 0\n", actor="t").memory.sha256
    finally:
        store.close()
    for round_no in range(1, rounds + 1):
        files = []
        for n in range(racers):
            file = tmp_path / f"r{round_no}-{n}.md"
            file.write_bytes(f"# round {round_no} by racer {n}\n".encode())
            files.append(file)
        results = _race_cli(
            tmp_path / f"barrier-{round_no}",
            [["--data", str(data), "put", agent, path, str(f), "--if-match", sha] for f in files],
        )
        codes = [code for code, _out, _err in results]
        assert sorted(codes) == [0] + [5] * (racers - 1), results
        for code, out, err in results:
            if code == 0:
                assert err == "" and out.startswith("updated /memories/race.md"), (out, err)
            else:
                assert out == "", out
                lines = err.splitlines()
                assert len(lines) == 1 and lines[0].startswith("memfs: "), err
        winner = files[codes.index(0)]
        sha = hashlib.sha256(winner.read_bytes()).hexdigest()
        store = Store(data)
        try:
            assert store.read(agent, path).sha256 == sha
        finally:
            store.close()

    docs = _log(data, agent)
    assert len(docs) == rounds + 1
    store = Store(data)
    try:
        versions = store.versions(agent, path)
        assert [v.version for v in versions] == list(range(1, rounds + 2))
        assert [v.revision for v in versions] == list(range(1, rounds + 2))
        assert versions[-1].sha256 == sha
    finally:
        store.close()
    _fsck_ok(data)


def test_concurrent_writers_on_one_agent(tmp_path: Path) -> None:
    data, agent = tmp_path / "data", "race/many"
    writers, per_writer = 4, 25
    content = _helper("barrier_run").content
    store = Store(data)
    try:
        store.create_agent(agent)
    finally:
        store.close()
    results = _race(
        tmp_path / "barrier",
        [["write", str(data), agent, f"w{k}", str(per_writer)] for k in range(writers)],
    )
    acks: list[dict[str, Any]] = []
    for code, out, err in results:
        assert code == 0, err
        lines = [json.loads(line) for line in out.splitlines()]
        assert len(lines) == per_writer
        acks.extend(lines)

    total = writers * per_writer
    assert sorted(a["rev"] for a in acks) == list(range(1, total + 1))
    docs = _log(data, agent)
    assert len(docs) == total
    for ack in acks:
        [change] = docs[ack["rev"] - 1]["changes"]
        assert (change["path"], change["after"]) == (ack["path"], ack["sha"])
    store = Store(data)
    try:
        assert store.get_agent(agent).revision == total
        page, more = store.list_memories(agent, limit=1000)
        assert not more and len(page) == total
        for k in range(writers):
            for i in range(per_writer):
                path = f"/memories/w{k}/n{i}.md"
                expected = content(f"w{k}", i)
                assert store.read(agent, path).content == expected
                file = layout.worktree_root(data, agent) / f"w{k}" / f"n{i}.md"
                assert file.read_bytes() == expected
    finally:
        store.close()
    _fsck_ok(data)


def test_racing_agent_creation_has_one_winner(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for round_no in range(3):
        agent = f"race/create-{round_no}"
        results = _race_cli(
            tmp_path / f"barrier-{round_no}",
            [["--data", str(data), "agents", "create", agent] for _ in range(2)],
        )
        codes = sorted(code for code, _out, _err in results)
        assert codes == [0, 4], results
        made = f"memfs: creating data folder {data}\n"
        for code, out, err in results:
            if round_no == 0:  # either or both may find the folder missing, and say so
                err = err.removeprefix(made)
            if code == 4:
                assert out == "" and len(err.splitlines()) == 1, (out, err)
                assert err.startswith("memfs: ") and "already exists" in err
            else:
                assert out == f"created agent {agent}\n" and err == ""
    store = Store(data)
    try:
        assert [a.agent_id for a in store.iter_agents()] == [f"race/create-{n}" for n in range(3)]
    finally:
        store.close()
    _fsck_ok(data)


def test_processes_opening_a_new_data_folder_together_all_succeed(tmp_path: Path) -> None:
    """The first opening switches the new index to WAL, which needs it exclusively;
    processes that open it at the same moment wait instead of failing with "locked"."""
    code = (
        "import pathlib, sys; from memfs.core.store import Store; Store(pathlib.Path(sys.argv[1]))"
    )
    for round_ in range(8):
        data = tmp_path / f"data{round_}"
        children = [
            subprocess.Popen(
                [sys.executable, "-c", code, str(data)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(4)
        ]
        results = [
            (child.wait(timeout=120), child.stderr.read() if child.stderr else b"")
            for child in children
        ]
        for child in children:
            for stream in (child.stdout, child.stderr):
                if stream:
                    stream.close()
        assert [code for code, _ in results] == [0] * 4, results
