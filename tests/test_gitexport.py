"""The fast-import stream, checked by importing it with the real ``git`` binary."""

from __future__ import annotations

import io
import os
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from memfs.domain.gitexport import GitCommit, write_fast_import
from memfs.errors import InvalidRequest

T0 = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
T0_SECONDS = 1735787045

TRICKY = (
    b"data 5\nhello\ncommit refs/heads/evil\nM 100644 inline x\n"
    b"D memories/a.md\ndone\n\x00\xff\xfe not utf-8\r\nno final newline"
)
TRICKY_PATHS = [
    "/memories/with space.md",
    '/memories/"leading quote.md',
    '/memories/in"side.md',
    "/memories/back\\slash.md",
    "/memories/ünïcödé/日本語.md",
    "/memories/tab\there.md",  # not a valid memory path, but quoting must cope
    "/memories/line\nfeed.md",
]


class Repo:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.env = {
            **os.environ,
            "HOME": str(path),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
        }
        path.mkdir()
        self.git("init", "-q", "--initial-branch=main")

    def run(self, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            ["git", *args],
            check=False,  # callers assert on the outcome
            cwd=self.path,
            env=self.env,
            input=stdin,
            capture_output=True,
        )

    def git(self, *args: str, stdin: bytes = b"") -> bytes:
        result = self.run(*args, stdin=stdin)
        assert result.returncode == 0, result.stderr.decode(errors="replace")
        return result.stdout

    def text(self, *args: str) -> str:
        return self.git(*args).decode()

    def import_(self, commits: list[GitCommit]) -> None:
        self.git("fast-import", "--quiet", stdin=stream(commits))

    def files(self, rev: str = "main") -> set[str]:
        listing = self.git("ls-tree", "-r", "-z", "--name-only", rev)
        return {name.decode() for name in listing.split(b"\0") if name}

    def blob(self, rev: str, path: str) -> bytes:
        return self.git("cat-file", "blob", f"{rev}:{path}")


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "repo")


def stream(commits: list[GitCommit]) -> bytes:
    out = io.BytesIO()
    write_fast_import(commits, out)
    return out.getvalue()


def commit(
    revision: int,
    changes: list[tuple[str, bytes | None]],
    *,
    message: str = "",
    actor: str = "alice",
    timestamp: datetime | None = None,
) -> GitCommit:
    when = timestamp or T0 + timedelta(minutes=revision)
    return GitCommit(revision, when, actor, message, changes)


HISTORY = [
    commit(
        1,
        [("/memories/a.md", b"# A\n"), ("/memories/notes/b.md", b"b\n")],
        message="first",
    ),
    commit(
        2,
        [("/memories/a.md", b"# A v2\n"), ("/memories/notes/b.md", None)],
        actor="bob",
    ),
    commit(
        3,
        [("/memories/a.md", None), ("/memories/renamed.md", b"# A v2\n")],
        message="rename a\n\nwith a body\n",
        actor="run:42",
    ),
]


def test_one_commit_per_revision_with_messages_and_trailers(repo: Repo) -> None:
    repo.import_(HISTORY)
    log = repo.text("log", "--format=%B%x00", "main").split("\0\n")
    assert log[:3] == [
        "rename a\n\nwith a body\n\nMemfs-Revision: 3\n",
        "memfs revision 2\n\nMemfs-Revision: 2\n",
        "first\n\nMemfs-Revision: 1\n",
    ]
    trailers = repo.text("log", "--format=%(trailers:key=Memfs-Revision,valueonly)", "main")
    assert trailers.split() == ["3", "2", "1"]
    assert repo.text("rev-list", "--count", "main").strip() == "3"


def test_authors_committers_and_dates(repo: Repo) -> None:
    repo.import_(HISTORY)
    log = repo.text("log", "--date=raw", "--format=%an|%ae|%cn|%ce|%ad|%cd", "main")
    expected = []
    for actor, minutes in [("run:42", 3), ("bob", 2), ("alice", 1)]:
        date = f"{T0_SECONDS + 60 * minutes} +0000"
        expected.append(f"{actor}|{actor}@memfs|{actor}|{actor}@memfs|{date}|{date}")
    assert log.splitlines() == expected


def test_trees_follow_changes_and_deletes(repo: Repo) -> None:
    repo.import_(HISTORY)
    assert repo.files("main~2") == {"memories/a.md", "memories/notes/b.md"}
    assert repo.files("main~1") == {"memories/a.md"}
    assert repo.files("main") == {"memories/renamed.md"}
    assert repo.blob("main~1", "memories/a.md") == b"# A v2\n"
    assert repo.blob("main", "memories/renamed.md") == b"# A v2\n"


def test_contents_are_byte_exact_even_when_they_look_like_commands(repo: Repo) -> None:
    repo.import_([commit(1, [("/memories/tricky.md", TRICKY), ("/memories/empty.md", b"")])])
    assert repo.blob("main", "memories/tricky.md") == TRICKY
    assert repo.blob("main", "memories/empty.md") == b""
    assert repo.files() == {"memories/tricky.md", "memories/empty.md"}


def test_tricky_paths_round_trip(repo: Repo) -> None:
    changes: list[tuple[str, bytes | None]] = [(p, p.encode()) for p in TRICKY_PATHS]
    repo.import_([commit(1, changes), commit(2, [(TRICKY_PATHS[1], None)])])
    assert repo.files("main~1") == {p[1:] for p in TRICKY_PATHS}
    assert repo.files("main") == {p[1:] for p in TRICKY_PATHS} - {TRICKY_PATHS[1][1:]}
    for path in TRICKY_PATHS:
        assert repo.blob("main~1", path[1:]) == path.encode()


