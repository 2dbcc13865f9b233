"""The ``memfs`` command: local mode on a data folder, safe beside a running server.

Each subcommand is a thin shell over Store / maintenance functions: parse, call,
print. Errors print one line ``memfs: <reason>`` on stderr and exit non-zero:
2 bad input, 3 not found, 4 conflict, 5 precondition failed, 6 too large, 1 other.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from memfs import (
    __version__,
    cli_backup,
    cli_base,
    cli_keys,
    export,
    faults,
    healing,
    maintenance,
    paths,
    render,
    serve,
)
from memfs import inspect as inspect_mod
from memfs.client import Client
from memfs.commits import format_ts, parse_ts
from memfs.errors import (
    Conflict,
    Damaged,
    InvalidRequest,
    MemfsError,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
)
from memfs.gitexport import write_fast_import
from memfs.index import FolderEntry, IndexGone
from memfs.paths import ROOT
from memfs.runs import Run, Runs, check_run_id
from memfs.store import Store
from memfs.tokens import Signer
from memfs.triggers import Triggers

EXIT_CODES = cli_base.EXIT_CODES
Handler = cli_base.Handler
_Parser = cli_base.Parser
_out = cli_base.out
_COMMON = cli_base.COMMON
_common_options = cli_base.common_options
_command = cli_base.command


def memory_path(value: str) -> str:
    """CLI paths may leave out the /memories/ root: notes/a.md = /memories/notes/a.md."""
    if value.startswith(ROOT + "/") or value.startswith("/"):
        return value
    return f"{ROOT}/{value}"


def _read_input(source: str | None) -> bytes:
    if source in (None, "-"):
        return sys.stdin.buffer.read()
    try:
        return Path(source).read_bytes()
    except OSError as exc:
        raise InvalidRequest(f"can't read {source}: {exc.strerror}") from None


# ---- agents ----------------------------------------------------------------------


def cmd_agents_create(args: argparse.Namespace, store: Store) -> int:
    agent = store.create_agent(args.agent, args.name)
    _out(args, render.agent_json(agent), [f"created agent {agent.agent_id}"])
    return 0


def cmd_agents_ls(args: argparse.Namespace, store: Store) -> int:
    agents = [a for a in store.iter_agents() if a.agent_id.startswith(args.prefix)]
    _out(
        args,
        {"agents": [render.agent_json(a) for a in agents]},
        [f"{a.agent_id}  r{a.revision}  {a.name}" if args.long else a.agent_id for a in agents],
    )
    return 0


def cmd_agents_rm(args: argparse.Namespace, store: Store) -> int:
    if not args.yes:
        raise InvalidRequest(
            f"this erases agent {args.agent!r} and all of its history; add --yes to confirm"
        )
    store.erase_agent(args.agent)
    _out(args, {"erased": args.agent}, [f"erased agent {args.agent}"])
    return 0


# ---- memories --------------------------------------------------------------------


def _filters(values: Sequence[str]) -> list[tuple[str, str]]:
    out = []
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidRequest(f"--meta takes KEY=VALUE, not {item!r}")
        out.append((key, value))
    return out


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
    memories = [render.listing_json(i) for i in items if not isinstance(i, FolderEntry)]
    folders = [i.path for i in items if isinstance(i, FolderEntry)]
    _out(args, {"memories": memories, "folders": folders}, render.ls_lines(items, long=args.long))
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
        _out(args, render.memory_json(memory))
    else:
        sys.stdout.buffer.write(memory.content)
        sys.stdout.buffer.flush()
    return 0


def cmd_put(args: argparse.Namespace, store: Store) -> int:
    data = _read_input(args.file)
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
    payload = {**render.listing_json(row), "revision": result.revision, "result": verb}
    _out(
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
    _out(
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
    _out(
        args,
        {"revision": result.revision},
        [f"renamed {src} -> {dst} (revision {result.revision})"],
    )
    return 0


# ---- history ---------------------------------------------------------------------


def _patches(store: Store, agent: str, commit_changes: Sequence[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for change in commit_changes:
        before = store.content_of(agent, change["before"]) if change.get("before") else None
        after = store.content_of(agent, change["after"]) if change.get("after") else None
        version = int(change["version"])
        out.append(render.patch(change["path"], before, after, f"v{version - 1}", f"v{version}"))
    return out


def cmd_log(args: argparse.Namespace, store: Store) -> int:
    path = memory_path(args.path) if args.path else None
    rows = store.log(args.agent, path=path, limit=args.max_count)
    if args.json:
        _out(args, {"commits": [render.commit_json(r) for r in rows]})
        return 0
    for row in rows:
        lines = render.commit_header(row.revision, row.ts, row.actor, row.message)
        changes = [c for c in row.changes if path is None or c["path"] == path]
        lines += [render.change_line(c) for c in changes]
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
        _out(
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
    print("\n".join(render.commit_text(commit)))
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
    text = render.patch(path, old, new, f"v{args.v1}", label)
    _out(args, {"path": path, "from": args.v1, "to": args.v2, "diff": text}, text)
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
    _out(
        args,
        {"versions": [render.version_json(r) for r in rows]},
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
    _out(
        args,
        {"changes": [{"state": c.state, "path": c.path, "reason": c.reason} for c in changes]},
        [f"{c.state:>9}: {c.path}" + (f" ({c.reason})" if c.reason else "") for c in changes]
        or ["nothing to commit, working tree matches the head"],
    )
    return 0


def cmd_commit(args: argparse.Namespace, store: Store) -> int:
    result = maintenance.commit_worktree(store, args.agent, actor=args.actor, message=args.message)
    if result is None or result.commit is None:
        _out(args, {"revision": None}, ["nothing to commit"])
        return 0
    _out(
        args,
        {"revision": result.revision, "changes": len(result.commit.changes)},
        [f"committed {len(result.commit.changes)} change(s) as revision {result.revision}"],
    )
    return 0


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
    _out(args, report.to_json(), lines)
    return 0 if report.ok else 1


def cmd_reindex(args: argparse.Namespace, store: Store) -> int:
    result = maintenance.reindex(store, progress=lambda note: print(note, file=sys.stderr))
    lines = [f"reindexed {result.agents} agent(s), {result.commits} commit(s)"]
    lines += [
        f"DAMAGED  {agent}: {file}: {why} — refused; run 'memfs fsck'"
        for agent, file, why in result.damaged
    ]
    damaged = [{"agentId": a, "file": f, "reason": w} for a, f, w in result.damaged]
    _out(args, {"agents": result.agents, "commits": result.commits, "damaged": damaged}, lines)
    return 1 if result.damaged else 0


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
    out = sys.stdout.buffer
    if args.format == "git":
        if target.kind != "agent":
            raise InvalidRequest("--format git exports one agent; name it instead of --scope")
        def skipped(revision: int, path: str) -> None:
            print(
                f"memfs: skipped {path} of revision {revision}: git can't hold a .git"
                " segment (memfs refuses such paths now)",
                file=sys.stderr,
            )

        write_fast_import(export.git_commits(store, ids[0]), out, skipped=skipped)
    else:
        for record in export.iter_export(store, ids):
            out.write(json.dumps(record, ensure_ascii=False).encode() + b"\n")
    out.flush()
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
    _out(args, {"imported": imported}, [f"imported agent {a}" for a in imported])
    return 0


# ---- triggers, runs, deliveries ------------------------------------------------------


def cmd_triggers_add(args: argparse.Namespace, store: Store) -> int:
    store.get_agent(args.agent)
    body: dict[str, Any] = {"prompt": args.prompt, "maxAttempts": args.max_attempts}
    if args.command:
        body["action"] = {"type": "command", "argv": args.command, "timeoutSeconds": args.timeout}
    elif args.path:
        body["action"] = {"type": "memory", "path": args.path}
    if args.secret:
        body["secret"] = args.secret
    trigger, created = Triggers(store.backend).put(args.agent, args.trigger, body)
    shown = trigger.to_json(with_secret=created or bool(args.secret))
    lines = [f"{'created' if created else 'updated'} trigger {trigger.trigger_id}"]
    if "secret" in shown:
        lines.append(f"secret: {shown['secret']}  (shown once; signs deliveries)")
    _out(args, shown, lines)
    return 0


def cmd_triggers_ls(args: argparse.Namespace, store: Store) -> int:
    store.get_agent(args.agent)
    items = Triggers(store.backend).list(args.agent)
    _out(
        args,
        {"triggers": [t.to_json() for t in items]},
        [f"{t.trigger_id}  {t.action['type']}  maxAttempts={t.max_attempts}" for t in items],
    )
    return 0


def cmd_triggers_rm(args: argparse.Namespace, store: Store) -> int:
    store.get_agent(args.agent)
    Triggers(store.backend).delete(args.agent, args.trigger)
    _out(args, {"deleted": args.trigger}, [f"deleted trigger {args.trigger}"])
    return 0


def cmd_triggers_rotate(args: argparse.Namespace, store: Store) -> int:
    store.get_agent(args.agent)
    trigger = Triggers(store.backend).rotate(args.agent, args.trigger)
    shown = trigger.to_json(with_secret=True)
    _out(
        args,
        shown,
        [f"new secret: {shown['secret']}", "the previous secret keeps verifying for 24 hours"],
    )
    return 0


def _run_line(run: Run) -> str:
    when = format_ts(run.created_at)
    return (
        f"{run.run_id}  {run.status:<9} attempt {run.attempt}/{run.max_attempts}  {when}  "
        f"{run.trigger_id}  {run.webhook_id}"
    )


def cmd_runs_ls(args: argparse.Namespace, store: Store) -> int:
    store.get_agent(args.agent)
    runs = Runs(store).list(
        args.agent, trigger_id=args.trigger, status=args.status, after=None, limit=args.limit
    )
    _out(args, {"runs": [r.to_json() for r in runs]}, [_run_line(r) for r in runs])
    return 0


def cmd_runs_show(args: argparse.Namespace, store: Store) -> int:
    store.get_agent(args.agent)
    run = Runs(store).get(args.agent, check_run_id(args.run))
    doc = run.to_json()
    lines = [f"{k}: {'-' if v is None else v}" for k, v in doc.items() if k != "output"]
    if run.output:
        lines += ["output:", run.output]
    _out(args, doc, lines)
    return 0


def cmd_runs_retry(args: argparse.Namespace, store: Store) -> int:
    store.get_agent(args.agent)
    run = Runs(store).retry(args.agent, check_run_id(args.run))
    _out(args, run.to_json(), [f"queued {run.run_id} for attempt {run.attempt + 1}"])
    return 0


def cmd_deliver(args: argparse.Namespace, store: Store) -> int:
    import dataclasses

    from memfs.client import ApiError, TransportError
    from memfs.client.results import _camel

    if not args.url.startswith(("http://", "https://")):
        raise InvalidRequest(f"--url {args.url!r} must start with http:// or https://")
    store.get_agent(args.agent)
    trigger = Triggers(store.backend).get(args.agent, args.trigger)
    body = _read_input(args.file)
    webhook_id = args.id or f"msg_{uuid.uuid4().hex}"
    # A sender holds no key: the client's signing, and no Authorization worth sending.
    with Client(args.url.rstrip("/"), "", timeout=30) as client:
        try:
            run, started = client.deliver(
                args.agent,
                args.trigger,
                body,
                secret=trigger.secrets[0].value,
                webhook_id=webhook_id,
                content_type=args.content_type,
            )
        except TransportError as exc:
            raise MemfsError(
                f"could not reach {args.url} ({exc}); start the server with 'memfs serve' "
                "or point --url at a running one"
            ) from None
        except ApiError as exc:
            raise _error_for(exc.code)(f"{exc.status}: {exc.message}", field=exc.field) from None
    doc = {_camel(k): v for k, v in dataclasses.asdict(run).items()}
    verb = "started" if started else "already delivered:"
    _out(args, doc, [f"{verb} run {run.id} ({run.status}) for {webhook_id}"])
    return 0


def _error_for(code: str) -> type[MemfsError]:
    """The memfs error class of an envelope's code (its CLI exit status follows)."""
    classes = [InvalidRequest, NotFound, Conflict, PreconditionFailed, PayloadTooLarge]
    return next((c for c in classes if c.code == code), MemfsError)


