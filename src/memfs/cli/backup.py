"""``memfs backup`` and ``memfs restore``: a consistent copy of a data folder, online.

The work is in ``backup.py``; restore then derives the index and the working trees
with the same functions as ``memfs reindex`` and ``memfs fsck --repair``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from memfs.cli.base import Parser, command, out
from memfs.core import backup, maintenance, objects
from memfs.core.store import Store
from memfs.errors import CorruptionError


def cmd_backup(args: argparse.Namespace, store: Store) -> int:
    objects.require_local(store, "memfs backup")
    report = backup.backup(store.data_dir, args.dest)
    lines = [
        f"backed up {len(report.agents)} agent(s), {report.keys} key(s): "
        f"{report.files} file(s), {report.bytes} bytes into {args.dest}"
    ]
    lines += [f"not included: {s}" for s in report.skipped]
    out(args, {"dest": str(args.dest), **report.to_json()}, lines)
    return 0


def cmd_restore(args: argparse.Namespace, store: Store | None) -> int:
    files = backup.restore(args.src, args.data, force=args.force)
    restored = Store(args.data)
    try:
        rebuilt = maintenance.reindex(restored)
        agents, commits = rebuilt.agents, rebuilt.commits
        backup.checkout(restored)
        report = maintenance.fsck(restored, repair=True)
    finally:
        restored.close()
    if report.damaged:
        raise CorruptionError(f"restored, but fsck finds damage: {report.damaged[0]}")
    out(
        args,
        {"files": files, "agents": agents, "commits": commits, "data": str(args.data)},
        [
            f"restored {files} file(s) into {args.data}: {agents} agent(s), {commits} commit(s);"
            " index and working trees rebuilt"
        ],
    )
    return 0


def add_commands(sub: argparse._SubParsersAction[Parser]) -> None:
    p = command(
        sub,
        "backup",
        cmd_backup,
        "copy all canonical state into a new folder, safely beside a running server",
        "memfs backup /var/backups/memfs-$(date +%F)",
    )
    p.add_argument("dest", type=Path, metavar="DEST", help="a new (or empty) folder")
    p = command(
        sub,
        "restore",
        cmd_restore,
        "rebuild a data folder from a backup (every file's sha256 is checked first)",
        "memfs restore /var/backups/memfs-2026-12-01 --data ./data-restored",
    )
    p.add_argument("src", type=Path, metavar="SRC", help="a folder written by 'memfs backup'")
    p.add_argument(
        "--force", action="store_true", help="replace what an existing data folder --data holds"
    )
    p.set_defaults(opens_store=False)
