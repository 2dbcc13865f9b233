"""The ``memfs`` command: local mode on a data folder, safe beside a running server.

Each subcommand is a thin shell over Store / maintenance functions: parse, call,
print. Commands are declared next to their handlers, one module per command group
(``memories``, ``webhooks``, ``audit``, ``integrity``, ``keys``, ``backup``, ``serve``,
``mcp``). Errors print one line ``memfs: <reason>`` on stderr and exit non-zero:
2 bad input, 3 not found, 4 conflict, 5 precondition failed, 6 too large, 1 other.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from memfs import __version__, config
from memfs.cli import audit, backup, integrity, keys, mcp, memories, search, serve, webhooks
from memfs.cli.base import EXIT_CODES, Parser, common_options
from memfs.core import faults, healing, indexes, maintenance, objects
from memfs.core.store import Store
from memfs.errors import Damaged, MemfsError

__all__ = ["EXIT_CODES", "build_parser", "main"]


def build_parser() -> Parser:
    parser = Parser(
        prog="memfs",
        description="memfs: versioned Markdown memories for AI agents. Works directly on the "
        "data folder, safely beside a running server.",
        epilog="example:\n  memfs agents create demo && echo '# hi' | memfs put demo notes/hi.md"
        "\n  memfs ls demo -l && memfs log demo -p",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"memfs {__version__}")
    common_options(parser, argparse.SUPPRESS)
    parser.set_defaults(
        data=Path(os.environ.get("MEMFS_DATA", "data")),
        index=os.environ.get("MEMFS_INDEX"),
        json=False,
        actor=maintenance.default_actor(),
        objects=None,
        s3_endpoint=None,
        s3_region=None,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True

    # The order is the order of 'memfs --help'.
    for group in (serve, mcp, webhooks, memories, search, audit, integrity, keys, backup):
        group.add_commands(sub)
    return parser


def _data_folder_problem(args: argparse.Namespace) -> str | None:
    """Why ``--data`` can't be used, or None; says on stderr when one is created.

    Only commands that make state from nothing (serve, agents create, import, restore)
    may create the folder: a typo in --data must not yield an empty store silently.
    """
    data: Path = args.data
    if not str(data) or (str(data) == "." and os.environ.get("MEMFS_DATA") == ""):
        return "the data folder is empty; set --data or MEMFS_DATA to a folder"
    if data.exists():
        return None if data.is_dir() else f"data folder {data} is not a folder"
    if getattr(args, "creates_data", False):
        print(f"memfs: creating data folder {data}", file=sys.stderr)
        return None
    return (
        f"data folder {data} does not exist; point --data (or MEMFS_DATA) at one, "
        "or make one with 'memfs agents create AGENT' or 'memfs serve'"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    opens_store = getattr(args, "opens_store", True)
    if callable(opens_store):  # mcp --url opens none
        opens_store = opens_store(args)
    if not opens_store:  # restore makes its own data folder
        restoring = getattr(args, "opens_store", True) is False  # mcp --url: a callable
        if restoring and (args.objects or os.environ.get("MEMFS_OBJECTS")):
            print(
                "memfs: restore writes a local data folder; objects on S3 (--objects,"
                " MEMFS_OBJECTS) are restored with the storage's own tools",
                file=sys.stderr,
            )
            return 2
        try:
            code: int = args.handler(args, None)
            return code
        except MemfsError as exc:
            print(f"memfs: {exc.message}", file=sys.stderr)
            return EXIT_CODES.get(exc.code, 1)
    if getattr(args, "precheck", None) is not None:  # bad settings: nothing is created
        try:
            args.precheck(args)
        except MemfsError as exc:
            print(f"memfs: {exc.message}", file=sys.stderr)
            return EXIT_CODES.get(exc.code, 1)
    # Objects and index first: storage memfs can't use creates nothing, not even the
    # data folder.
    try:
        location = config.index_location("MEMFS_INDEX (--index)", args.index or "")
        indexes.open_for_store(location)
        where = config.load_objects(
            os.environ,
            {"objects": args.objects, "s3_endpoint": args.s3_endpoint, "s3_region": args.s3_region},
        )
        backend = objects.open_backend(where)
        if backend is not None:
            objects.check_bucket(backend, where)
    except MemfsError as exc:
        print(f"memfs: {exc.message}", file=sys.stderr)
        return EXIT_CODES.get(exc.code, 1)
    problem = _data_folder_problem(args)
    if problem is not None:
        print(f"memfs: {problem}", file=sys.stderr)
        return 2
    try:
        store = Store(
            args.data, backend=backend, index_location=location, worktree=backend is None
        )
    except OSError as exc:
        print(f"memfs: can't open data folder {args.data}: {exc.strerror}", file=sys.stderr)
        return 1
    try:
        if store.index.created and args.handler is not integrity.cmd_reindex:
            # A lost index is rebuilt from the log first, as the server does.
            healing.heal(store, progress=lambda note: print(note, file=sys.stderr))
        code = args.handler(args, store)
        return code
    except MemfsError as exc:
        if isinstance(exc, Damaged):
            store.record_damage(exc)
        print(f"memfs: {exc.message}", file=sys.stderr)
        return EXIT_CODES.get(exc.code, 1)
    except BrokenPipeError:
        return 0
    except faults.MACHINE_ERRORS as exc:
        translated = faults.translate(exc)
        if translated is None:
            raise
        print(f"memfs: {translated.message}", file=sys.stderr)
        return 1
    finally:
        store.close()
