"""What every ``memfs`` command module shares: the parser class, output, exit codes.

``memfs.cli`` builds the top of the command tree; each command group module
(``memories``, ``webhooks``, ``audit``, ``integrity``, ``keys``, ``backup``, ``serve``)
declares its subcommands next to their handlers with ``command``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from memfs.domain.paths import ROOT
from memfs.errors import InvalidRequest

if TYPE_CHECKING:
    from memfs.core.store import Store

EXIT_CODES = {
    "invalid_request": 2,
    "not_found": 3,
    "conflict": 4,
    "precondition_failed": 5,
    "payload_too_large": 6,
}

Handler = Callable[[argparse.Namespace, "Store"], int]


class Parser(argparse.ArgumentParser):
    """Bad usage exits 2 with one line; options may come before or after positionals.

    ``memfs put A P FILE -m msg`` and ``memfs put A P -m msg FILE`` both work: a leaf
    command parses intermixed (plain argparse would bind the optional FILE to nothing
    at ``A P`` and then refuse FILE as an extra argument).
    """

    intermixed = False
    _parsing = False

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"memfs: {message} (see '{self.prog} --help')\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # parse_known_intermixed_args calls parse_known_args itself: the flag stops the
        # recursion at the second level.
        if not self.intermixed or self._parsing:
            return super().parse_known_args(args, namespace)
        self._parsing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._parsing = False


def positive(value: str) -> int:
    """An argparse type: an integer >= 1 (a count, a revision, a version)."""
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer >= 1")
    return number


def memory_path(value: str) -> str:
    """CLI paths may leave out the /memories/ root: notes/a.md = /memories/notes/a.md."""
    if value.startswith(ROOT + "/") or value.startswith("/"):
        return value
    return f"{ROOT}/{value}"


def read_input(source: str | None) -> bytes:
    """The bytes of FILE, or of standard input for None or '-'."""
    if source in (None, "-"):
        return sys.stdin.buffer.read()
    try:
        return Path(source).read_bytes()
    except OSError as exc:
        raise InvalidRequest(f"can't read {source}: {exc.strerror}") from None


def out(args: argparse.Namespace, data: Any, text: Iterable[str] | str = ()) -> None:
    """``data`` as one JSON line with ``--json``, else ``text`` (lines or a string)."""
    if args.json:
        print(json.dumps(data, ensure_ascii=False))
    elif isinstance(text, str):
        sys.stdout.write(text)
    else:
        for line in text:
            print(line)


def common_options(parser: argparse.ArgumentParser, default: Any) -> None:
    # Accepted before or after the subcommand; SUPPRESS keeps a later absence from
    # overwriting an earlier presence.
    parser.add_argument(
        "--data", type=Path, default=default, help="data folder (default: $MEMFS_DATA or ./data)"
    )
    parser.add_argument(
        "--index",
        default=default,
        metavar="URL",
        help="a postgresql:// index shared by many servers (default: $MEMFS_INDEX, or"
        " SQLite in the data folder)",
    )
    parser.add_argument(
        "--objects",
        default=default,
        metavar="s3://BUCKET[/PREFIX]",
        help="canonical objects on S3 instead of the data folder (default: $MEMFS_OBJECTS);"
        " the local working tree is then off",
    )
    parser.add_argument(
        "--s3-endpoint",
        default=default,
        metavar="URL",
        help="the S3 endpoint, e.g. http://127.0.0.1:8333 (default: $MEMFS_S3_ENDPOINT, or AWS)",
    )
    parser.add_argument(
        "--s3-region",
        default=default,
        metavar="REGION",
        help="the S3 region (default: $MEMFS_S3_REGION, else us-east-1)",
    )
    parser.add_argument(
        "--json", action="store_true", default=default, help="print JSON instead of text"
    )
    parser.add_argument("--actor", default=default, help="who commits are recorded as")


COMMON = Parser(add_help=False)
common_options(COMMON, argparse.SUPPRESS)


def command(
    sub: argparse._SubParsersAction[Parser],
    name: str,
    handler: Handler,
    help_text: str,
    example: str,
    *,
    intermixed: bool = True,
) -> Parser:
    """A leaf command with the common options, ``--help`` text and an example."""
    parser = sub.add_parser(
        name,
        parents=[COMMON],
        help=help_text,
        description=help_text,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.intermixed = intermixed
    parser.set_defaults(handler=handler)
    return parser
