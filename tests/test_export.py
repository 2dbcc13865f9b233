"""``memfs export`` / ``memfs import`` and ``--format git``, through the real CLI.

The source store gets a varied history in-process (creates, edits, deletes, renames,
an agent rename, a blob-sized memory, Unicode paths, several agents); everything
after that runs as ``python -m memfs.cli`` processes, and the git side with the
real ``git`` binary.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memfs.core.store import Agent, Delete, Put, Store
from memfs.domain.commits import parse_ts
from memfs.domain.paths import agent_dir_name

ALICE = "users/alice"
ALICE_X = "users/alice/x"
OUTSIDE = ("users/alicex", "users/bob")
BIG = "".join(f"line {i}: the user prefers tabs ✓\n" for i in range(700)).encode()  # > 16 KiB


def cli(*args: str, data: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "memfs.cli", *args, "--data", str(data)],
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
        env={k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")},
    )


def ok(*args: str, data: Path, stdin: bytes | None = None) -> bytes:
    done = cli(*args, data=data, stdin=stdin)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


def populate(data: Path) -> None:
    store = Store(data)
    try:
        store.create_agent(ALICE, "Alice")
        a = "/memories/notes/a.md"
        store.write(
            ALICE,
            a,
            b"---\ndescription: first\ntopic: x\n---\n# A\none\n",
            actor="alice",
            message="first note",
        )
        store.write(
            ALICE, a, b"---\ndescription: first\ntopic: y\n---\n# A\none\ntwo\n", actor="key:bot"
        )
        store.write(
            ALICE,
            "/memories/ünï/日本.md",
            "# 日本\nsee [[notes/a]]\n".encode(),
            actor="subject:alice b",
            message="unicode ✓\n\nwith a body",
        )
        store.write(ALICE, "/memories/big.md", BIG, actor="alice", message="big")
        store.write(ALICE, "/memories/empty.md", b"", actor="alice", message="empty")
        store.apply(
            ALICE,
            [
                Put("/memories/b.md", b"# B\n"),
                Put("/memories/c d.md", b"# C with a space\n"),
                Delete("/memories/empty.md"),
            ],
            actor="alice",
            message="three at once",
        )
        store.rename(ALICE, a, "/memories/archive/a.md", actor="alice", message="archive it")
        store.rename_agent(ALICE, "Alice Two", actor="admin")
        store.write(ALICE, "/memories/big.md", BIG + b"more\n", actor="alice", message="bigger")
        store.delete(ALICE, "/memories/b.md", actor="alice", message="drop b")
        store.create_agent(ALICE_X)
        store.write(ALICE_X, "/memories/x.md", b"# x\n", actor="x", message="x1")
        store.write(ALICE_X, "/memories/x.md", b"# x2\n", actor="x", message="x2")
        for other in OUTSIDE:
            store.create_agent(other)
            store.write(other, "/memories/o.md", b"# other\n", actor="o", message="o")
    finally:
        store.close()


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("source") / "data"
    populate(data)
    return data


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path, with its bytes."""
    if not folder.exists():
        return {}
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def agent_folder(data: Path, agent_id: str) -> Path:
    return data / "agents" / agent_dir_name(agent_id)


def agents(data: Path) -> list[Agent]:
    store = Store(data)
    try:
        return store.iter_agents()
    finally:
        store.close()


def canonical(data: Path) -> dict[str, bytes]:
    """All canonical and working-tree files of every agent (no index, no key files)."""
    return tree(data / "agents")


def versions(data: Path, agent_id: str) -> dict[str, list[dict[str, Any]]]:
    store = Store(data)
    try:
        seen = {
            c["path"]
            for row in store.log(agent_id, limit=10_000)
            for c in row.changes
            if isinstance(c["path"], str)
        }
        return {p: [vars(v) for v in store.versions(agent_id, p)] for p in sorted(seen)}
    finally:
        store.close()


def assert_identical(source: Path, copy: Path, agent_id: str) -> None:
    assert ok("log", agent_id, "--json", data=copy) == ok("log", agent_id, "--json", data=source)
    assert versions(copy, agent_id) == versions(source, agent_id)  # versions and hashes
    mine = next(a for a in agents(source) if a.agent_id == agent_id)
    theirs = next(a for a in agents(copy) if a.agent_id == agent_id)
    assert theirs == mine  # memoryStoreId, name, createdAt, revision, last commit time
    # byte-identical: the log entries, blobs, agent record and the working tree
    assert tree(agent_folder(copy, agent_id)) == tree(agent_folder(source, agent_id))


@pytest.fixture(scope="module")
def alice_dump(source: Path) -> bytes:
    return ok("export", ALICE, data=source)


