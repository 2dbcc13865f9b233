"""Symlinks planted in the data folder never send a write, rename or delete outside it.

A sentinel folder outside the data folder is the target of symlinks planted in an
agent's working tree (a folder link and a file link), and of the agent folder and
its .memfs folder themselves. Every HTTP write (PUT, DELETE, memory:command create,
rename, delete) and every CLI command that touches the tree (put, rm, mv, commit,
status, fsck --repair) is refused or works around the link, and the sentinel's
checksums never change. fsck reports each link.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from http_fixtures import AGENT, Api, agent_url, assert_error, memory_url, open_api
from memfs import cli
from memfs.canonical import layout


def snapshot(folder: Path) -> dict[str, str]:
    """Every entry below ``folder`` with the sha256 of its bytes (folders as 'dir')."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), folder)] = "dir"
        for name in filenames:
            full = os.path.join(dirpath, name)
            out[os.path.relpath(full, folder)] = hashlib.sha256(Path(full).read_bytes()).hexdigest()
    return out


@pytest.fixture
def sentinel(tmp_path: Path) -> Path:
    folder = tmp_path / "sentinel"
    (folder / "deep").mkdir(parents=True)
    (folder / "target.md").write_text("outside the data folder\n")
    (folder / "new.md").write_text("do not replace me\n")
    (folder / "deep" / "x.md").write_text("x\n")
    return folder


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with open_api(tmp_path) as opened:
        yield opened


def tree(api: Api) -> Path:
    return layout.worktree_root(api.data, AGENT)


def plant(api: Api, sentinel: Path) -> None:
    api.create_agent()
    api.must_write("/memories/real.md", "real\n")
    (tree(api) / "evil").symlink_to(sentinel)
    (tree(api) / "evil.md").symlink_to(sentinel / "target.md")


def command(api: Api, **doc: object) -> tuple[bool, str]:
    response = api.post(agent_url(AGENT, "/memory:command"), json=doc)
    assert response.status_code == 200, response.text
    body = response.json()
    return bool(body["ok"]), str(body["result"])


def test_http_writes_never_follow_a_symlink_in_the_tree(api: Api, sentinel: Path) -> None:
    plant(api, sentinel)
    before = snapshot(sentinel)
    for path in ("/memories/evil/new.md", "/memories/evil/deep/y.md", "/memories/evil.md"):
        refused = api.write(path, b"pwned")
        assert_error(refused, 400, "invalid_request", "path")
        assert "symlink" in refused.json()["message"]
    for path in ("/memories/evil/target.md", "/memories/evil.md"):
        assert refused.status_code == 400
        deleted = api.delete(memory_url(path))
        assert deleted.status_code in (400, 404), deleted.text
    ok, result = command(api, command="create", path="/memories/evil/new.md", file_text="pwned")
    assert not ok and "symlink" in result
    ok, result = command(
        api, command="rename", old_path="/memories/real.md", new_path="/memories/evil/real.md"
    )
    assert not ok and "symlink" in result
    ok, result = command(api, command="delete", path="/memories/evil/deep")
    assert not ok
    assert snapshot(sentinel) == before
    assert api.get(memory_url("/memories/real.md")).status_code == 200


def test_agent_folder_or_memfs_folder_as_a_symlink_is_refused(
    api: Api, sentinel: Path, tmp_path: Path
) -> None:
    api.create_agent()
    api.must_write("/memories/a.md", "a\n")
    folder = layout.agent_folder(api.data, AGENT)
    # .memfs replaced by a link to the sentinel: no log entry or blob lands there.
    shutil.move(str(folder / ".memfs"), str(tmp_path / "memfs-real"))
    (folder / ".memfs").symlink_to(sentinel)
    before = snapshot(sentinel)
    refused = api.write("/memories/b.md", b"b")
    assert_error(refused, 400, "invalid_request")
    assert "symlink" in refused.json()["message"]
    assert snapshot(sentinel) == before
    # the agent folder itself a link: writes, deletes and erase never touch the target
    (folder / ".memfs").unlink()
    shutil.move(str(tmp_path / "memfs-real"), str(folder / ".memfs"))
    moved = tmp_path / "agent-real"
    shutil.move(str(folder), str(moved))
    shutil.copytree(moved, sentinel / "agent", symlinks=True)
    before = snapshot(sentinel)
    folder.symlink_to(sentinel / "agent")
    for response in (
        api.write("/memories/c.md", b"c"),
        api.delete(memory_url("/memories/a.md")),
        api.delete(agent_url(AGENT)),
    ):
        assert response.status_code == 400, response.text
        assert "symlink" in response.json()["message"]
    assert snapshot(sentinel) == before
    report = cli_run(api.data, "fsck")
    assert report[0] != 0 and "symlink" in report[1]
    assert snapshot(sentinel) == before


def cli_run(data: Path, *args: str) -> tuple[int, str]:
    """``memfs ARGS --data DATA`` in this process: (exit status, stdout + stderr)."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main([*args, "--data", str(data)])
    return code, out.getvalue() + err.getvalue()


def test_cli_never_follows_a_symlink_in_the_tree(api: Api, sentinel: Path, tmp_path: Path) -> None:
    plant(api, sentinel)
    api.client.close()
    data = api.data
    before = snapshot(sentinel)
    source = tmp_path / "in.md"
    source.write_text("pwned\n")
    for args in (
        ("put", AGENT, "/memories/evil/new.md", str(source)),
        ("put", AGENT, "/memories/evil.md", str(source)),
        ("rm", AGENT, "/memories/evil.md"),
        ("mv", AGENT, "/memories/real.md", "/memories/evil/real.md"),
    ):
        code, text = cli_run(data, *args)
        assert code == 2 and "symlink" in text, (args, code, text)
    # status lists the links as invalid; commit refuses them and changes nothing
    code, text = cli_run(data, "status", AGENT)
    assert "/memories/evil" in text and "symlink" in text, text
    code, text = cli_run(data, "commit", AGENT, "-m", "take the links")
    assert code == 2 and "symlink" in text, text
    # fsck reports them; --repair restores a damaged real file but leaves the links be
    (tree(api) / "real.md").unlink()
    (tree(api) / "real.md").symlink_to(sentinel / "new.md")
    code, text = cli_run(data, "fsck", "--repair")
    assert "evil" in text and "symlink" in text, text
    assert snapshot(sentinel) == before
    assert (sentinel / "new.md").read_text() == "do not replace me\n"
