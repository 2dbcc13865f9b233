"""``memory:command`` against the Anthropic SDK's own memory tool, on random sessions.

Seeded random sequences of commands run twice: through the SDK's
``BetaLocalFilesystemMemoryTool`` on a temp folder, and through ``POST
…/memory:command`` of the real app (in-process, real Store on disk). Every answer
text and ``ok`` must match, and so must the files at the end of each sequence.

The commands mix what models send: frontmatter that parses and frontmatter that
does not, NUL and control characters in text, CRLF, non-ASCII, folders, dotfiles,
``..``, and now and then something over one of memfs's documented limits (a memory
over ``MEMFS_MEMORY_BYTES``, a path over 1024 bytes, a segment over 255 bytes, a
control character or backslash in a path). Those alone may differ from the SDK: for
them memfs must answer its documented refusal, in the SDK's wording style, and
change nothing (the SDK's side is then put back as it was).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic.tools import BetaLocalFilesystemMemoryTool

from http_fixtures import Api, agent_url, open_api
from memfs.domain.content import parse
from memfs.errors import InvalidRequest
from memfs.http.command import FIELDS
from memfs.http.openapi_components import COMMANDS
from test_memory_tool import _normalise, _prune_empty_dirs, sdk_execute

SEED = 20261201
SEQUENCES = 300
MEMORY_BYTES = 2048  # small, so going over it costs little
ROOT = "/memories"

_SEGMENTS = ["a", "b.md", "notes.md", "dir", "é.md", "x y", ".hidden", "Ünï", "c"]
_LINES = [
    "plain line",
    "---",
    "description: a memory",
    "kind: rule",
    "bad: [unclosed",
    ": : :",
    "date: 2024-13-45",
    "- item",
    "tab\there",
    "nul\x00byte",
    "bell\x07",
    "crlf\r",
    "Ünïcødé ✓",
    "",
]
_BAD_PATH_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f\\]")


def _text(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.3:  # frontmatter, well-formed or not
        head = rng.sample(_LINES[2:8], rng.randint(0, 3))
        body = rng.choices(_LINES, k=rng.randint(0, 3))
        return "\n".join(["---", *head, "---", *body]) + rng.choice(["", "\n"])
    if kind < 0.35:  # over (or right at) the size limit
        return "z" * rng.choice([MEMORY_BYTES, MEMORY_BYTES + 1, MEMORY_BYTES * 2])
    return "\n".join(rng.choices(_LINES, k=rng.randint(0, 5))) + rng.choice(["", "\n"])


def _path(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.05:
        return ROOT
    if roll < 0.08:
        return ROOT + "/" + "s" * rng.choice([255, 256, 300])  # a name over 255 bytes
    if roll < 0.11:
        return ROOT + "/" + "/".join(["d" * 200] * rng.choice([4, 5, 6]))  # 1024 bytes?
    if roll < 0.13:
        return ROOT + "/" + rng.choice(["tab\tname", "back\\slash", "del\x7f", "nul\x00x"])
    if roll < 0.15:
        return rng.choice(["/etc/x", "/memoriesx/a", "/memories/../x", "/memories/a/../b.md"])
    parts = rng.choices(_SEGMENTS, k=rng.randint(1, 3))
    return ROOT + "/" + "/".join(parts)


def _existing(files: dict[str, str], rng: random.Random) -> str | None:
    return rng.choice(sorted(files)) if files and rng.random() < 0.6 else None


def _command(rng: random.Random, files: dict[str, str]) -> dict[str, Any]:
    name = rng.choice(
        ["view", "view", "create", "create", "str_replace", "insert", "delete", "rename"]
    )
    path = _existing(files, rng) or _path(rng)
    if name == "view":
        command: dict[str, Any] = {"command": "view", "path": path}
        if rng.random() < 0.3:
            command["view_range"] = [rng.randint(-1, 4), rng.choice([-1, 1, 3, 9])]
        return command
    if name == "create":
        return {"command": "create", "path": _path(rng), "file_text": _text(rng)}
    if name == "str_replace":
        content = files.get(path, "")
        if content and rng.random() < 0.7:
            start = rng.randrange(len(content))
            old = content[start : start + rng.randint(1, 12)]
        else:
            old = rng.choice(_LINES) or "x"
        new = rng.choice([_text(rng), rng.choice(_LINES), ""])
        return {"command": "str_replace", "path": path, "old_str": old, "new_str": new}
    if name == "insert":
        line = rng.randint(-1, 1 + files.get(path, "").count("\n"))
        return {"command": "insert", "path": path, "insert_line": line, "insert_text": _text(rng)}
    if name == "delete":
        return {"command": "delete", "path": path}
    return {"command": "rename", "old_path": path, "new_path": _path(rng)}


def _resolved(path: str) -> str | None:
    """The memfs path a command's path means (as the SDK resolves it), None if outside."""
    if not path.startswith(ROOT) or "\x00" in path:
        return None
    full = os.path.normpath(f"{ROOT}/{path[len(ROOT) :].lstrip('/')}")
    return full if full == ROOT or full.startswith(ROOT + "/") else None


