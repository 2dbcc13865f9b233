"""``memfs fsck`` and ``reindex``: verify the store and rebuild its derived state.
"""

from __future__ import annotations

import argparse
import sys

from memfs.cli.base import Parser, command, out
from memfs.core import maintenance
from memfs.core.store import Store


def cmd_fsck(args: argparse.Namespace, store: Store) -> int:
    report = maintenance.fsck(store, repair=args.repair)
    lines = [
        f"checked {report.agents} agent(s), {report.commits} commit(s), {report.objects} object(s)"
    ]
    lines += [f"DAMAGED  {m}" for m in report.damaged]
    lines += [f"derived  {m}" for m in report.derived]
    lines += [f"repaired {m}" for m in report.repaired]
    lines += [f"restored {m}" for m in report.restored]
    lines += [f"uncommitted {m}" for m in report.uncommitted]
    lines += [f"warning  {m}" for m in report.warnings]
    if report.damaged:
        lines.append(
            "canonical state is damaged: each DAMAGED line says its fix; --repair restores"
            " only from intact copies"
        )
    elif not report.ok:
        lines.append("derived state is out of date: run 'memfs fsck --repair'")
    else:
        lines.append("ok")
    out(args, report.to_json(), lines)
    return 0 if report.ok else 1


def cmd_reindex(args: argparse.Namespace, store: Store) -> int:
    result = maintenance.reindex(store, progress=lambda note: print(note, file=sys.stderr))
    lines = [f"reindexed {result.agents} agent(s), {result.commits} commit(s)"]
    lines += [
        f"DAMAGED  {agent}: {file}: {why} — refused; run 'memfs fsck'"
        for agent, file, why in result.damaged
    ]
    damaged = [{"agentId": a, "file": f, "reason": w} for a, f, w in result.damaged]
    out(args, {"agents": result.agents, "commits": result.commits, "damaged": damaged}, lines)
    return 1 if result.damaged else 0


def add_commands(sub: argparse._SubParsersAction[Parser]) -> None:
    p = command(
        sub,
        "fsck",
        cmd_fsck,
        "verify every object, the log, the index and the working trees",
        "memfs fsck --repair",
    )
    p.add_argument("--repair", action="store_true", help="rebuild derived state that is off")
    command(sub, "reindex", cmd_reindex, "rebuild the index from the log", "memfs reindex")
