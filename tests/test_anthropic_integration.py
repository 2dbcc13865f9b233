"""MemfsMemoryTool against the SDK's own BetaLocalFilesystemMemoryTool.

The same script of memory-tool calls runs through the Anthropic SDK's real tool
runner twice — once with the local tool on a temp folder, once with
``MemfsMemoryTool`` on a real ``memfs serve`` — behind a mocked Messages API that
plays the model. What the runner sends back as ``tool_result`` blocks (content
and ``is_error``) is exactly what the model would read; both runs must match.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from anthropic import Anthropic
from anthropic.lib.tools import BetaBuiltinFunctionTool
from anthropic.tools import BetaAbstractMemoryTool, BetaLocalFilesystemMemoryTool

from memfs.client import Client
from memfs.integrations.anthropic import MemfsMemoryTool
from servers import MemfsServer

AGENT = "users/alice/assistant"
LONG = "".join(f"line {i}\n" for i in range(1, 11))

SCRIPT: list[dict[str, object]] = [
    {"command": "view", "path": "/memories"},
    {"command": "create", "path": "/memories/notes.md", "file_text": LONG},
    {"command": "create", "path": "/memories/projects/memfs/todo.md", "file_text": "- tests\n"},
    {"command": "create", "path": "/memories/projects/alpha.md", "file_text": "alpha\nbeta\nalpha\n"},
    {"command": "create", "path": "/memories/projects/sizes.md", "file_text": "é" * 1000},
    {"command": "create", "path": "/memories/notes.md", "file_text": "again"},
    {"command": "create", "path": "/memories/projects", "file_text": "a folder"},
    {"command": "view", "path": "/memories"},
    {"command": "view", "path": "/memories/projects"},
    {"command": "view", "path": "/memories/notes.md"},
    {"command": "view", "path": "/memories/notes.md", "view_range": [2, 4]},
    {"command": "view", "path": "/memories/notes.md", "view_range": [8, -1]},
    {"command": "view", "path": "/memories/missing.md"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "line 5", "new_str": "five"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "nope", "new_str": "x"},
    {"command": "str_replace", "path": "/memories/projects/alpha.md", "old_str": "alpha", "new_str": "x"},
    {"command": "str_replace", "path": "/memories/missing.md", "old_str": "a", "new_str": "b"},
    {"command": "str_replace", "path": "/memories/projects", "old_str": "a", "new_str": "b"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "first\n"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 11, "insert_text": "last"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 13, "insert_text": "x"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": -1, "insert_text": "x"},
    {"command": "insert", "path": "/memories/missing.md", "insert_line": 0, "insert_text": "x"},
    {"command": "view", "path": "/memories/notes.md"},
    {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/archive/notes.md"},
    {"command": "rename", "old_path": "/memories/projects/memfs", "new_path": "/memories/done/memfs"},
    {"command": "rename", "old_path": "/memories/projects/alpha.md", "new_path": "/memories/archive/notes.md"},
    {"command": "rename", "old_path": "/memories/projects/alpha.md", "new_path": "/memories/done"},
    {"command": "rename", "old_path": "/memories/gone.md", "new_path": "/memories/new.md"},
    {"command": "rename", "old_path": "/memories", "new_path": "/memories/root"},
    {"command": "view", "path": "/memories"},
    {"command": "view", "path": "/memories/done/memfs/todo.md"},
    {"command": "delete", "path": "/memories/archive/notes.md"},
    {"command": "delete", "path": "/memories/done"},
    {"command": "delete", "path": "/memories/done"},
    {"command": "delete", "path": "/memories"},
    {"command": "view", "path": "/etc/passwd"},
    {"command": "create", "path": "/tmp/x.md", "file_text": "x"},
    {"command": "create", "path": "/memories/../escape.md", "file_text": "x"},
    {"command": "str_replace", "path": "/other.md", "old_str": "a", "new_str": "b"},
    {"command": "insert", "path": "/nope.md", "insert_line": 0, "insert_text": "x"},
    {"command": "rename", "old_path": "/memories/projects/alpha.md", "new_path": "/elsewhere.md"},
    {"command": "delete", "path": "/memories/../x"},
    {"command": "view", "path": "/memories"},
]  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemfsServer]:
    running = MemfsServer(tmp_path_factory.mktemp("anthropic") / "data")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def memfs(server: MemfsServer) -> Iterator[Client]:
    with Client(server.url, server.admin_key) as client:
        client.put_agent(AGENT)
        try:
            yield client
        finally:
            client.delete_agent(AGENT)


def run_as_model(
    tool: BetaBuiltinFunctionTool,
    commands: list[dict[str, object]],
    between: Callable[[], None] = lambda: None,
) -> list[dict[str, Any]]:
    """The tool_result blocks the SDK's tool runner sends back, one call per turn."""
    results: list[dict[str, Any]] = []

    def messages_api(request: httpx2.Request) -> httpx2.Response:
        last = json.loads(request.content)["messages"][-1]
        if last["role"] == "user" and isinstance(last["content"], list):
            results.extend(b for b in last["content"] if b["type"] == "tool_result")
        between()
        turn = len(results)
        if turn < len(commands):
            content: list[dict[str, object]] = [
                {"type": "tool_use", "id": f"toolu_{turn:03}", "name": "memory", "input": commands[turn]}
            ]  # fmt: skip
        else:
            content = [{"type": "text", "text": "done"}]
        return httpx2.Response(
            200,
            json={
                "id": f"msg_{turn:03}",
                "type": "message",
                "role": "assistant",
                "model": "claude-test",
                "content": content,
                "stop_reason": "tool_use" if turn < len(commands) else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        )

    with httpx2.Client(transport=httpx2.MockTransport(messages_api)) as http:
        anthropic = Anthropic(api_key="test", http_client=http, max_retries=0)
        runner = anthropic.beta.messages.tool_runner(
            model="claude-test",
            max_tokens=64,
            messages=[{"role": "user", "content": "use your memory"}],
            tools=[tool],
        )
        runner.until_done()
    assert len(results) == len(commands)
    return results


def _prune_empty_dirs(root: Path) -> None:
    # A memfs folder exists only while it holds a file; the SDK keeps empty ones.
    for folder, _dirs, _files in os.walk(root, topdown=False):
        if Path(folder) != root and not os.listdir(folder):
            os.rmdir(folder)


# A directory's size is the filesystem's (4K on ext4); memfs always says 4K.
_DIR_SIZE = re.compile(r"^\d+(?:\.\d)?[BKMG]\t(?=/memories\S*/$)", re.M)


def _normalise(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for block in blocks:
        text = block["content"]
        if text.startswith("Here're the files"):
            header, first, *rest = text.split("\n")
            first = "4K\t" + first.split("\t", 1)[1]
            text = "\n".join([header, first, *(_DIR_SIZE.sub("4K\t", line) for line in rest)])
        out.append({**block, "content": text})
    return out


def test_same_tool_results_as_the_sdk(tmp_path: Path, memfs: Client) -> None:
    local = BetaLocalFilesystemMemoryTool(str(tmp_path))
    root = tmp_path / "memories"
    expected = _normalise(run_as_model(local, SCRIPT, lambda: _prune_empty_dirs(root)))
    got = run_as_model(MemfsMemoryTool(memfs, AGENT), SCRIPT)
    for command, want, have in zip(SCRIPT, expected, got, strict=True):
        assert have == want, command
    # Refusals really came back as errors, and the final trees are the same.
    assert sum(1 for b in got if b.get("is_error")) >= 20
    files = {
        f"/memories/{p.relative_to(root).as_posix()}": p.read_bytes()
        for p in root.rglob("*")
        if p.is_file()
    }
    assert {
        m.path: memfs.get_memory_text(AGENT, m.path) for m in memfs.iter_memories(AGENT)
    } == files
    assert sorted(files) == ["/memories/projects/alpha.md", "/memories/projects/sizes.md"]


def test_each_change_is_a_version(memfs: Client) -> None:
    tool = MemfsMemoryTool(memfs, AGENT)
    run_as_model(tool, SCRIPT[:5])
    assert memfs.memory_summary(AGENT).revision == 4
    history = list(memfs.iter_versions(AGENT, "/memories/notes.md"))
    assert [(v.version, v.operation, v.actor) for v in history] == [(1, "created", "admin")]


def test_memfs_failures_reach_the_runner_as_errors(server: MemfsServer) -> None:
    # No such agent: not a tool refusal but a failing tool; the runner shows its repr.
    with Client(server.url, server.admin_key) as client:
        tool = MemfsMemoryTool(client, "users/nobody")
        [result] = run_as_model(tool, [{"command": "view", "path": "/memories"}])
    assert result["is_error"] is True
    assert result["content"].startswith("NotFoundError(")
    assert "404 not_found: agent 'users/nobody' does not exist" in result["content"]


def test_tool_definition_and_clear_all_memory(memfs: Client) -> None:
    tool = MemfsMemoryTool(memfs, AGENT, cache_control={"type": "ephemeral"})
    assert isinstance(tool, BetaAbstractMemoryTool)
    assert tool.to_dict() == {
        "type": "memory_20250818",
        "name": "memory",
        "cache_control": {"type": "ephemeral"},
    }
    for path in ("/memories/a.md", "/memories/b/c.md", "/memories/.hidden/d.md"):
        memfs.put_memory(AGENT, path, "x")
    assert tool.clear_all_memory() == "All memory cleared"
    assert list(memfs.iter_memories(AGENT)) == []
    assert [v.operation for v in memfs.iter_versions(AGENT, "/memories/b/c.md")] == [
        "created",
        "deleted",
    ]
