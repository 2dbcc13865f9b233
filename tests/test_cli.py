"""The ``memfs`` command line, each command in its own process.

- a full session on ``--data``: agents create/ls/rm, put from a file and from stdin,
  ls -l / --depth 1 / --meta, cat of exact (non-ASCII) bytes and of PATH@N, put
  --if-match and --create, rm, mv, log / log PATH / log -p, show, diff V1 V2 and
  diff V1 (to the current content), versions, status and commit of hand edits,
  fsck, fsck --repair, reindex;
- the same through ``MEMFS_DATA``; ``--json`` and ``--data`` before or after the
  subcommand;
- ``--json`` on every command prints JSON with the documented fields;
- every command's ``--help`` exits 0 and shows an example;
- bad input exits with its code (2 invalid, 3 not found, 4 conflict, 5 precondition,
  6 too large), one ``memfs: …`` line on stderr, nothing on stdout, nothing changed.

Each command runs in a process of its own, with its own stdin/stdout/stderr, exit
status, environment and working folder. Most are forked from one process that imported
memfs once (tests/helpers/cli_zygote.py: ~100 commands in seconds rather than a
minute); some go through a fresh ``python -m memfs.cli`` every time (``real=True``),
and ``MEMFS_TEST_REAL_CLI=1`` sends every one there. Independent invocations run in
parallel batches.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memfs import cli
from memfs.canonical import layout
from memfs.core.store import Store

HELPERS = Path(__file__).resolve().parent / "helpers"
WAIT = 120  # seconds per command; generous for a loaded machine

AGENT_FIELDS = {"agentId", "name", "memoryStoreId", "createdAt", "revision"}
LISTING_FIELDS = {"path", "bytes", "contentSha256", "description", "version", "updatedAt"}
MEMORY_FIELDS = LISTING_FIELDS | {"content", "metadata", "createdAt"}
VERSION_FIELDS = {
    "version",
    "operation",
    "contentSha256",
    "bytes",
    "revision",
    "validFrom",
    "validTo",
    "actor",
    "message",
}
COMMIT_FIELDS = {"revision", "timestamp", "actor", "message", "changes"}
FSCK_FIELDS = {"ok", "agents", "commits", "objects", "damaged", "derived", "repaired"}

NOTE = (
    "---\ndescription: Naming rules\nkind: convention\n---\n"
    "# Nommage — 命名 😀\n\nUse snake_case.\n"
).encode()
NOTE_2 = NOTE.replace(b"snake_case", b"kebab-case")


@dataclass
class Run:
    args: Sequence[str]
    code: int
    out: bytes
    err: bytes

    @property
    def text(self) -> str:
        return self.out.decode()

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    def json(self) -> Any:
        return json.loads(self.out)

    def __str__(self) -> str:
        return f"memfs {' '.join(self.args)} -> {self.code}\n{self.text}{self.err.decode()}"


def _env(data_env: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MEMFS_DATA"}
    if data_env is not None:
        env["MEMFS_DATA"] = str(data_env)
    return env


Call = Sequence[str] | tuple[Sequence[str], bytes]


def _split(call: Call) -> tuple[list[str], bytes]:
    if isinstance(call, tuple):
        return list(call[0]), call[1]
    return list(call), b""


def _real(calls: Sequence[Call], data_env: Path | None, cwd: Path | None) -> list[Run]:
    """``python -m memfs.cli ARGS`` for each call, all at the same time."""
    started = []
    for call in calls:
        args, stdin = _split(call)
        proc = subprocess.Popen(
            [sys.executable, "-m", "memfs.cli", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(data_env),
            cwd=cwd,
        )
        started.append((args, stdin, proc))
    runs = []
    for args, stdin, proc in started:
        with proc:
            out, err = proc.communicate(stdin, timeout=WAIT)
        runs.append(Run(args, proc.returncode, out, err))
    return runs


class Memfs:
    """Runs memfs command lines, each in its own process.

    By default through tests/helpers/cli_zygote.py (a forked child of a process that
    imported memfs once, so ~100 commands take seconds, not a minute); ``real=True``
    or ``MEMFS_TEST_REAL_CLI=1`` runs ``python -m memfs.cli`` itself.
    """

    def __init__(self) -> None:
        self.all_real = os.environ.get("MEMFS_TEST_REAL_CLI") == "1"
        self._zygote: subprocess.Popen[str] | None = None

    def close(self) -> None:
        if self._zygote is not None:
            with self._zygote as proc:
                assert proc.stdin is not None
                proc.stdin.close()
                proc.wait(timeout=WAIT)

    def _forked(self, calls: Sequence[Call], data_env: Path | None, cwd: Path | None) -> list[Run]:
        if self._zygote is None:
            self._zygote = subprocess.Popen(
                [sys.executable, str(HELPERS / "cli_zygote.py")],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=_env(None),
            )
        assert self._zygote.stdin is not None and self._zygote.stdout is not None
        env = {"MEMFS_DATA": str(data_env)} if data_env is not None else {}
        request = []
        for call in calls:
            args, stdin = _split(call)
            request.append(
                {
                    "args": args,
                    "stdin": base64.b64encode(stdin).decode(),
                    "env": env,
                    "cwd": str(cwd) if cwd else None,
                }
            )
        self._zygote.stdin.write(json.dumps({"calls": request}) + "\n")
        self._zygote.stdin.flush()
        answer = json.loads(self._zygote.stdout.readline())
        return [
            Run(
                _split(call)[0],
                result["code"],
                base64.b64decode(result["out"]),
                base64.b64decode(result["err"]),
            )
            for call, result in zip(calls, answer["results"], strict=True)
        ]

    def many(
        self,
        calls: Sequence[Call],
        *,
        data_env: Path | None = None,
        cwd: Path | None = None,
        real: bool = False,
    ) -> list[Run]:
        """Run independent (read-only or failing) invocations at the same time."""
        if real or self.all_real:
            return _real(calls, data_env, cwd)
        return self._forked(calls, data_env, cwd)

    def __call__(
        self,
        *args: str,
        stdin: bytes = b"",
        data_env: Path | None = None,
        cwd: Path | None = None,
        real: bool = False,
    ) -> Run:
        [run] = self.many([(args, stdin)], data_env=data_env, cwd=cwd, real=real)
        return run

    def ok(
        self, *args: str, stdin: bytes = b"", data_env: Path | None = None, real: bool = False
    ) -> Run:
        run = self(*args, stdin=stdin, data_env=data_env, real=real)
        assert run.code == 0 and run.err == b"", str(run)
        return run

    def all_ok(self, calls: Sequence[Call], *, real: bool = False) -> list[Run]:
        runs = self.many(calls, real=real)
        for run in runs:
            assert run.code == 0 and run.err == b"", str(run)
        return runs


@pytest.fixture(scope="module")
def memfs() -> Iterator[Memfs]:
    runner = Memfs()
    try:
        yield runner
    finally:
        runner.close()


def _state(data: Path) -> dict[str, str]:
    """Every file of the data folder but the index, by content hash, plus revisions."""
    state = {
        str(p.relative_to(data)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in data.rglob("*")
        if p.is_file() and not p.name.startswith("index.sqlite")
    }
    store = Store(data)
    try:
        for agent in store.iter_agents():
            state[f"revision of {agent.agent_id}"] = str(agent.revision)
    finally:
        store.close()
    return state


# ---- the full session ----------------------------------------------------------------


def test_full_session(memfs: Memfs, tmp_path: Path) -> None:
    ok, all_ok = memfs.ok, memfs.all_ok
    data = tmp_path / "data"
    d = ["--data", str(data)]
    tree = layout.worktree_root(data, "demo")

    # Agents.
    created = memfs(*d, "agents", "create", "demo", "--name", "Demo agent", real=True)
    assert created.code == 0 and created.text == "created agent demo\n"
    assert created.err.decode() == f"memfs: creating data folder {data}\n"  # said once
    created = ok("--json", *d, "agents", "create", "users/alice/assistant").json()
    assert set(created) >= AGENT_FIELDS
    assert created["agentId"] == "users/alice/assistant" and created["revision"] == 0
    ok(*d, "agents", "create", "tmp/gone")
    listed, long, prefixed = all_ok(
        [[*d, "agents", "ls"], [*d, "agents", "ls", "-l"], [*d, "agents", "ls", "users"]]
    )
    assert listed.lines == ["demo", "tmp/gone", "users/alice/assistant"]
    assert long.lines[0] == "demo  r0  Demo agent"
    assert prefixed.lines == ["users/alice/assistant"]
    assert ok(*d, "agents", "rm", "tmp/gone", "--yes").text == "erased agent tmp/gone\n"
    assert ok(*d, "agents", "ls").lines == ["demo", "users/alice/assistant"]
    assert not layout.agent_folder(data, "tmp/gone").exists()

    # Writing: from a file, from stdin ('-' and nothing), a blob-sized one.
    note = tmp_path / "note.md"
    note.write_bytes(NOTE)
    put = ok(*d, "put", "demo", "conventions/naming.md", str(note), "-m", "first rules", real=True)
    sha1 = hashlib.sha256(NOTE).hexdigest()
    assert put.text == f"created /memories/conventions/naming.md v1 {sha1[:12]} (revision 1)\n"
    put = ok(*d, "put", "demo", "/memories/inbox/todo.md", "-", stdin=b"- buy milk\n")
    assert put.text.startswith("created /memories/inbox/todo.md v1 ")
    ok(*d, "put", "demo", "inbox/later.md", stdin=b"later\n")
    big = ("# big\n" + "lorem ipsum dolor sit amet\n" * 800).encode()  # > 16 KiB: a blob
    (tmp_path / "big.md").write_bytes(big)
    put_json = ok("--json", *d, "put", "demo", "big.md", str(tmp_path / "big.md")).json()
    assert set(put_json) >= LISTING_FIELDS | {"revision", "result"}
    assert put_json["result"] == "created" and put_json["revision"] == 4
    assert put_json["contentSha256"] == hashlib.sha256(big).hexdigest()
    assert put_json["bytes"] == len(big)
    again = ok(*d, "put", "demo", "big.md", str(tmp_path / "big.md"))
    assert again.text.startswith("unchanged /memories/big.md v1 ")  # identical: no commit

    # Reading: ls in all its forms, cat of exact bytes.
    runs = all_ok(
        [
            [*d, "ls", "demo"],
            [*d, "ls", "demo", "-l"],
            [*d, "ls", "demo", "--depth", "1"],
            [*d, "ls", "demo", "inbox"],
            [*d, "ls", "demo", "--meta", "kind=convention"],
            [*d, "ls", "demo", "--json", "--depth", "1"],
            [*d, "cat", "demo", "conventions/naming.md"],
            [*d, "cat", "demo", "/memories/big.md"],
            [*d, "--json", "cat", "demo", "conventions/naming.md"],
        ]
    )
    ls, ls_long, ls_top, ls_inbox, ls_meta, ls_json, cat, cat_big, cat_json = runs
    assert ls.lines == [
        "/memories/big.md",
        "/memories/conventions/naming.md",
        "/memories/inbox/later.md",
        "/memories/inbox/todo.md",
    ]
    naming_line = ls_long.lines[1]
    assert naming_line.split() == [
        "v1",
        str(len(NOTE)),
        sha1[:12],
        "/memories/conventions/naming.md",
        "Naming",
        "rules",
    ]
    assert ls_top.lines == ["/memories/big.md", "/memories/conventions/", "/memories/inbox/"]
    assert ls_inbox.lines == ["/memories/inbox/later.md", "/memories/inbox/todo.md"]
    assert ls_meta.lines == ["/memories/conventions/naming.md"]
    top = ls_json.json()
    assert [m["path"] for m in top["memories"]] == ["/memories/big.md"]
    assert top["folders"] == ["/memories/conventions", "/memories/inbox"]
    assert all(set(m) >= LISTING_FIELDS for m in top["memories"])
    assert cat.out == NOTE
    assert cat_big.out == big
    memory = cat_json.json()
    assert set(memory) >= MEMORY_FIELDS
    assert memory["content"].encode() == NOTE and memory["contentSha256"] == sha1
    assert memory["description"] == "Naming rules"
    assert memory["metadata"] == {"kind": "convention"}

    # Preconditions: --if-match the current sha updates; --create only creates.
    (tmp_path / "note2.md").write_bytes(NOTE_2)
    put = ok(*d, "put", "demo", "conventions/naming.md", str(tmp_path / "note2.md"))
    assert put.text.startswith("updated ")  # without --if-match: last writer wins
    ok(*d, "put", "demo", "conventions/naming.md", str(note))  # back to NOTE (v3)
    sha3 = sha1
    put = ok(*d, "put", "demo", "conventions/naming.md", "--if-match", sha3, stdin=NOTE_2)
    assert put.text.startswith("updated /memories/conventions/naming.md v4 ")
    created_only = ok(*d, "put", "demo", "notes/new.md", "--create", stdin=b"new\n")
    assert created_only.text.startswith("created /memories/notes/new.md v1 ")

    # rm and mv.
    rm_json = ok(*d, "--json", "rm", "demo", "inbox/later.md", "-m", "done").json()
    assert set(rm_json) >= {"revision"}
    mv = ok(*d, "mv", "demo", "inbox/todo.md", "archive/todo.md")
    assert mv.text.startswith("renamed /memories/inbox/todo.md -> /memories/archive/todo.md")
    mv_json = ok(*d, "mv", "demo", "notes/new.md", "notes/newer.md", "--json").json()
    assert set(mv_json) >= {"revision"}
    head = mv_json["revision"]
    assert head == 11

    # History.
    runs = all_ok(
        [
            [*d, "cat", "demo", "conventions/naming.md@1"],
            [*d, "cat", "demo", "conventions/naming.md@2"],
            [*d, "cat", "demo", "conventions/naming.md"],
            [*d, "cat", "demo", "archive/todo.md"],
            [*d, "log", "demo"],
            [*d, "log", "demo", "conventions/naming.md"],
            [*d, "log", "demo", "-p"],
            [*d, "log", "demo", "--json"],
            [*d, "show", "demo", "1"],
            [*d, "show", "demo", "10", "--json"],
            [*d, "diff", "demo", "conventions/naming.md", "1", "2"],
            [*d, "diff", "demo", "conventions/naming.md", "1"],
            [*d, "--json", "diff", "demo", "conventions/naming.md", "1", "2"],
            [*d, "versions", "demo", "archive/todo.md"],
            [*d, "versions", "demo", "inbox/todo.md", "--json"],
            [*d, "cat", "demo", "inbox/todo.md@1"],
        ]
    )
    (v1, v2, current, moved, log, log_path, log_p, log_json, show, show_json) = runs[:10]
    diff12, diff1, diff_json, versions_moved, versions_json, cat_old = runs[10:]
    assert v1.out == NOTE and v2.out == NOTE_2 and current.out == NOTE_2
    assert moved.out == b"- buy milk\n"
    assert cat_old.out == b"- buy milk\n"
    revisions = [int(line.split()[1]) for line in log.lines if line.startswith("revision ")]
    assert revisions == list(range(head, 0, -1))
    assert log.lines[:2] == [f"revision {head}", "Actor: " + log.lines[1].split(": ", 1)[1]]
    assert "    first rules" in log.lines
    path_revisions = [
        int(line.split()[1]) for line in log_path.lines if line.startswith("revision ")
    ]
    assert path_revisions == [7, 6, 5, 1]
    assert "+++ b/memories/conventions/naming.md@v4" in log_p.lines
    assert "-Use snake_case." in log_p.lines and "+Use kebab-case." in log_p.lines
    commits = log_json.json()["commits"]
    assert [c["revision"] for c in commits] == list(range(head, 0, -1))
    assert all(set(c) >= COMMIT_FIELDS for c in commits)
    assert "    A /memories/conventions/naming.md v1" in show.lines
    assert "+# Nommage — 命名 😀" in show.lines
    shown = show_json.json()
    assert set(shown) >= COMMIT_FIELDS
    assert [(c["path"], c["operation"]) for c in shown["changes"]] == [
        ("/memories/inbox/todo.md", "renamed"),
        ("/memories/archive/todo.md", "renamed"),
    ]
    assert [line for line in diff12.lines if line[:1] in "+-"] == [
        "--- a/memories/conventions/naming.md@v1",
        "+++ b/memories/conventions/naming.md@v2",
        "-Use snake_case.",
        "+Use kebab-case.",
    ]
    assert "+++ b/memories/conventions/naming.md@current" in diff1.lines
    assert "+Use kebab-case." in diff1.lines
    diff_doc = diff_json.json()
    assert set(diff_doc) >= {"path", "from", "to", "diff"} and diff_doc["diff"] == diff12.text
    assert [line.split()[:2] for line in versions_moved.lines] == [["v1", "renamed"]]
    versions = versions_json.json()["versions"]
    assert all(set(v) >= VERSION_FIELDS for v in versions)
    assert [(v["version"], v["operation"]) for v in versions] == [(1, "created"), (2, "renamed")]
    assert versions[0]["validTo"] == versions[1]["validFrom"]

    # Hand edits: status, fsck reports them as uncommitted, commit records them.
    status, status_json = all_ok([[*d, "status", "demo"], [*d, "status", "demo", "--json"]])
    assert status.lines == ["nothing to commit, working tree matches the head"]
    assert status_json.json() == {"changes": []}
    hand = NOTE_2 + "Edited by hand ✍\n".encode()
    (tree / "conventions" / "naming.md").write_bytes(hand)
    (tree / "notes" / "hand.md").write_bytes(b"# written in an editor\n")
    (tree / "big.md").unlink()
    status, status_json, fsck = all_ok(
        [[*d, "status", "demo"], [*d, "--json", "status", "demo"], [*d, "fsck"]]
    )
    assert status.lines == [
        "  deleted: /memories/big.md",
        " modified: /memories/conventions/naming.md",
        "    added: /memories/notes/hand.md",
    ]
    changes = status_json.json()["changes"]
    assert all(set(c) >= {"state", "path", "reason"} for c in changes)
    assert [c["state"] for c in changes] == ["deleted", "modified", "added"]
    assert fsck.lines[-1] == "ok"
    assert sum(line.startswith("uncommitted ") for line in fsck.lines) == 3
    committed = ok(*d, "commit", "demo", "-m", "hand edits", "--json").json()
    assert committed == {"revision": head + 1, "changes": 3}
    head += 1
    status, cat_hand, nothing, log1 = all_ok(
        [
            [*d, "status", "demo"],
            [*d, "cat", "demo", "conventions/naming.md"],
            [*d, "commit", "demo"],
            [*d, "log", "demo", "-n", "1"],
        ]
    )
    assert status.lines == ["nothing to commit, working tree matches the head"]
    assert cat_hand.out == hand
    assert nothing.lines == ["nothing to commit"]
    assert log1.lines[0] == f"revision {head}" and "    hand edits" in log1.lines

    # fsck and repair of derived state: a stale working-tree file, a lost index.
    (tree / "conventions" / "naming.md").write_bytes(NOTE)  # an older version memfs wrote
    fsck = memfs(*d, "fsck")
    assert fsck.code == 1 and "working tree holds an older version" in fsck.text, str(fsck)
    repaired = ok(*d, "fsck", "--repair")
    assert any(line.startswith("repaired ") for line in repaired.lines)
    assert (tree / "conventions" / "naming.md").read_bytes() == hand
    for name in ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm"):
        (data / name).unlink(missing_ok=True)
    # A lost index is rebuilt from the log by the first command, which says so.
    fsck = memfs(*d, "--json", "fsck")
    assert fsck.code == 0, str(fsck)
    assert "rebuilding the index from the log" in fsck.err.decode()
    report = fsck.json()
    assert set(report) >= FSCK_FIELDS and report["ok"] is True and report["derived"] == []
    repaired = ok(*d, "fsck", "--repair", "--json").json()
    assert repaired["ok"] is True and repaired["repaired"] == []
    assert ok(*d, "reindex").text == f"reindexed 2 agent(s), {head} commit(s)\n"
    reindexed, fsck, long, cat_hand = all_ok(
        [
            [*d, "reindex", "--json"],
            [*d, "fsck", "--json"],
            [*d, "agents", "ls", "-l", "--json"],
            [*d, "cat", "demo", "conventions/naming.md"],
        ]
    )
    assert reindexed.json() == {"agents": 2, "commits": head, "damaged": []}
    report = fsck.json()
    assert report["ok"] is True and report["derived"] == [] and report["commits"] == head
    agents = long.json()["agents"]
    assert all(set(a) >= AGENT_FIELDS for a in agents)
    assert [(a["agentId"], a["revision"]) for a in agents] == [
        ("demo", head),
        ("users/alice/assistant", 0),
    ]
    assert cat_hand.out == hand

    erased = ok(*d, "agents", "rm", "users/alice/assistant", "--yes", "--json").json()
    assert erased == {"erased": "users/alice/assistant"}
    assert ok(*d, "agents", "ls").lines == ["demo"]


# ---- MEMFS_DATA and where the global options go ------------------------------------


def test_memfs_data_and_option_positions(memfs: Memfs, tmp_path: Path) -> None:
    ok, all_ok = memfs.ok, memfs.all_ok
    data, other = tmp_path / "data", tmp_path / "other"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    made = memfs("agents", "create", "env/agent", data_env=data, real=True)
    assert made.code == 0 and made.err.decode() == f"memfs: creating data folder {data}\n"
    ok("put", "env/agent", "a.md", "-", stdin=b"# via MEMFS_DATA\n", data_env=data, real=True)
    assert (layout.worktree_root(data, "env/agent") / "a.md").read_bytes() == b"# via MEMFS_DATA\n"
    # --data wins over MEMFS_DATA.
    assert memfs("--data", str(other), "agents", "create", "other/agent", data_env=data).code == 0
    from_env, overridden, neither = memfs.many(
        [["agents", "ls"], ["agents", "ls", "--data", str(other)]],
        data_env=data,
        cwd=cwd,
        real=True,
    ) + memfs.many([["agents", "ls"]], cwd=cwd, real=True)
    assert from_env.lines == ["env/agent"]
    assert overridden.lines == ["other/agent"]
    # Without either, ./data of the working folder, which 'ls' does not make up.
    assert neither.code == 2 and neither.lines == []
    assert neither.err.decode().startswith("memfs: data folder data does not exist;")
    assert os.listdir(cwd) == []

    d = str(data)
    variants = all_ok(
        [
            ["--json", "--data", d, "agents", "ls"],
            ["agents", "ls", "--json", "--data", d],
            ["--data", d, "agents", "ls", "--json"],
            ["--json", "agents", "ls", "--data", d],
            ["--data", d, "--json", "cat", "env/agent", "a.md"],
            ["cat", "env/agent", "a.md", "--json", "--data", d],
            ["cat", "--data", d, "env/agent", "--json", "a.md"],
        ]
    )
    ids = [[a["agentId"] for a in run.json()["agents"]] for run in variants[:4]]
    assert ids == [["env/agent"]] * 4
    cats = [run.json() for run in variants[4:]]
    assert all(c == cats[0] for c in cats) and cats[0]["content"] == "# via MEMFS_DATA\n"


# ---- --help everywhere ---------------------------------------------------------------


def _commands(
    parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[str, ...]]:
    yield prefix
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*prefix, name))


def test_every_command_has_help_with_an_example(
    memfs: Memfs, capsys: pytest.CaptureFixture[str]
) -> None:
    commands = list(_commands(cli.build_parser()))
    assert ("agents", "create") in commands and ("fsck",) in commands
    for command in commands:
        with pytest.raises(SystemExit) as exit_info:
            cli.main([*command, "--help"])
        out = capsys.readouterr().out
        assert exit_info.value.code == 0, command
        assert "example:" in out, f"memfs {' '.join(command)} --help has no example"
    # The same through real processes, for a few.
    for run in memfs.many([["--help"], ["put", "--help"], ["agents", "rm", "--help"]], real=True):
        assert run.code == 0 and "example:" in run.text and run.err == b"", str(run)


# ---- bad input -------------------------------------------------------------------


def test_bad_input_is_refused_with_one_line_and_changes_nothing(
    memfs: Memfs, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    store = Store(data)
    try:
        store.create_agent("demo")
        store.write("demo", "/memories/notes/a.md", b"# a\n", actor="t")
        store.write("demo", "/memories/notes/b.md", b"# b\n", actor="t")
    finally:
        store.close()
    before = _state(data)
    d = ["--data", str(data)]
    bad_yaml = b"---\ntitle: ok\nkey: value: other\n---\nbody\n"
    cases: list[tuple[list[str], bytes, int, str]] = [
        (["agents", "create", "bad id!"], b"", 2, "invalid agent id"),
        (["agents", "create", "a//b"], b"", 2, "invalid agent id"),
        (["put", "demo", "../x.md"], b"x\n", 2, "'..'"),
        (["put", "demo", "/memories/../x.md"], b"x\n", 2, "'..'"),
        (["put", "demo", "notes\\x.md"], b"x\n", 2, "backslash"),
        (["put", "demo", "/etc/passwd"], b"x\n", 2, "/memories/"),
        (["put", "ghost", "x.md"], b"x\n", 3, "memfs agents create ghost"),
        (["log", "ghost"], b"", 3, "memfs agents create ghost"),
        (["put", "demo", "bad.md"], bad_yaml, 2, "line 3"),
        (["put", "demo", "bin.md"], b"# caf\xe9\n", 2, "UTF-8"),
        (["put", "demo", "big.md"], b"x" * (100 * 1024 + 1), 6, "limit"),
        (["put", "demo", "notes/a.md", "--if-match", "0" * 64], b"new\n", 5, "notes/a.md"),
        (["put", "demo", "notes/a.md", "--if-match", "nothex"], b"new\n", 2, "If-Match"),
        (["put", "demo", "notes/a.md", "--create"], b"new\n", 5, "already exists"),
        (["rm", "demo", "notes/a.md", "--if-match", "f" * 64], b"", 5, "notes/a.md"),
        (["put", "demo", "notes/a.md", str(tmp_path / "missing.md")], b"", 2, "missing.md"),
        (["put", "demo"], b"", 2, "required"),
        (["put", "demo", "notes/a.md/x.md"], b"x\n", 4, "folder"),
        (["mv", "demo", "notes/a.md", "notes/b.md"], b"", 4, "already exists"),
        (["rm", "demo", "notes/none.md"], b"", 3, "does not exist"),
        (["cat", "demo", "notes/a.md@9"], b"", 3, "version 9"),
        (["cat", "demo", "notes/a.md@0"], b"", 2, "version"),
        (["cat", "demo", "notes/none.md"], b"", 3, "does not exist"),
        (["diff", "demo", "notes/a.md", "9"], b"", 3, "version 9"),
        (["diff", "demo", "notes/a.md", "1", "7"], b"", 3, "version 7"),
        (["versions", "demo", "notes/none.md"], b"", 3, "no history"),
        (["show", "demo", "99"], b"", 3, "revision 99"),
        (["show", "demo", "one"], b"", 2, "integer >= 1"),
        (["show", "demo", "0"], b"", 2, "integer >= 1"),
        (["log", "demo", "-n", "0"], b"", 2, "integer >= 1"),
        (["runs", "ls", "demo", "--limit", "-5"], b"", 2, "integer >= 1"),
        (["deliver", "demo", "t", "--url", "localhost:8750"], b"{}", 2, "http://"),
        (["agents", "rm", "demo"], b"", 2, "--yes"),
        (["agents", "rm", "ghost", "--yes"], b"", 3, "does not exist"),
        (["agents", "create", "demo"], b"", 4, "already exists"),
        (["ls", "demo", "--depth", "2"], b"", 2, "--depth"),
        (["ls", "demo", "--meta", "novalue"], b"", 2, "KEY=VALUE"),
        (["ls", "demo", "../up"], b"", 2, "'..'"),
        (["--json", "put", "demo", "../x.md"], b"x\n", 2, "'..'"),
        (["frobnicate"], b"", 2, "invalid choice"),
        (["inspect", "demo", "--as-of", "yesterday"], b"", 2, "RFC 3339"),
        (["inspect", "demo", "--scope", "demo"], b"", 2, "AGENT or --scope"),
        (["inspect"], b"", 2, "AGENT or --scope"),
        (["export", "--scope", "demo", "--format", "git"], b"", 2, "one agent"),
        (["import", str(tmp_path / "missing.jsonl")], b"", 2, "missing.jsonl"),
        (["import"], b"not json\n", 2, "line 1"),
        (["keys", "create", "app", "--scope", "memories:rule"], b"", 2, "unknown scope"),
        (["keys", "create", "app"], b"", 2, "--scope"),
        (["keys", "create", "bad id", "--scope", "inspect"], b"", 2, "keyId"),
        (["keys", "revoke", "ghost"], b"", 3, "ghost"),
        (["backup", str(data)], b"", 2, "not empty"),
        (["backup", str(data / "agents" / "copy")], b"", 2, "inside the data folder"),
        (["restore", str(data), "--data", str(tmp_path / "r")], b"", 2, "memfs-backup.json"),
        (["restore", str(tmp_path), "--data", str(data)], b"", 2, "memfs-backup.json"),
    ]
    runs = memfs.many([([*d, *args], stdin) for args, stdin, _code, _text in cases])
    for run, (_args, _stdin, code, text) in zip(runs, cases, strict=True):
        assert run.code == code, str(run)
        assert run.out == b"", str(run)
        lines = run.err.decode().splitlines()
        assert len(lines) == 1 and lines[0].startswith("memfs: "), str(run)
        assert text in lines[0], str(run)
    # A few of them through the real ``python -m memfs.cli`` as well.
    real = [0, 6, 8, 16]
    runs = memfs.many([([*d, *cases[i][0]], cases[i][1]) for i in real], real=True)
    for run, i in zip(runs, real, strict=True):
        assert run.code == cases[i][2] and run.out == b"", str(run)
        assert len(run.err.splitlines()) == 1 and run.err.startswith(b"memfs: "), str(run)
    assert _state(data) == before


# ---- option positions, a missing data folder, commit refusals ----------------------------


def test_options_may_come_before_or_after_the_file(memfs: Memfs, tmp_path: Path) -> None:
    data = tmp_path / "data"
    d = ["--data", str(data)]
    memfs(*d, "agents", "create", "demo")
    first, second = tmp_path / "first.md", tmp_path / "second.md"
    first.write_bytes(b"# one\n")
    second.write_bytes(b"# two\n")
    memfs.ok(*d, "put", "demo", "notes/a.md", str(first), "-m", "after the file")
    memfs.ok(*d, "put", "demo", "notes/a.md", "-m", "before the file", str(second))
    memfs.ok("put", "demo", "notes/b.md", "--create", str(first), "-m", "both", *d)
    log = memfs.ok(*d, "--json", "log", "demo").json()
    assert [c["message"] for c in log["commits"]] == ["both", "before the file", "after the file"]
    assert memfs.ok(*d, "cat", "demo", "notes/a.md").out == b"# two\n"
    assert memfs.ok(*d, "ls", "demo", "-l", "notes").lines[0].endswith("/memories/notes/a.md")


def test_a_missing_data_folder_is_refused_not_made_up(memfs: Memfs, tmp_path: Path) -> None:
    missing = tmp_path / "typo"
    d = ["--data", str(missing)]
    commands: list[list[str]] = [
        ["ls", "demo"],
        ["cat", "demo", "a.md"],
        ["put", "demo", "a.md", "-"],
        ["rm", "demo", "a.md"],
        ["log", "demo"],
        ["versions", "demo", "a.md"],
        ["status", "demo"],
        ["commit", "demo"],
        ["fsck"],
        ["fsck", "--repair"],
        ["reindex"],
        ["agents", "ls"],
        ["agents", "rm", "demo", "--yes"],
        ["inspect", "demo"],
        ["export", "demo"],
        ["triggers", "ls", "demo"],
        ["runs", "ls", "demo"],
        ["keys", "ls"],
        ["keys", "create", "app", "--scope", "inspect"],
        ["keys", "rotate-admin"],
        ["backup", str(tmp_path / "backup")],
    ]
    runs = memfs.many([([*d, *args], b"# x\n") for args in commands])
    for run in runs:
        assert run.code == 2 and run.out == b"", str(run)
        assert run.err.decode() == (
            f"memfs: data folder {missing} does not exist; point --data (or MEMFS_DATA) at one, "
            "or make one with 'memfs agents create AGENT' or 'memfs serve'\n"
        ), str(run)
    assert not missing.exists() and not (tmp_path / "backup").exists()
    # The commands that make state from nothing say that they made the folder.
    made = memfs(*d, "import", stdin=b"")
    assert made.code == 0 and made.err.decode() == f"memfs: creating data folder {missing}\n"
    assert missing.is_dir()
    assert memfs.ok(*d, "agents", "ls").lines == []  # now it exists: nothing said


def test_commit_refusals_name_the_file(memfs: Memfs, tmp_path: Path) -> None:
    data = tmp_path / "data"
    d = ["--data", str(data)]
    memfs(*d, "agents", "create", "demo")
    tree = layout.worktree_root(data, "demo")
    (tree / "notes").mkdir()
    (tree / "notes" / "ok.md").write_bytes(b"# fine\n")
    (tree / "notes" / "yaml.md").write_bytes(b"---\nkey: [unclosed\n---\nbody\n")
    (tree / "notes" / "big.md").write_bytes(b"x" * (100 * 1024 + 1))
    (tree / "notes" / "latin1.md").write_bytes(b"caf\xe9\n")
    refused = memfs(*d, "commit", "demo", "-m", "hand edits")
    assert refused.code == 6, str(refused)
    assert refused.err.decode().startswith("memfs: can't commit /memories/notes/big.md: "), str(
        refused
    )
    (tree / "notes" / "big.md").unlink()
    refused = memfs(*d, "commit", "demo")
    assert refused.code == 2 and "can't commit /memories/notes/latin1.md: " in refused.err.decode()
    assert "UTF-8" in refused.err.decode()
    (tree / "notes" / "latin1.md").unlink()
    refused = memfs(*d, "commit", "demo")
    assert refused.code == 2, str(refused)
    assert "can't commit /memories/notes/yaml.md: invalid YAML" in refused.err.decode()
    assert memfs.ok(*d, "--json", "log", "demo").json()["commits"] == []  # nothing committed
