"""The tool table behind the official ``mcp`` SDK: a low-level ``Server`` for both
transports, the stdio loop of ``memfs mcp``, and the Streamable HTTP endpoint of
``memfs serve`` (``/mcp/agents/{agentId}``).

The agent is fixed per connection: by ``--agent`` on stdio and by the URL path over
HTTP, never by a tool argument. A model then cannot reach another agent's memory by
naming it, and the same key-and-scope check as ``/v1/agents/{agentId}/…`` applies.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from memfs import __version__
from memfs.core import faults
from memfs.errors import Unavailable
from memfs.mcp import tools

log = logging.getLogger("memfs.mcp")

_SCOPE_KEY = "memfs.mcp.memory"  # where the HTTP edge leaves the request's Memory

INSTRUCTIONS = (
    "memfs is your long-term memory: Markdown files under /memories that stay between "
    "conversations. View /memories at the start of a task, search it for what you need, "
    "and record what you learn with create, str_replace or insert. Every change is a "
    "version: history and read_version show earlier ones."
)

MemoryOf = Callable[[ServerRequestContext[Any, Any]], tools.Memory]


def _tool(spec: tools.Tool) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=spec.schema,
        annotations=types.ToolAnnotations(
            title=spec.title,
            read_only_hint=not spec.writes,
            destructive_hint=spec.name in ("create", "delete", "rename"),
            idempotent_hint=not spec.writes or spec.name in ("create", "delete"),
            open_world_hint=False,
        ),
    )


def build_server(memory_of: MemoryOf) -> Server[Any]:
    """A low-level MCP server whose tools run on ``memory_of(request context)``."""
    listed = types.ListToolsResult(tools=[_tool(spec) for spec in tools.TOOLS])

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return listed

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            answer = await tools.call(memory_of(ctx), params.name, params.arguments)
        except Exception as exc:
            # A machine failure (disk full, index gone) still answers the model.
            translated = faults.translate(exc)
            if translated is None:
                log.exception("MCP tool %r failed", params.name)
                text = "Error: the memory store failed; the server's log has the details"
            else:
                text = f"Error: {translated.message}"
            answer = tools.Answer(text, True)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=answer.text)], is_error=answer.error
        )

    return Server(
        "memfs",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_stdio(memory: tools.Memory) -> None:
    """Speak MCP on stdin/stdout until the client closes stdin (the SDK points fd 1 at
    stderr meanwhile, so no stray print can corrupt the frames)."""
    server = build_server(lambda ctx: memory)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


class HttpEndpoint:
    """Streamable HTTP, stateless, JSON answers: any server of a cluster can answer
    any request, as for ``/v1``. ``serve`` runs in a task of the app's."""

    def __init__(self, max_body_bytes: int) -> None:
        self.max_body_bytes = max_body_bytes
        self.server = build_server(_memory_of_request)
        self.manager: StreamableHTTPSessionManager | None = None

    async def serve(self, stop: asyncio.Event, ready: asyncio.Event) -> None:
        """Run the SDK's session manager until ``stop``; ``ready`` once it answers (or
        failed to start: then ``answer`` refuses with 503)."""
        manager = StreamableHTTPSessionManager(
            self.server,
            json_response=True,
            stateless=True,
            max_request_body_size=self.max_body_bytes,
        )
        try:
            async with manager.run():
                self.manager = manager
                ready.set()
                await stop.wait()
        finally:
            self.manager = None
            ready.set()

    def answer(self, memory: tools.Memory) -> Response:
        """The response that hands this request to the SDK, tools bound to ``memory``."""
        if self.manager is None:
            raise Unavailable("the MCP endpoint is starting or stopping; retry in a moment")
        return _Handoff(self.manager, memory)


def _memory_of_request(ctx: ServerRequestContext[Any, Any]) -> tools.Memory:
    memory: tools.Memory = ctx.request.scope[_SCOPE_KEY]  # type: ignore[union-attr]
    return memory


class _Handoff(Response):
    """A Response that lets the SDK answer (the app still stamps Memfs-Request-Id and
    counts the status it sent)."""

    def __init__(self, manager: StreamableHTTPSessionManager, memory: tools.Memory) -> None:
        super().__init__()
        self.manager, self.memory = manager, memory

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stamp = [(k, v) for k, v in self.raw_headers if k == b"memfs-request-id"]

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.status_code = message["status"]
                message = {**message, "headers": [*message.get("headers", []), *stamp]}
            await send(message)

        await self.manager.handle_request({**scope, _SCOPE_KEY: self.memory}, receive, stamped)
