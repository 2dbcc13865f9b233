"""Claude's memory tool backed by memfs: ``MemfsMemoryTool``.

A drop-in for the Anthropic SDK's ``BetaLocalFilesystemMemoryTool``: each command
goes to the agent's ``memory:command`` route, which runs it as a versioned commit
and answers the very text the SDK's local tool would — so the tool result the
model reads is the same, refusals included (they are raised as ``ToolError``,
which the SDK's tool runner sends with ``is_error: true``)::

    from anthropic import Anthropic
    from memfs.client import Client
    from memfs.integrations.anthropic import MemfsMemoryTool

    memfs = Client("http://127.0.0.1:8750", key)
    tool = MemfsMemoryTool(memfs, "users/alice/assistant")
    runner = Anthropic().beta.messages.tool_runner(
        model="claude-sonnet-4-5", max_tokens=1024, tools=[tool],
        messages=[{"role": "user", "content": "Remember that I like tea"}],
    )
    print(runner.until_done().content)

Failures that are no fault of the command — the agent does not exist, the key
lacks ``memories:write``, the server is down — raise ``memfs.client`` errors: the
runner logs them and shows the model their ``repr``, as for any failing tool.

Needs the ``anthropic`` package (``pip install 'memfs[anthropic]'``); nothing else
in memfs imports it.
"""

from __future__ import annotations

from anthropic.lib.tools import ToolError
from anthropic.tools import BetaAbstractMemoryTool
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)
from typing_extensions import override

from memfs.client import Client

__all__ = ["MemfsMemoryTool"]


class MemfsMemoryTool(BetaAbstractMemoryTool):
    """The ``memory_20250818`` tool on one memfs agent, through ``client``."""

    def __init__(
        self,
        client: Client,
        agent_id: str,
        *,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.client = client
        self.agent_id = agent_id

    def _run(self, command: dict[str, object]) -> str:
        ok, text = self.client.memory_command(self.agent_id, command)
        if not ok:
            raise ToolError(text)
        return text

    @override
    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        fields: dict[str, object] = {"command": "view", "path": command.path}
        if command.view_range is not None:
            fields["view_range"] = list(command.view_range)
        return self._run(fields)

    @override
    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self._run(
            {"command": "create", "path": command.path, "file_text": command.file_text}
        )

    @override
    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self._run(
            {
                "command": "str_replace",
                "path": command.path,
                "old_str": command.old_str,
                "new_str": command.new_str,
            }
        )

    @override
    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self._run(
            {
                "command": "insert",
                "path": command.path,
                "insert_line": command.insert_line,
                "insert_text": command.insert_text,
            }
        )

    @override
    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return self._run({"command": "delete", "path": command.path})

    @override
    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return self._run(
            {"command": "rename", "old_path": command.old_path, "new_path": command.new_path}
        )

    @override
    def clear_all_memory(self) -> str:
        """Delete every file and folder under /memories, one commit each; the
        history stays readable, as for any memfs delete."""
        page = self.client.list_memories(self.agent_id, depth=1)
        names = [*page.folders, *(m.path for m in page.memories)]
        while page.next_cursor is not None:
            page = self.client.list_memories(self.agent_id, depth=1, cursor=page.next_cursor)
            names += [*page.folders, *(m.path for m in page.memories)]
        for name in names:
            self._run({"command": "delete", "path": name})
        return "All memory cleared"