def _path_limit(path: str) -> str | None:
    """memfs's documented refusal of a path, None if the path is within the limits."""
    full = _resolved(path)
    if full is None or full == ROOT:
        return None
    full = unicodedata.normalize("NFC", full)
    if len(full.encode()) > 1024:
        return f"The path {path} exceeds the maximum length of 1,024 bytes."
    if any(len(s.encode()) > 255 for s in full.split("/")):
        return f"The path {path} has a name longer than the maximum of 255 bytes."
    if _BAD_PATH_CHARS.search(full):
        return f"The path {path} contains a control character or backslash, which memory paths can't hold."
    return None


def _sdk_files(root: Path) -> dict[str, str]:
    return {
        f"{ROOT}/{p.relative_to(root).as_posix()}": p.read_bytes().decode()
        for p in root.rglob("*")
        if p.is_file()
    }


class Session:
    """One agent in memfs and one SDK tool on a temp folder, fed the same commands."""

    def __init__(self, api: Api, agent: str, base: Path) -> None:
        self.api, self.agent = api, agent
        self.sdk = BetaLocalFilesystemMemoryTool(str(base))
        self.root = base / "memories"
        self.limit_refusals = 0  # answers that came from a documented limit
        api.create_agent(agent)

    def memfs(self, command: dict[str, Any]) -> tuple[bool, str]:
        response = self.api.post(agent_url(self.agent, "/memory:command"), json=command)
        assert response.status_code == 200, (command, response.text)
        body = response.json()
        return body["ok"], body["result"]

    def expected(self, command: dict[str, Any]) -> tuple[bool, str]:
        for field in ("path", "old_path", "new_path"):
            refusal = _path_limit(command[field]) if field in command else None
            if refusal is not None:
                self.limit_refusals += 1
                return False, refusal
        before = _sdk_files(self.root)
        if command["command"] == "rename":
            refusal = self._moved_too_long(command, before)
            if refusal is not None:
                self.limit_refusals += 1
                return False, refusal
        result = _normalise(sdk_execute(self.sdk, command))
        _prune_empty_dirs(self.root)
        after = _sdk_files(self.root)
        grown = [p for p, text in after.items() if before.get(p) != text]
        too_big = [p for p in grown if len(after[p].encode()) > MEMORY_BYTES]
        if too_big:
            # Put the SDK's folder back as it was: memfs must have changed nothing.
            shutil.rmtree(self.root)
            self.root.mkdir()
            for path, text in before.items():
                file = self.root / path.removeprefix(ROOT + "/")
                file.parent.mkdir(parents=True, exist_ok=True)
                file.write_bytes(text.encode())
            self.limit_refusals += 1
            shown = command.get("path", command.get("new_path"))
            return False, f"File {shown} exceeds maximum size of {MEMORY_BYTES:,} bytes."
        return result.ok, result.result

    def _moved_too_long(self, command: dict[str, Any], files: dict[str, str]) -> str | None:
        """A folder rename would give a file inside it a path over 1024 bytes."""
        old, new = _resolved(command["old_path"]), _resolved(command["new_path"])
        if (
            old is None
            or new is None
            or old == ROOT
            or (self.root.parent / old[1:]).exists() is False
        ):
            return None
        target = self.root.parent / new[1:]
        if (
            not (self.root.parent / old[1:]).is_dir()
            or target.exists()
            or new.startswith(old + "/")
        ):
            return None
        for path in files:
            if path.startswith(old + "/"):
                moved = unicodedata.normalize("NFC", new + path[len(old) :])
                if len(moved.encode()) > 1024:
                    return (
                        f"The path {command['new_path']} exceeds the maximum length of 1,024 bytes."
                    )
        return None

    def files(self) -> dict[str, str]:
        listing = self.api.walk(agent_url(self.agent, "/memories"), "memories", {})
        out = {}
        for page in listing:
            for memory in page["memories"]:
                got = self.api.get(agent_url(self.agent, "/memories" + memory["path"][len(ROOT) :]))
                out[memory["path"]] = got.json()["content"]
        return out


def _put_refuses(text: str) -> bool:
    """Whether PUT (strict YAML, no NUL) would refuse this text the tool stored."""
    try:
        parse(text.encode(), limit=MEMORY_BYTES)
    except InvalidRequest:
        return True
    return False


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    with open_api(tmp_path_factory.mktemp("sdk-diff"), memory_bytes=MEMORY_BYTES) as opened:
        yield opened