@pytest.fixture(scope="module")
def scope_dump(source: Path) -> bytes:
    return ok("export", "--scope", ALICE, data=source)


# ---- JSON lines -------------------------------------------------------------------------


def test_export_then_import_into_an_empty_store_gives_the_same_agent(
    source: Path, alice_dump: bytes, tmp_path: Path
) -> None:
    dump = alice_dump
    records = [json.loads(line) for line in dump.splitlines()]
    assert {r["agentId"] for r in records} == {ALICE}  # not users/alice/x
    assert [r["type"] for r in records][:1] == ["agent"]
    copy = tmp_path / "copy"
    assert json.loads(ok("import", "--json", data=copy, stdin=dump)) == {"imported": [ALICE]}
    fsck = json.loads(ok("fsck", "--json", data=copy))
    assert fsck["damaged"] == [] and fsck["derived"] == [] and fsck["uncommitted"] == []
    assert_identical(source, copy, ALICE)
    assert [(a.agent_id, a.name) for a in agents(copy)] == [(ALICE, "Alice Two")]  # renamed
    assert ok("export", ALICE, data=copy) == dump  # and it exports the same again
    store = Store(copy)
    try:
        assert store.read(ALICE, "/memories/big.md").content == BIG + b"more\n"
        assert store.read(ALICE, "/memories/notes/a.md", 1).content.endswith(b"# A\none\n")
    finally:
        store.close()


def test_scope_export_imports_every_agent_under_the_scope(
    source: Path, scope_dump: bytes, tmp_path: Path
) -> None:
    dump = scope_dump
    copy = tmp_path / "copy"
    imported = json.loads(ok("import", "--json", data=copy, stdin=dump))["imported"]
    assert imported == [ALICE, ALICE_X]
    assert [a.agent_id for a in agents(copy)] == [ALICE, ALICE_X]  # not alicex, not bob
    assert ok("fsck", data=copy).decode().strip().endswith("ok")
    for agent_id in (ALICE, ALICE_X):
        assert_identical(source, copy, agent_id)
    # an export file on disk works like standard input
    (tmp_path / "dump.jsonl").write_bytes(dump)
    again = tmp_path / "again"
    ok("import", str(tmp_path / "dump.jsonl"), data=again)
    assert canonical(again) == canonical(copy)


def test_import_refuses_an_agent_that_exists_and_changes_nothing(
    source: Path, scope_dump: bytes, tmp_path: Path
) -> None:
    dump = scope_dump
    before = canonical(source)
    refused = cli("import", data=source, stdin=dump)
    assert refused.returncode != 0
    assert b"already exists" in refused.stderr and refused.stdout == b""
    assert canonical(source) == before
    # the second agent exists, the first does not: still all or nothing
    partial = tmp_path / "partial"
    ok("agents", "create", ALICE_X, data=partial)
    existing = canonical(partial)
    refused = cli("import", data=partial, stdin=dump)
    assert refused.returncode != 0, refused.stdout
    assert ALICE_X.encode() in refused.stderr and b"already exists" in refused.stderr
    assert canonical(partial) == existing
    assert [a.agent_id for a in agents(partial)] == [ALICE_X]
    assert ok("fsck", data=partial).decode().strip().endswith("ok")