def cmd_serve(args: argparse.Namespace, store: Store) -> int:
    return serve.run(args, store)


# ---- parser ----------------------------------------------------------------------


def _writer_options(parser: _Parser, *, if_match: bool = True) -> None:
    parser.add_argument("-m", "--message", default="", help="commit message")
    if if_match:
        parser.add_argument(
            "--if-match", metavar="SHA", help="only if the memory's current sha256 is SHA"
        )


def build_parser() -> _Parser:
    parser = _Parser(
        prog="memfs",
        description="memfs: versioned Markdown memories for AI agents. Works directly on the "
        "data folder, safely beside a running server.",
        epilog="example:\n  memfs agents create demo && echo '# hi' | memfs put demo notes/hi.md"
        "\n  memfs ls demo -l && memfs log demo -p",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"memfs {__version__}")
    _common_options(parser, argparse.SUPPRESS)
    parser.set_defaults(
        data=Path(os.environ.get("MEMFS_DATA", "data")),
        json=False,
        actor=maintenance.default_actor(),
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    p = _command(
        sub,
        "serve",
        cmd_serve,
        "serve the HTTP API on the data folder",
        "memfs serve --port 8750 --workers 2",
    )
    serve.add_arguments(p)
    p.set_defaults(creates_data=True, precheck=serve.settings_of)

    triggers = sub.add_parser(
        "triggers",
        help="webhook triggers of an agent",
        description="webhook triggers of an agent",
        epilog="example:\n  memfs triggers add demo github --prompt 'triage this issue'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    t_sub = triggers.add_subparsers(dest="triggers_command", metavar="ACTION", parser_class=_Parser)
    t_sub.required = True
    p = _command(
        t_sub,
        "add",
        cmd_triggers_add,
        "create or update a trigger",
        "memfs triggers add demo github --prompt 'triage this issue'",
    )
    p.add_argument("agent")
    p.add_argument("trigger")
    p.add_argument("--prompt", default="", help="instructions stored with each delivery")
    p.add_argument("--path", help="memory action: path template with {triggerId} {webhookId}")
    p.add_argument(
        "--command",
        nargs=argparse.REMAINDER,
        help="command action: the program and its arguments (must come last); a server"
        " runs it only when started with --allow-commands",
    )
    p.add_argument("--timeout", type=int, default=60, help="command timeout in seconds")
    p.add_argument("--max-attempts", type=int, default=5)
    p.add_argument("--secret", help="whsec_… secret to use (default: generated)")
    p = _command(t_sub, "ls", cmd_triggers_ls, "list triggers", "memfs triggers ls demo")
    p.add_argument("agent")
    p = _command(t_sub, "rm", cmd_triggers_rm, "delete a trigger", "memfs triggers rm demo github")
    p.add_argument("agent")
    p.add_argument("trigger")
    p = _command(
        t_sub,
        "rotate",
        cmd_triggers_rotate,
        "new secret; the old one verifies for 24 h more",
        "memfs triggers rotate demo github",
    )
    p.add_argument("agent")
    p.add_argument("trigger")

    runs = sub.add_parser(
        "runs",
        help="runs started by deliveries",
        description="runs started by deliveries",
        epilog="example:\n  memfs runs ls demo --status failed",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r_sub = runs.add_subparsers(dest="runs_command", metavar="ACTION", parser_class=_Parser)
    r_sub.required = True
    p = _command(
        r_sub, "ls", cmd_runs_ls, "list runs, oldest first", "memfs runs ls demo --status failed"
    )
    p.add_argument("agent")
    p.add_argument("--trigger")
    p.add_argument("--status", choices=["queued", "running", "succeeded", "failed", "delayed"])
    p.add_argument("--limit", type=cli_base.positive, default=1000)
    p = _command(
        r_sub, "show", cmd_runs_show, "one run with its output", "memfs runs show demo run_0123abcd"
    )
    p.add_argument("agent")
    p.add_argument("run")
    p = _command(
        r_sub,
        "retry",
        cmd_runs_retry,
        "give a failed run one more attempt",
        "memfs runs retry demo run_0123abcd",
    )
    p.add_argument("agent")
    p.add_argument("run")

    p = _command(
        sub,
        "deliver",
        cmd_deliver,
        "sign FILE (or stdin) with the trigger's secret and post it to a server",
        'echo \'{"action": "opened"}\' | memfs deliver demo github',
    )
    p.add_argument("agent")
    p.add_argument("trigger")
    p.add_argument("file", nargs="?", help="body to send (default or '-': standard input)")
    p.add_argument("--url", default="http://127.0.0.1:8750", help="server base URL")
    p.add_argument("--id", help="webhook-id to send (default: a new one)")
    p.add_argument("--content-type", default="application/json")

    agents = sub.add_parser(
        "agents",
        help="create, list and erase agents",
        description="create, list and erase agents",
        epilog="example:\n  memfs agents create demo && memfs agents ls -l",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    agents_sub = agents.add_subparsers(
        dest="agents_command", metavar="ACTION", parser_class=_Parser
    )
    agents_sub.required = True
    p = _command(
        agents_sub,
        "create",
        cmd_agents_create,
        "create an agent",
        "memfs agents create users/alice/assistant --name 'Alice assistant'",
    )
    p.add_argument("agent", help="agent id: '/'-separated segments of A-Z a-z 0-9 . _ -")
    p.add_argument("--name", help="display name (default: the id)")
    p.set_defaults(creates_data=True)
    p = _command(agents_sub, "ls", cmd_agents_ls, "list agents", "memfs agents ls users/alice -l")
    p.add_argument("prefix", nargs="?", default="", help="only ids starting with this")
    p.add_argument("-l", "--long", action="store_true", help="show revision and name")
    p = _command(
        agents_sub,
        "rm",
        cmd_agents_rm,
        "erase an agent and all its history",
        "memfs agents rm users/alice/assistant --yes",
    )
    p.add_argument("agent")
    p.add_argument("--yes", action="store_true", help="confirm the erasure")

    p = _command(
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

    p = _command(
        sub,
        "cat",
        cmd_cat,
        "print a memory's exact bytes (PATH@N for version N)",
        "memfs cat demo notes/hi.md@1",
    )
    p.add_argument("agent")
    p.add_argument("path")
    p.add_argument("--version", type=int, dest="version", help="read this version")

    p = _command(
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

    p = _command(
        sub,
        "rm",
        cmd_rm,
        "delete a memory (a tombstone version; history stays)",
        "memfs rm demo notes/hi.md -m 'obsolete'",
    )
    p.add_argument("agent")
    p.add_argument("path")
    _writer_options(p)

    p = _command(
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

    p = _command(
        sub, "log", cmd_log, "commits newest first, like git log", "memfs log demo notes/hi.md -p"
    )
    p.add_argument("agent")
    p.add_argument("path", nargs="?", help="only commits that touched this memory")
    p.add_argument("-p", "--patch", action="store_true", help="show each change as a diff")
    p.add_argument(
        "-n", "--max-count", type=cli_base.positive, default=1 << 30, help="at most N commits"
    )

    p = _command(sub, "show", cmd_show, "one commit with its diff", "memfs show demo 3")
    p.add_argument("agent")
    p.add_argument("revision", type=cli_base.positive)

    p = _command(
        sub,
        "diff",
        cmd_diff,
        "unified diff between two versions of a memory",
        "memfs diff demo notes/hi.md 1 2",
    )
    p.add_argument("agent")
    p.add_argument("path")
    p.add_argument("v1", type=cli_base.positive)
    p.add_argument("v2", type=cli_base.positive, nargs="?", help="default: the current content")

    p = _command(
        sub,
        "versions",
        cmd_versions,
        "every version of one memory",
        "memfs versions demo notes/hi.md",
    )
    p.add_argument("agent")
    p.add_argument("path")

    p = _command(
        sub,
        "status",
        cmd_status,
        "hand edits in the working tree not yet committed",
        "memfs status demo",
    )
    p.add_argument("agent")
    p = _command(
        sub,
        "commit",
        cmd_commit,
        "record the working tree's hand edits as one commit",
        "memfs commit demo -m 'edited by hand'",
    )
    p.add_argument("agent")
    p.add_argument("-m", "--message", default="", help="commit message")

    p = _command(
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

    p = _command(
        sub,
        "export",
        cmd_export,
        "full history as JSON lines, or a git fast-import stream",
        "memfs export demo --format git | (git init -q -b main repo && cd repo && git fast-import --quiet && git checkout -q main)",
    )
    p.add_argument("agent", nargs="?")
    p.add_argument("--scope", help="every agent under this scope id (JSON lines only)")
    p.add_argument("--format", choices=["jsonl", "git"], default="jsonl")

    p = _command(
        sub,
        "import",
        cmd_import,
        "recreate agents from 'memfs export' JSON lines (they must not exist yet)",
        "memfs export demo > demo.jsonl && memfs --data other import demo.jsonl",
    )
    p.add_argument("file", nargs="?", help="JSON lines file (default or '-': standard input)")
    p.set_defaults(creates_data=True)

    p = _command(
        sub,
        "fsck",
        cmd_fsck,
        "verify every object, the log, the index and the working trees",
        "memfs fsck --repair",
    )
    p.add_argument("--repair", action="store_true", help="rebuild derived state that is off")
    _command(sub, "reindex", cmd_reindex, "rebuild the index from the log", "memfs reindex")
    cli_keys.add_commands(sub)
    cli_backup.add_commands(sub)
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
    if not getattr(args, "opens_store", True):  # restore makes its own data folder
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
    problem = _data_folder_problem(args)
    if problem is not None:
        print(f"memfs: {problem}", file=sys.stderr)
        return 2
    try:
        store = Store(args.data)
    except OSError as exc:
        print(f"memfs: can't open data folder {args.data}: {exc.strerror}", file=sys.stderr)
        return 1
    try:
        if store.index.created and args.handler is not cmd_reindex:
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
    except (IndexGone, OSError, sqlite3.Error) as exc:
        translated = faults.translate(exc)
        if translated is None:
            raise
        print(f"memfs: {translated.message}", file=sys.stderr)
        return 1
    finally:
        store.close()


if __name__ == "__main__":
    raise SystemExit(main())
