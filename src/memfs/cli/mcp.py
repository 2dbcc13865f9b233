"""``memfs mcp``: one agent's memory as MCP tools over stdio, for Claude Code, Claude
Desktop or any MCP client that starts a local server.

On the data folder (``--data``, the default) it creates the agent if it is new and
commits as ``--actor``; with ``--url`` it runs every tool against a memfs server
with the key in ``MEMFS_TOKEN``, which the server judges. stdout carries only MCP
frames; notes and logs go to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import textwrap
from typing import TYPE_CHECKING

from memfs.cli.base import Parser, command
from memfs.core.auth import ADMIN
from memfs.core.store import Store
from memfs.core.tokens import Signer
from memfs.domain import paths
from memfs.errors import InvalidRequest, NotFound

if TYPE_CHECKING:
    from memfs.mcp.tools import Memory

TOKEN_ENV = "MEMFS_TOKEN"


def cmd_mcp(args: argparse.Namespace, store: Store | None) -> int:
    agent_id = paths.agent_id(args.agent, field="--agent")
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="memfs mcp: %(message)s")
    # The SDK loads here, not with every memfs command (it is about 1 s of imports).
    import anyio

    from memfs.mcp.local import LocalMemory
    from memfs.mcp.server import serve_stdio

    memory: Memory
    if args.url is not None:
        memory = _remote(args.url, agent_id)
    else:
        assert store is not None
        try:
            store.get_agent(agent_id)
        except NotFound:
            store.create_agent(agent_id)
            print(f"memfs mcp: created agent {agent_id} in {args.data}", file=sys.stderr)
        memory = LocalMemory(
            store, Signer.for_data_dir(store.data_dir), agent_id, ADMIN, actor=args.actor
        )
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(serve_stdio, memory)
    return 0


def _remote(url: str, agent_id: str) -> Memory:
    from memfs.client import Client
    from memfs.mcp.remote import RemoteMemory

    if not url.startswith(("http://", "https://")):
        raise InvalidRequest(f"--url {url!r} must start with http:// or https://")
    key = os.environ.get(TOKEN_ENV, "")
    if not key:
        raise InvalidRequest(
            f"--url needs a key: set {TOKEN_ENV} to an application key "
            "(memfs keys create KEY --scope memories:read --scope memories:write ...)"
        )
    return RemoteMemory(Client(url.rstrip("/"), key), agent_id)


def _opens_store(args: argparse.Namespace) -> bool:
    return args.url is None


def add_commands(sub: argparse._SubParsersAction[Parser]) -> None:
    p = command(
        sub,
        "mcp",
        cmd_mcp,
        "serve one agent's memory as MCP tools over stdio (Claude Code, Claude Desktop, ...)",
        "claude mcp add memfs -- memfs mcp --agent users/alice/assistant --data ~/.memfs",
    )
    # RawDescriptionHelpFormatter prints the description as given: wrap it here.
    p.description = textwrap.fill(
        "Serve one agent's memory as MCP tools over stdio, for an MCP client that starts "
        "it (Claude Code, Claude Desktop, agent frameworks). Tools: view, create, "
        "str_replace, insert, delete, rename (Claude's memory tool, the texts of "
        "memory:command), search, history, read_version; every change is a versioned "
        "commit. It runs on the data folder (creating it and the agent if new, "
        "committing as --actor), or with --url on a memfs server with the key in "
        f"${TOKEN_ENV}. stdout carries only MCP frames. Client configs: docs/mcp.md.",
        width=88,
    )
    p.add_argument(
        "--agent", required=True, metavar="AGENT_ID", help="the agent whose memory the tools use"
    )
    p.add_argument(
        "--url",
        metavar="URL",
        help=f"a memfs server's base URL (e.g. http://127.0.0.1:8750); key from ${TOKEN_ENV}",
    )
    p.set_defaults(creates_data=True, opens_store=_opens_store)
