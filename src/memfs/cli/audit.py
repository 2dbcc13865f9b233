"""``memfs inspect``, ``export`` and ``import``: the audit view and whole-history transfer.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from memfs.cli.base import Parser, command, out
from memfs.client import Client
from memfs.core import export
from memfs.core import inspect as inspect_mod
from memfs.core.store import Store
from memfs.core.tokens import Signer
from memfs.domain import paths
from memfs.domain.commits import format_ts, parse_ts
from memfs.domain.gitexport import write_fast_import
from memfs.errors import InvalidRequest

# ---- audit and export ------------------------------------------------------------

_SECTION_LISTINGS = {"vectors": ("chunks",), "graph": ("nodes", "edges"), "log": ("log",)}


def _local_client(store: Store, target: inspect_mod.Target) -> Client:
    """The Python client over an in-process transport that answers ``memory:inspect``
    from the data folder: the CLI pages exactly as the client does, with no server."""
    import httpx

    signer = Signer.for_data_dir(store.data_dir)

    def answer(request: httpx.Request) -> httpx.Response:
        pages, as_of = inspect_mod.parse_request(json.loads(request.content))
        return httpx.Response(200, json=inspect_mod.inspect(store, target, pages, as_of, signer))

    return Client("http://memfs.local", "local", transport=httpx.MockTransport(answer))


def cmd_inspect(args: argparse.Namespace, store: Store) -> int:
    target = _target(args)
    sections = args.section or ["vectors", "graph", "log"]
    as_of = None
    if args.as_of is not None:
        try:
            as_of = format_ts(parse_ts(args.as_of))
        except ValueError:
            raise InvalidRequest(f"--as-of {args.as_of!r} is not an RFC 3339 timestamp") from None
    where: dict[str, str] = (
        {"agent_id": target.ident} if target.kind == "agent" else {"scope_id": target.ident}
    )
    progress = sys.stderr.isatty() and not args.json
    counts: dict[str, int] = {}
    with _local_client(store, target) as client:
        if as_of is None:  # one instant for every listing: the read time of a first page
            as_of = client.inspect({"log": {"limit": 1}}, **where).read_timestamp
        for section in ("vectors", "graph", "log"):
            if section not in sections:
                continue
            for listing in _SECTION_LISTINGS[section]:
                counts[listing] = 0
                for item in client.iter_inspect(listing, as_of=as_of, limit=200, **where):
                    print(json.dumps({"section": listing, **item}, ensure_ascii=False))
                    counts[listing] += 1
                    if progress and counts[listing] % 200 == 0:
                        done = ", ".join(f"{v} {k}" for k, v in counts.items())
                        print(f"\rinspect: {done}", end="", file=sys.stderr, flush=True)
    if progress:
        done = ", ".join(f"{v} {k}" for k, v in counts.items())
        print(f"\rinspect: {done}", file=sys.stderr)
    return 0


def _target(args: argparse.Namespace) -> inspect_mod.Target:
    if (args.agent is None) == (args.scope is None):
        raise InvalidRequest("name one AGENT or --scope ID")
    if args.agent is not None:
        store_agent = paths.agent_id(args.agent)
        return inspect_mod.Target("agent", store_agent)
    return inspect_mod.Target("scope", paths.scope_id(args.scope))


def cmd_export(args: argparse.Namespace, store: Store) -> int:
    target = _target(args)
    ids = export.agents_in(store, args.agent, args.scope)
    stream = sys.stdout.buffer
    if args.format == "git":
        if target.kind != "agent":
            raise InvalidRequest("--format git exports one agent; name it instead of --scope")
        def skipped(revision: int, path: str) -> None:
            print(
                f"memfs: skipped {path} of revision {revision}: git can't hold a .git"
                " segment (memfs refuses such paths now)",
                file=sys.stderr,
            )

        write_fast_import(export.git_commits(store, ids[0]), stream, skipped=skipped)
    else:
        for record in export.iter_export(store, ids):
            stream.write(json.dumps(record, ensure_ascii=False).encode() + b"\n")
    stream.flush()
    return 0


def cmd_import(args: argparse.Namespace, store: Store) -> int:
    def records() -> Iterator[dict[str, Any]]:
        if args.file in (None, "-"):
            source = sys.stdin.buffer
        else:
            try:
                source = open(args.file, "rb")  # noqa: SIM115 - closed by the with below
            except OSError as exc:
                raise InvalidRequest(f"can't read {args.file}: {exc.strerror}") from None
        with source:
            for number, line in enumerate(source, start=1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except ValueError as exc:
                    raise InvalidRequest(f"line {number} is not JSON: {exc}") from None

    imported = export.import_records(store, records())
    out(args, {"imported": imported}, [f"imported agent {a}" for a in imported])
    return 0


def add_commands(sub: argparse._SubParsersAction[Parser]) -> None:
    p = command(
        sub,
        "inspect",
        cmd_inspect,
        "the audit view (chunks, graph, log) as JSON lines, paged to the end",
        "memfs inspect users/alice/assistant --section log --as-of 2026-01-01T00:00:00Z",
    )
    p.add_argument("agent", nargs="?")
    p.add_argument("--scope", help="every agent under this scope id instead of one agent")
    p.add_argument("--as-of", help="read the store as it was then (RFC 3339)")
    p.add_argument(
        "--section",
        action="append",
        choices=["vectors", "graph", "log"],
        help="only these sections (repeatable; default all)",
    )

    p = command(
        sub,
        "export",
        cmd_export,
        "full history as JSON lines, or a git fast-import stream",
        "memfs export demo --format git | (git init -q -b main repo && cd repo && git fast-import --quiet && git checkout -q main)",
    )
    p.add_argument("agent", nargs="?")
    p.add_argument("--scope", help="every agent under this scope id (JSON lines only)")
    p.add_argument("--format", choices=["jsonl", "git"], default="jsonl")

    p = command(
        sub,
        "import",
        cmd_import,
        "recreate agents from 'memfs export' JSON lines (they must not exist yet)",
        "memfs export demo > demo.jsonl && memfs --data other import demo.jsonl",
    )
    p.add_argument("file", nargs="?", help="JSON lines file (default or '-': standard input)")
    p.set_defaults(creates_data=True)
