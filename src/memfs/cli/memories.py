"""``memfs agents``, ``ls``, ``cat``, ``put``, ``rm``, ``mv``, ``log``, ``show``, ``diff``,
``versions``, ``status`` and ``commit``: agents, memories, history and the working tree.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from memfs import wire
from memfs.cli.base import Parser, command, memory_path, out, positive, read_input
from memfs.core import maintenance
from memfs.core.store import Store
from memfs.domain.commits import format_ts
from memfs.domain.records import FolderEntry
from memfs.errors import InvalidRequest, MemfsError, NotFound

# ---- agents ----------------------------------------------------------------------


def cmd_agents_create(args: argparse.Namespace, store: Store) -> int:
    agent = store.create_agent(args.agent, args.name)
    out(args, wire.agent_json(agent), [f"created agent {agent.agent_id}"])
    return 0


def cmd_agents_ls(args: argparse.Namespace, store: Store) -> int:
    agents = [a for a in store.iter_agents() if a.agent_id.startswith(args.prefix)]
    out(
        args,
        {"agents": [wire.agent_json(a) for a in agents]},
        [f"{a.agent_id}  r{a.revision}  {a.name}" if args.long else a.agent_id for a in agents],
    )
    return 0


def cmd_agents_rm(args: argparse.Namespace, store: Store) -> int:
    if not args.yes:
        raise InvalidRequest(
            f"this erases agent {args.agent!r} and all of its history; add --yes to confirm"
        )
    store.erase_agent(args.agent)
    out(args, {"erased": args.agent}, [f"erased agent {args.agent}"])
    return 0


# ---- memories --------------------------------------------------------------------


def _filters(values: Sequence[str]) -> list[tuple[str, str]]:
    pairs = []
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidRequest(f"--meta takes KEY=VALUE, not {item!r}")
        pairs.append((key, value))
    return pairs


def cmd_ls(args: argparse.Namespace, store: Store) -> int:
    if args.depth not in (None, 1):
        raise InvalidRequest("--depth takes only 1 (omit it to list recursively)")
    filters = _filters(args.meta)
    items: list[Any] = []
    after: str | None = None
    while True:
        page, more = store.list_memories(
            args.agent,
            args.prefix,
            after=after,
            limit=1000,
            depth_one=args.depth == 1,
            filters=filters,
        )
        items.extend(page)
        if not more:
            break
        last = page[-1]
        after = last.path + "/" if isinstance(last, FolderEntry) else last.path
    memories = [wire.listing_json(i) for i in items if not isinstance(i, FolderEntry)]
    folders = [i.path for i in items if isinstance(i, FolderEntry)]
    out(args, {"memories": memories, "folders": folders}, wire.ls_lines(items, long=args.long))
    return 0


def _split_version(spec: str) -> tuple[str, int | None]:
    path, at, version = spec.rpartition("@")
    if at and version.isdigit():
        return path, int(version)
    return spec, None


def cmd_cat(args: argparse.Namespace, store: Store) -> int:
    path, version = _split_version(args.path)
    if args.version is not None:
        path, version = args.path, args.version
    memory = store.read(args.agent, memory_path(path), version)
    if args.json:
        out(args, wire.memory_json(memory))
    else:
        sys.stdout.buffer.write(memory.content)
        sys.stdout.buffer.flush()
    return 0


def cmd_put(args: argparse.Namespace, store: Store) -> int:
    data = read_input(args.file)
    result = store.write(
        args.agent,
        memory_path(args.path),
        data,
        if_match=args.if_match,
        create_only=args.create,
        actor=args.actor,
        message=args.message,
    )
    row = result.memory
    verb = "created" if result.created else ("updated" if result.changed else "unchanged")
    payload = {**wire.listing_json(row), "revision": result.revision, "result": verb}
    out(
        args,
        payload,
        [f"{verb} {row.path} v{row.version} {row.sha256[:12]} (revision {result.revision})"],
    )
    return 0


def cmd_rm(args: argparse.Namespace, store: Store) -> int:
    result = store.delete(
        args.agent,
        memory_path(args.path),
        if_match=args.if_match,
        actor=args.actor,
        message=args.message,
    )
    out(
        args,
        {"revision": result.revision},
        [f"deleted {memory_path(args.path)} (revision {result.revision})"],
    )
    return 0


def cmd_mv(args: argparse.Namespace, store: Store) -> int:
    src, dst = memory_path(args.src), memory_path(args.dst)
    result = store.rename(
        args.agent, src, dst, if_match=args.if_match, actor=args.actor, message=args.message
    )
    out(
        args,
        {"revision": result.revision},
        [f"renamed {src} -> {dst} (revision {result.revision})"],
    )
    return 0


# ---- history ---------------------------------------------------------------------


def _patches(store: Store, agent: str, commit_changes: Sequence[dict[str, Any]]) -> list[str]:
    patches: list[str] = []
    for change in commit_changes:
        before = store.content_of(agent, change["before"]) if change.get("before") else None
        after = store.content_of(agent, change["after"]) if change.get("after") else None
        version = int(change["version"])
        patches.append(wire.patch(change["path"], before, after, f"v{version - 1}", f"v{version}"))
    return patches


def cmd_log(args: argparse.Namespace, store: Store) -> int:
    path = memory_path(args.path) if args.path else None
    rows = store.log(args.agent, path=path, limit=args.max_count)
    if args.json:
        out(args, {"commits": [wire.commit_json(r) for r in rows]})
        return 0
    for row in rows:
        lines = wire.commit_header(row.revision, row.ts, row.actor, row.message)
        changes = [c for c in row.changes if path is None or c["path"] == path]
        lines += [wire.change_line(c) for c in changes]
        print("\n".join(lines))
        if args.patch:
            sys.stdout.write("\n" + "".join(_patches(store, args.agent, changes)))
        print()
    return 0


def cmd_show(args: argparse.Namespace, store: Store) -> int:
    commit = store.commit_at(args.agent, args.revision)
    changes = [c.to_json() for c in commit.changes]
    if args.json:
        for c in changes:
            c.pop("content", None)
        out(
            args,
            {
                "revision": commit.revision,
                "timestamp": format_ts(commit.ts),
                "actor": commit.actor,
                "message": commit.message,
                "changes": changes,
            },
        )
        return 0
    print("\n".join(wire.commit_text(commit)))
    sys.stdout.write("\n" + "".join(_patches(store, args.agent, changes)))
    return 0


def cmd_diff(args: argparse.Namespace, store: Store) -> int:
    path = memory_path(args.path)
    old = _version_bytes(store, args.agent, path, args.v1)
    new_version = args.v2 if args.v2 is not None else None
    if new_version is None:
        new = store.read(args.agent, path).content if _exists(store, args.agent, path) else None
        label = "current"
    else:
        new, label = _version_bytes(store, args.agent, path, new_version), f"v{new_version}"
    text = wire.patch(path, old, new, f"v{args.v1}", label)
    out(args, {"path": path, "from": args.v1, "to": args.v2, "diff": text}, text)
    return 0


def _exists(store: Store, agent: str, path: str) -> bool:
    try:
        store.read(agent, path)
        return True
    except MemfsError:
        return False


def _version_bytes(store: Store, agent: str, path: str, version: int) -> bytes | None:
    rows = store.versions(agent, path, after=version - 1, limit=1)
    if not rows or rows[0].version != version:
        raise NotFound(f"{path} has no version {version}")
    return store.content_of(agent, rows[0].sha256) if rows[0].sha256 else None


def cmd_versions(args: argparse.Namespace, store: Store) -> int:
    path = memory_path(args.path)
    rows = []
    after = 0
    while True:
        page = store.versions(args.agent, path, after=after, limit=1000)
        rows.extend(page)
        if len(page) < 1000:
            break
        after = page[-1].version
    out(
        args,
        {"versions": [wire.version_json(r) for r in rows]},
        [
            f"v{r.version:<3} {r.operation:<8} r{r.revision:<5} {format_ts(r.valid_from)}  "
            f"{(r.sha256 or '-')[:12]:12}  {r.actor}  {r.message}".rstrip()
            for r in rows
        ],
    )
    return 0


# ---- working tree and maintenance ------------------------------------------------


def cmd_status(args: argparse.Namespace, store: Store) -> int:
    changes = maintenance.status(store, args.agent)
    out(
        args,
        {"changes": [{"state": c.state, "path": c.path, "reason": c.reason} for c in changes]},
        [f"{c.state:>9}: {c.path}" + (f" ({c.reason})" if c.reason else "") for c in changes]
        or ["nothing to commit, working tree matches the head"],
    )
    return 0


def cmd_commit(args: argparse.Namespace, store: Store) -> int:
    result = maintenance.commit_worktree(store, args.agent, actor=args.actor, message=args.message)
    if result is None or result.commit is None:
        out(args, {"revision": None}, ["nothing to commit"])
        return 0
    out(
        args,
        {"revision": result.revision, "changes": len(result.commit.changes)},
        [f"committed {len(result.commit.changes)} change(s) as revision {result.revision}"],
    )
    return 0



def _writer_options(parser: Parser, *, if_match: bool = True) -> None:
    parser.add_argument("-m", "--message", default="", help="commit message")
    if if_match:
        parser.add_argument(
            "--if-match", metavar="SHA", help="only if the memory's current sha256 is SHA"
        )


def add_commands(sub: argparse._SubParsersAction[Parser]) -> None:
    agents = sub.add_parser(
        "agents",
        help="create, list and erase agents",
        description="create, list and erase agents",
        epilog="example:\n  memfs agents create demo && memfs agents ls -l",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    agents_sub = agents.add_subparsers(
        dest="agents_command", metavar="ACTION", parser_class=Parser
    )
    agents_sub.required = True
    p = command(
        agents_sub,
        "create",
        cmd_agents_create,
        "create an agent",
        "memfs agents create users/alice/assistant --name 'Alice assistant'",
    )
    p.add_argument("agent", help="agent id: '/'-separated segments of A-Z a-z 0-9 . _ -")
    p.add_argument("--name", help="display name (default: the id)")
    p.set_defaults(creates_data=True)
    p = command(agents_sub, "ls", cmd_agents_ls, "list agents", "memfs agents ls users/alice -l")
    p.add_argument("prefix", nargs="?", default="", help="only ids starting with this")
    p.add_argument("-l", "--long", action="store_true", help="show revision and name")
    p = command(
        agents_sub,
        "rm",
        cmd_agents_rm,
        "erase an agent and all its history",
        "memfs agents rm users/alice/assistant --yes",
    )
    p.add_argument("agent")
    p.add_argument("--yes", action="store_true", help="confirm the erasure")

    p = command(
        sub,
        "ls",
        cmd_ls,
        "list memories of a folder",
        "memfs ls users/alice/assistant conventions -l --depth 1",
    )
    p.add_argument("agent")
    p.add_argument("prefix", nargs="?", default="", help="folder relative to /memories")
    p.add_argument("-l", "--long", action="store_true", help="version, bytes, sha256, description")
    p.add_argument("--depth", type=int, help="1 lists like ls: files and subfolders")
    p.add_argument(
        "--meta",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only memories whose frontmatter has KEY: VALUE (repeatable)",
    )

    p = command(
        sub,
        "cat",
        cmd_cat,
        "print a memory's exact bytes (PATH@N for version N)",
        "memfs cat demo notes/hi.md@1",
    )
    p.add_argument("agent")
    p.add_argument("path")
    p.add_argument("--version", type=int, dest="version", help="read this version")

    p = command(
        sub,
        "put",
        cmd_put,
        "write a memory from FILE or standard input",
        "memfs put demo notes/hi.md hi.md -m 'first note'",
    )
    p.add_argument("agent")
    p.add_argument("path")
    p.add_argument("file", nargs="?", help="file to read (default or '-': standard input)")
    p.add_argument("--create", action="store_true", help="fail if the memory exists")
    _writer_options(p)

    p = command(
        sub,
        "rm",
        cmd_rm,
        "delete a memory (a tombstone version; history stays)",
        "memfs rm demo notes/hi.md -m 'obsolete'",
    )
    p.add_argument("agent")
    p.add_argument("path")
    _writer_options(p)

    p = command(
        sub,
        "mv",
        cmd_mv,
        "rename a memory in one commit",
        "memfs mv demo notes/hi.md archive/hi.md",
    )
    p.add_argument("agent")
    p.add_argument("src")
    p.add_argument("dst")
    _writer_options(p)

    p = command(
        sub, "log", cmd_log, "commits newest first, like git log", "memfs log demo notes/hi.md -p"
    )
    p.add_argument("agent")
    p.add_argument("path", nargs="?", help="only commits that touched this memory")
    p.add_argument("-p", "--patch", action="store_true", help="show each change as a diff")
    p.add_argument(
        "-n", "--max-count", type=positive, default=1 << 30, help="at most N commits"
    )

    p = command(sub, "show", cmd_show, "one commit with its diff", "memfs show demo 3")
    p.add_argument("agent")
    p.add_argument("revision", type=positive)

    p = command(
        sub,
        "diff",
        cmd_diff,
        "unified diff between two versions of a memory",
        "memfs diff demo notes/hi.md 1 2",
    )
    p.add_argument("agent")
    p.add_argument("path")
    p.add_argument("v1", type=positive)
    p.add_argument("v2", type=positive, nargs="?", help="default: the current content")

    p = command(
        sub,
        "versions",
        cmd_versions,
        "every version of one memory",
        "memfs versions demo notes/hi.md",
    )
    p.add_argument("agent")
    p.add_argument("path")

    p = command(
        sub,
        "status",
        cmd_status,
        "hand edits in the working tree not yet committed",
        "memfs status demo",
    )
    p.add_argument("agent")
    p = command(
        sub,
        "commit",
        cmd_commit,
        "record the working tree's hand edits as one commit",
        "memfs commit demo -m 'edited by hand'",
    )
    p.add_argument("agent")
    p.add_argument("-m", "--message", default="", help="commit message")
