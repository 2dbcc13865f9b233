"""``memfs keys``: application keys and the admin key, on the data folder.

The key store is the one the server reads on every request (``keys/<keyId>.json``),
so a key made or revoked here counts for a running server at its next request; a
rotated ``admin.key`` is re-read by every worker when the file changes.
"""

from __future__ import annotations

import argparse
import os

from memfs.cli.base import Parser, command, out
from memfs.core.keys import KeyRing, rotate_admin
from memfs.core.store import Store
from memfs.domain.commits import format_ts


def cmd_keys_create(args: argparse.Namespace, store: Store) -> int:
    key, secret = KeyRing.of(store).create(args.key, args.scope, args.description)
    shown = {**key.to_json(), "secret": secret}
    out(
        args,
        shown,
        [
            f"created key {key.key_id} with scopes {' '.join(key.scopes)}",
            f"secret: {secret}",
            "(shown once: memfs keeps only its hash)",
        ],
    )
    return 0


def cmd_keys_ls(args: argparse.Namespace, store: Store) -> int:
    keys = sorted(KeyRing.of(store).list(), key=lambda k: k.key_id)
    out(
        args,
        {"keys": [k.to_json() for k in keys]},
        [
            f"{k.key_id}  {format_ts(k.created_at)}  {' '.join(k.scopes)}"
            + (f"  {k.description}" if k.description else "")
            for k in keys
        ],
    )
    return 0


def cmd_keys_revoke(args: argparse.Namespace, store: Store) -> int:
    KeyRing.of(store).revoke(args.key)
    out(args, {"revoked": args.key}, [f"revoked key {args.key}; it stops working at once"])
    return 0


def cmd_keys_rotate_admin(args: argparse.Namespace, store: Store) -> int:
    path = rotate_admin(store.data_dir, os.environ.get("MEMFS_ADMIN_KEY") or None)
    out(
        args,
        {"adminKeyFile": str(path)},
        [
            f"wrote a new admin key to {path} (mode 0600);"
            " the old one no longer works, for running servers too"
        ],
    )
    return 0


def add_commands(sub: argparse._SubParsersAction[Parser]) -> None:
    keys = sub.add_parser(
        "keys",
        help="application keys and the admin key",
        description="application keys (scoped bearer secrets) and the admin key",
        epilog="example:\n  memfs keys create alice-app --scope memories:read memories:write"
        " agents:users/alice",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    k_sub = keys.add_subparsers(dest="keys_command", metavar="ACTION", parser_class=Parser)
    k_sub.required = True
    p = command(
        k_sub,
        "create",
        cmd_keys_create,
        "create an application key; prints its secret once",
        "memfs keys create alice-app --scope memories:read agents:users/alice",
    )
    p.add_argument("key", metavar="KEYID", help="1-128 of A-Z a-z 0-9 . _ -")
    p.add_argument(
        "--scope",
        action="extend",
        nargs="+",
        required=True,
        metavar="TOKEN",
        help="scope tokens: memories:read memories:write inspect triggers:write runs:read"
        " agents:<scopeId> agents:*",
    )
    p.add_argument("--description", default="", help="what the key is for")
    command(k_sub, "ls", cmd_keys_ls, "list keys (never their secrets)", "memfs keys ls --json")
    p = command(
        k_sub,
        "revoke",
        cmd_keys_revoke,
        "revoke a key; a running server refuses it at its next request",
        "memfs keys revoke alice-app",
    )
    p.add_argument("key", metavar="KEYID")
    command(
        k_sub,
        "rotate-admin",
        cmd_keys_rotate_admin,
        "write a new data/admin.key; the old admin key stops working",
        "memfs keys rotate-admin && cat data/admin.key",
    )