@pytest.mark.parametrize("block", range(10))
def test_random_sessions_answer_as_the_sdk(api: Api, tmp_path: Path, block: int) -> None:
    rng = random.Random(SEED + block)
    compared = limited = strict_refused = 0
    for n in range(SEQUENCES // 10):
        session = Session(api, f"diff/b{block}/s{n}", tmp_path / f"s{n}")
        for _ in range(rng.randint(3, 14)):
            command = _command(rng, _sdk_files(session.root))
            want = session.expected(command)
            got = session.memfs(command)
            assert got == want, command
            compared += 1
        stored = session.files()
        assert stored == _sdk_files(session.root)
        limited += session.limit_refusals
        strict_refused += sum(1 for text in stored.values() if _put_refuses(text))
    # The sessions did reach what the SDK stores but PUT refuses, and the limits.
    assert compared > 100 and limited > 0 and strict_refused > 0


def _command_result(api: Api, agent: str, command: dict[str, Any]) -> tuple[bool, str]:
    response = api.post(agent_url(agent, "/memory:command"), json=command)
    assert response.status_code == 200, response.text
    return response.json()["ok"], response.json()["result"]


def test_what_put_refuses_the_tool_stores_as_the_sdk_would(api: Api) -> None:
    agent = "diff/lenient"
    api.create_agent(agent)
    head = "---\ndescription: kept\nkind: rule\n---\nbody\n"
    assert _command_result(
        api, agent, {"command": "create", "path": "/memories/n.md", "file_text": head}
    ) == (True, "File created successfully at: /memories/n.md")
    # Inserting at line 3 breaks the YAML: the SDK just edits the file, and so does memfs.
    insert = {
        "command": "insert",
        "path": "/memories/n.md",
        "insert_line": 3,
        "insert_text": "x: [oops",
    }
    assert _command_result(api, agent, insert) == (True, "The file /memories/n.md has been edited.")
    nul = {"command": "create", "path": "/memories/nul.md", "file_text": "a\x00b"}
    assert _command_result(api, agent, nul)[0] is True
    listed = {m["path"]: m for m in api.get(agent_url(agent, "/memories")).json()["memories"]}
    assert listed["/memories/n.md"]["description"] is None  # no longer parses: no description
    memory = api.get(agent_url(agent, "/memories/n.md")).json()
    assert memory["content"] == "---\ndescription: kept\nkind: rule\nx: [oops\n---\nbody\n"
    assert memory["metadata"] == {}
    assert api.get(agent_url(agent, "/memories/nul.md")).json()["content"] == "a\x00b"
    # PUT stays strict.
    put = api.put(
        agent_url(agent, "/memories/p.md"),
        content=memory["content"].encode(),
        headers={"Content-Type": "text/markdown"},
    )
    assert put.status_code == 400 and "invalid YAML frontmatter" in put.json()["message"]


def test_paths_are_nfc_normalised(api: Api) -> None:
    # By design every memfs path is NFC: "e" + U+0301 and "\u00e9" name one file.
    agent = "diff/nfc"
    api.create_agent(agent)
    create = {"command": "create", "path": "/memories/cafe\u0301.md", "file_text": "x"}
    assert _command_result(api, agent, create)[0] is True
    ok, text = _command_result(api, agent, {"command": "view", "path": "/memories/caf\u00e9.md"})
    assert ok and text.endswith("1\tx")


@pytest.mark.parametrize(
    ("command", "field"),
    [
        ({"command": "create", "path": "/memories/a.md", "file_txt": "typo"}, "file_txt"),
        ({"command": "view", "path": "/memories", "extra": 1}, "extra"),
        (
            {
                "command": "rename",
                "old_path": "/memories/a",
                "new_path": "/memories/b",
                "path": "x",
            },
            "path",
        ),
    ],
)
def test_unknown_fields_are_a_400(api: Api, command: dict[str, Any], field: str) -> None:
    agent = "diff/fields"
    if api.get(agent_url(agent)).status_code == 404:
        api.create_agent(agent)
    response = api.post(agent_url(agent, "/memory:command"), json=command)
    assert response.status_code == 400, response.text
    assert response.json()["details"]["field"] == field
    assert api.get(agent_url(agent, "/memories/a.md")).status_code == 404  # nothing written


def test_the_fields_checked_are_the_documented_ones() -> None:
    documented = {
        name: {"command", *(f.rstrip("?") for f in fields)} for name, fields in COMMANDS.items()
    }
    assert {name: set(fields) for name, fields in FIELDS.items()} == documented
