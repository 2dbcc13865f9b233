"""``memfs triggers``, ``runs`` and ``deliver``: webhook triggers and the runs they start.
"""

from __future__ import annotations

import argparse
import uuid
from typing import Any

from memfs.cli.base import Parser, command, out, positive, read_input
from memfs.client import Client
from memfs.core.runs import Run, Runs, check_run_id
from memfs.core.store import Store
from memfs.core.triggers import Triggers
from memfs.domain.commits import format_ts
from memfs.errors import (
    Conflict,
    InvalidRequest,
    MemfsError,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
)

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
    trigger, created = Triggers.of(store).put(args.agent, args.trigger, body)
    shown = trigger.to_json(with_secret=created or bool(args.secret))
    lines = [f"{'created' if created else 'updated'} trigger {trigger.trigger_id}"]
    if "secret" in shown:
        lines.append(f"secret: {shown['secret']}  (shown once; signs deliveries)")
    out(args, shown, lines)
    return 0


def cmd_triggers_ls(args: argparse.Namespace, store: Store) -> int:
    store.get_agent(args.agent)
    items = Triggers.of(store).list(args.agent)
    out(
        args,
        {"triggers": [t.to_json() for t in items]},
        [f"{t.trigger_id}  {t.action['type']}  maxAttempts={t.max_attempts}" for t in items],
    )
    return 0


def cmd_triggers_rm(args: argparse.Namespace, store: Store) -> int:
    store.get_agent(args.agent)
    Triggers.of(store).delete(args.agent, args.trigger)
    out(args, {"deleted": args.trigger}, [f"deleted trigger {args.trigger}"])
    return 0


def cmd_triggers_rotate(args: argparse.Namespace, store: Store) -> int:
    store.get_agent(args.agent)
    trigger = Triggers.of(store).rotate(args.agent, args.trigger)
    shown = trigger.to_json(with_secret=True)
    out(
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
    out(args, {"runs": [r.to_json() for r in runs]}, [_run_line(r) for r in runs])
    return 0


def cmd_runs_show(args: argparse.Namespace, store: Store) -> int:
    store.get_agent(args.agent)
    run = Runs(store).get(args.agent, check_run_id(args.run))
    doc = run.to_json()
    lines = [f"{k}: {'-' if v is None else v}" for k, v in doc.items() if k != "output"]
    if run.output:
        lines += ["output:", run.output]
    out(args, doc, lines)
    return 0


def cmd_runs_retry(args: argparse.Namespace, store: Store) -> int:
    store.get_agent(args.agent)
    run = Runs(store).retry(args.agent, check_run_id(args.run))
    out(args, run.to_json(), [f"queued {run.run_id} for attempt {run.attempt + 1}"])
    return 0


def cmd_deliver(args: argparse.Namespace, store: Store) -> int:
    import dataclasses

    from memfs.client import ApiError, TransportError
    from memfs.client.results import _camel

    if not args.url.startswith(("http://", "https://")):
        raise InvalidRequest(f"--url {args.url!r} must start with http:// or https://")
    store.get_agent(args.agent)
    trigger = Triggers.of(store).get(args.agent, args.trigger)
    body = read_input(args.file)
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
    out(args, doc, [f"{verb} run {run.id} ({run.status}) for {webhook_id}"])
    return 0


def _error_for(code: str) -> type[MemfsError]:
    """The memfs error class of an envelope's code (its CLI exit status follows)."""
    classes = [InvalidRequest, NotFound, Conflict, PreconditionFailed, PayloadTooLarge]
    return next((c for c in classes if c.code == code), MemfsError)


def add_commands(sub: argparse._SubParsersAction[Parser]) -> None:
    triggers = sub.add_parser(
        "triggers",
        help="webhook triggers of an agent",
        description="webhook triggers of an agent",
        epilog="example:\n  memfs triggers add demo github --prompt 'triage this issue'",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    t_sub = triggers.add_subparsers(dest="triggers_command", metavar="ACTION", parser_class=Parser)
    t_sub.required = True
    p = command(
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
    p = command(t_sub, "ls", cmd_triggers_ls, "list triggers", "memfs triggers ls demo")
    p.add_argument("agent")
    p = command(t_sub, "rm", cmd_triggers_rm, "delete a trigger", "memfs triggers rm demo github")
    p.add_argument("agent")
    p.add_argument("trigger")
    p = command(
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
    r_sub = runs.add_subparsers(dest="runs_command", metavar="ACTION", parser_class=Parser)
    r_sub.required = True
    p = command(
        r_sub, "ls", cmd_runs_ls, "list runs, oldest first", "memfs runs ls demo --status failed"
    )
    p.add_argument("agent")
    p.add_argument("--trigger")
    p.add_argument("--status", choices=["queued", "running", "succeeded", "failed", "delayed"])
    p.add_argument("--limit", type=positive, default=1000)
    p = command(
        r_sub, "show", cmd_runs_show, "one run with its output", "memfs runs show demo run_0123abcd"
    )
    p.add_argument("agent")
    p.add_argument("run")
    p = command(
        r_sub,
        "retry",
        cmd_runs_retry,
        "give a failed run one more attempt",
        "memfs runs retry demo run_0123abcd",
    )
    p.add_argument("agent")
    p.add_argument("run")

    p = command(
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
