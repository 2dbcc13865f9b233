"""Where MCP lives in ``memfs serve``'s URL space, without loading the SDK: the app
checks every request against these, and imports the SDK at the first MCP request."""

from __future__ import annotations

from urllib.parse import unquote

from memfs.domain import paths
from memfs.errors import NotFound

PREFIX = "/mcp/agents/"
ROUTE_LABEL = "/mcp/agents/{agentId}"  # the /metrics route of every MCP request


def is_mcp(raw_path: str) -> bool:
    return raw_path == "/mcp" or raw_path.startswith("/mcp/")


def agent_in_path(raw_path: str) -> str:
    """The agent of ``/mcp/agents/{agentId}``: the rest of the path, ``/`` or ``%2F``
    between its segments (``users/alice/assistant``)."""
    if not raw_path.startswith(PREFIX):
        raise NotFound(
            "MCP is served per agent: use /mcp/agents/{agentId}, e.g. "
            "/mcp/agents/users/alice/assistant",
            field="path",
        )
    return paths.agent_id(unquote(raw_path.removeprefix(PREFIX)))