def _edit(dump: bytes, kind: str) -> bytes:
    lines = dump.splitlines(keepends=True)
    records = [json.loads(line) for line in lines]
    first_version = next(i for i, r in enumerate(records) if r["type"] == "version")
    second_commit = [i for i, r in enumerate(records) if r["type"] == "commit"][1]
    if kind == "not json":
        lines.insert(3, b'{"type": "version", oops\n')
    elif kind == "truncated line":
        lines[-1] = lines[-1][: len(lines[-1]) // 2]
    elif kind == "not an object":
        lines.insert(2, b"[1, 2]\n")
    elif kind == "unknown type":
        lines.insert(2, b'{"type": "vector", "agentId": "users/alice"}\n')
    elif kind == "no agent first":
        lines = lines[1:]
    elif kind == "missing field":
        record = dict(records[second_commit])
        del record["ts"]
        lines[second_commit] = json.dumps(record).encode() + b"\n"
    elif kind == "bad format":
        record = dict(records[0], format=99)
        lines[0] = json.dumps(record).encode() + b"\n"
    elif kind == "content does not match its hash":
        record = dict(records[first_version])
        record["content"] = record["content"].replace("one", "uno")
        lines[first_version] = json.dumps(record).encode() + b"\n"
    elif kind == "revision gap":
        del lines[second_commit]
    return b"".join(lines)


@pytest.mark.parametrize(
    "kind",
    [
        "not json",
        "truncated line",
        "not an object",
        "unknown type",
        "no agent first",
        "missing field",
        "bad format",
        "content does not match its hash",
        "revision gap",
    ],
)
def test_malformed_import_fails_clearly_and_imports_nothing(
    scope_dump: bytes, tmp_path: Path, kind: str
) -> None:
    dump = _edit(scope_dump, kind)
    target = tmp_path / "target"
    done = cli("import", data=target, stdin=dump)
    assert done.returncode != 0, kind
    made, message = done.stderr.decode().split("\n", 1)
    assert made == f"memfs: creating data folder {target}"  # import may make a new folder
    assert message.startswith("memfs: ") and message.count("\n") == 1, message
    assert "line" in message or "record" in message, message
    assert canonical(target) == {}
    assert agents(target) == []


# ---- git fast-import --------------------------------------------------------------------


@pytest.fixture
def git_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HOME": str(tmp_path),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }


def git(repo: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout.decode()


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\x00" % len(data) + data).hexdigest()


@pytest.fixture
def repo(source: Path, tmp_path: Path, git_env: dict[str, str]) -> Iterator[Path]:
    """``memfs export users/alice --format git | git fast-import`` in a new repo."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, git_env, "init", "-q", "-b", "main")
    argv = [sys.executable, "-m", "memfs.cli", "export", ALICE, "--format", "git"]
    errors = tmp_path / "export.err"
    with (
        errors.open("wb") as err,
        subprocess.Popen(
            [*argv, "--data", str(source)], stdout=subprocess.PIPE, stderr=err
        ) as export,
    ):
        assert export.stdout is not None
        imported = subprocess.run(
            ["git", "fast-import", "--quiet"],
            cwd=path,
            env=git_env,
            stdin=export.stdout,
            capture_output=True,
            check=False,
            timeout=120,
        )
    assert export.returncode == 0, errors.read_text()
    assert imported.returncode == 0, imported.stderr.decode()
    git(path, git_env, "checkout", "-q", "main")
    yield path


def test_git_export_has_one_commit_per_revision_with_actor_time_and_message(
    source: Path, repo: Path, git_env: dict[str, str]
) -> None:
    log = json.loads(ok("log", ALICE, "--json", data=source))["commits"]  # newest first
    fields = "%H%x00%an%x00%ae%x00%cn%x00%at%x00%ct%x00%B%x01"
    raw = git(repo, git_env, "log", "--reverse", f"--format={fields}", "main")
    commits = [c.lstrip("\n").split("\x00") for c in raw.split("\x01") if c.strip()]
    assert len(commits) == len(log) == 10
    for (_sha, name, email, committer, at, ct, body), entry in zip(
        commits, reversed(log), strict=True
    ):
        seconds = parse_ts(entry["timestamp"]) // 1_000_000
        assert int(at) == int(ct) == seconds
        assert name == committer == entry["actor"]
        assert email == entry["actor"].replace(" ", "-") + "@memfs"
        message = entry["message"] or f"memfs revision {entry['revision']}"
        assert body == f"{message}\n\nMemfs-Revision: {entry['revision']}\n"
    assert git(repo, git_env, "fsck", "--strict", "--no-dangling") == ""


def test_git_export_history_matches_every_revision(
    source: Path, repo: Path, git_env: dict[str, str]
) -> None:
    shas = git(repo, git_env, "log", "--reverse", "--format=%H", "main").split()
    state: dict[str, bytes] = {}
    store = Store(source)
    try:
        for revision, sha in enumerate(shas, start=1):
            for change in store.commit_at(ALICE, revision).changes:
                if change.after is None:
                    state.pop(change.path, None)
                else:
                    state[change.path] = store.content_of(ALICE, change.after)
            listed = git(repo, git_env, "ls-tree", "-r", "-z", sha).split("\x00")
            files = {line.split("\t", 1)[1]: line.split()[2] for line in listed if line.strip()}
            assert files == {p.removeprefix("/"): blob_id(d) for p, d in state.items()}, revision
    finally:
        store.close()
    patch = git(repo, git_env, "log", "-p", "--follow", "--", "memories/archive/a.md")
    assert "+two" in patch and "-topic: x" in patch and "+topic: y" in patch
    assert "rename from memories/notes/a.md" in patch  # git sees the memfs rename
    deleted = git(repo, git_env, "log", "-p", "--format=%s", "--", "memories/b.md")
    assert deleted.startswith("drop b") and "deleted file mode 100644" in deleted


def test_git_checkout_equals_the_working_tree(source: Path, repo: Path) -> None:
    checked_out = {k: v for k, v in tree(repo).items() if not k.startswith(".git/")}
    working = tree(agent_folder(source, ALICE) / "memories")
    assert checked_out == {f"memories/{k}": v for k, v in working.items()}
    assert "memories/big.md" in checked_out and "memories/ünï/日本.md" in checked_out