def test_quoting_only_where_needed() -> None:
    data = stream([commit(1, [(p, b"") for p in TRICKY_PATHS[:3]] + [(TRICKY_PATHS[6], None)])])
    assert b"M 100644 inline memories/with space.md\n" in data
    assert b'M 100644 inline "memories/\\"leading quote.md"\n' in data
    assert b'M 100644 inline "memories/in\\"side.md"\n' in data
    assert b'D "memories/line\\nfeed.md"\n' in data


def test_message_and_actor_are_sanitised(repo: Repo) -> None:
    evil = "Eve <eve@evil>\nauthor Mallory <m@x> 0 +0000\x00"
    tricky_message = "data 3\nfrom :1\n\x00done\n"
    repo.import_([commit(1, [("/memories/x.md", b"x")], actor=evil, message=tricky_message)])
    assert repo.text("log", "--format=%an|%ae", "main") == (
        "Eve eve@evil author Mallory m@x 0 +0000|Eve-eve@evil-author-Mallory-m@x-0-+0000@memfs\n"
    )
    assert (
        repo.text("log", "--format=%B", "main") == "data 3\nfrom :1\ndone\n\nMemfs-Revision: 1\n\n"
    )


def test_blank_actor_and_message_get_defaults(repo: Repo) -> None:
    repo.import_([commit(7, [("/memories/x.md", b"x")], actor=" <> \n", message=" \n\t")])
    assert (
        repo.text("log", "--format=%an <%ae>|%s", "main")
        == "memfs <memfs@memfs>|memfs revision 7\n"
    )


def test_git_fsck_is_clean(repo: Repo) -> None:
    changes: list[tuple[str, bytes | None]] = [(p, TRICKY) for p in TRICKY_PATHS]
    repo.import_([*HISTORY, commit(4, changes, actor="Zoë Ünicode <z@z>")])
    result = repo.run("fsck", "--strict", "--full", "--no-dangling")
    assert result.returncode == 0
    assert result.stdout == result.stderr == b""


def test_timestamps_floor_to_utc_seconds() -> None:
    ist = timezone(timedelta(hours=5, minutes=30))
    data = stream(
        [
            commit(1, [], timestamp=T0),
            commit(2, [], timestamp=T0.astimezone(ist) + timedelta(seconds=1)),
        ]
    )
    assert f"alice <alice@memfs> {T0_SECONDS} +0000\n".encode() in data
    assert f"alice <alice@memfs> {T0_SECONDS + 1} +0000\n".encode() in data


def test_naive_timestamp_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="timezone-aware"):
        stream([commit(1, [], timestamp=datetime(2025, 1, 1))])


@pytest.mark.parametrize(
    "path",
    [
        "memories/x.md",
        "/other/x.md",
        "/memories/",
        "/memories/a//b",
        "/memories/../x",
        "/memories/nul\x00.md",
    ],
)
def test_paths_git_cannot_hold_are_refused(path: str) -> None:
    with pytest.raises(InvalidRequest):
        stream([commit(1, [(path, b"x")])])


@pytest.mark.parametrize(
    "path", ["/memories/.git/config", "/memories/a/.GIT/HEAD", "/memories/.git. /x", "/memories/GIT~1/x"]
)
def test_git_segments_of_old_histories_are_skipped_and_reported(repo: Repo, path: str) -> None:
    seen: list[tuple[int, str]] = []
    out = io.BytesIO()
    history = [commit(1, [("/memories/a.md", b"a\n"), (path, b"[core]\nfsmonitor = touch x\n")])]
    write_fast_import(history, out, skipped=lambda rev, p: seen.append((rev, p)))
    assert seen == [(1, path)]
    repo.git("fast-import", "--quiet", stdin=out.getvalue())
    assert repo.files() == {"memories/a.md"}


def test_streams_commit_by_commit() -> None:
    out = io.BytesIO()

    def lazy() -> Iterator[GitCommit]:
        for revision in range(1, 4):
            # Everything before this revision is already written when it is produced.
            assert out.getvalue().count(b"\ncommit ") == revision - 1
            yield commit(revision, [("/memories/x.md", b"%d" % revision)])

    write_fast_import(lazy(), out)
    assert out.getvalue().count(b"Memfs-Revision: ") == 3


def test_a_cut_stream_is_refused_by_git(repo: Repo) -> None:
    data = stream(HISTORY)
    assert data.startswith(b"feature done\n")
    assert data.endswith(b"\ndone\n")
    assert repo.run("fast-import", "--quiet", stdin=data[: -len(b"done\n")]).returncode != 0
    assert repo.run("rev-parse", "--verify", "-q", "main").returncode != 0


def test_empty_history_and_custom_branch(repo: Repo) -> None:
    repo.git("fast-import", "--quiet", stdin=stream([]))
    assert repo.text("for-each-ref") == ""
    out = io.BytesIO()
    write_fast_import(HISTORY[:1], out, branch="refs/heads/export")
    repo.git("fast-import", "--quiet", stdin=out.getvalue())
    assert repo.files("export") == {"memories/a.md", "memories/notes/b.md"}


def test_checkout_gives_the_memories_as_plain_files(repo: Repo) -> None:
    changes: list[tuple[str, bytes | None]] = [(p, TRICKY) for p in TRICKY_PATHS]
    repo.import_([*HISTORY, commit(4, changes)])
    repo.git("reset", "-q", "--hard", "main")
    for path in TRICKY_PATHS:
        assert (repo.path / path[1:]).read_bytes() == TRICKY
    assert (repo.path / "memories/renamed.md").read_bytes() == b"# A v2\n"
    assert not (repo.path / "memories/a.md").exists()
