"""``memfs triggers|runs|deliver`` beside a real ``memfs serve`` on the same data folder.

One server for the module (``tests/servers_real.py``: 127.0.0.1, a free port, data in
a tmp folder, stopped by its own process group at teardown). Every command is a real
``python -m memfs.cli --data DATA …`` process working directly on the server's data
folder, as design §4 promises ("safely beside a running server"); ``--data`` comes
first because ``--command`` takes the rest of the line. Independent commands run in
parallel batches to keep the module short. The server's HTTP API (admin key) is used
only to wait for runs and to compare with what the CLI shows; deliveries signed with
an old secret are posted with httpx and ``memfs.domain.webhook_verify.sign``, as a sender
would. Each test has an agent of its own.

Covered:
- ``triggers add``: memory action by default, ``--path`` template, ``--command`` with
  ``--timeout`` and ``--max-attempts``, ``--secret``; the secret is printed on creation
  (or when given) and never again (update, ``ls``); ``--json``;
- ``deliver FILE``/stdin/``-``: started once per ``--id``, "already delivered" with the
  same run after that; the body lands in the memory; ``runs ls`` (``--status``,
  ``--trigger``, ``--json``) and ``runs show`` (``-`` for empty fields, output, ``--json``
  equal to the HTTP document);
- a failing command with ``--max-attempts 1`` ends failed; ``runs retry`` runs it again
  as attempt 2; ``runs retry`` of a succeeded run is refused and changes nothing;
- ``triggers rotate`` prints a new secret and the old one still verifies;
- ``triggers rm`` then ``deliver``; ``deliver`` to a port nothing listens on;
- bad input: one ``memfs: …`` line on stderr, nothing on stdout, exit 2 (invalid) or
  3 (not found), nothing changed in the data folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from memfs.canonical import layout
from memfs.domain.webhook_verify import generate_secret, parse_secret, sign
from servers_real import RealServer, free_port

WAIT = 60.0  # seconds per command and per run to end; generous for a loaded machine
TERMINAL = ("succeeded", "failed")
DEFAULT_PATH = "/memories/inbox/{triggerId}/{webhookId}.md"
TRIGGER_FIELDS = {"agentId", "triggerId", "prompt", "action", "maxAttempts", "createdAt"}
TRIGGER_FIELDS |= {"updatedAt"}
RUN_FIELDS = {
    "id",
    "agentId",
    "triggerId",
    "webhookId",
    "status",
    "attempt",
    "maxAttempts",
    "nextRetryAt",
    "createdAt",
    "startedAt",
    "finishedAt",
    "exitCode",
    "output",
    "error",
}
RUN_LINE = re.compile(r"^(run_[0-9a-f]+)  (\w+) +attempt (\d+)/(\d+)  (\S+)  (\S+)  (\S+)$")
SECRET_LINE = re.compile(r"^secret: (whsec_\S+)  \(shown once; signs deliveries\)$")


# ---- running memfs ---------------------------------------------------------------------


@dataclass
class Result:
    args: Sequence[str]
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()

    def json(self) -> Any:
        return json.loads(self.out)

    def fields(self) -> dict[str, str]:
        """``runs show`` text as a dict: ``key: value`` lines up to ``output:``."""
        out: dict[str, str] = {}
        for line in self.lines:
            if line == "output:":
                break
            key, _, value = line.partition(": ")
            out[key] = value
        return out

    def __str__(self) -> str:
        return f"memfs {' '.join(self.args)} -> {self.code}\n{self.out}{self.err}"


Call = Sequence[str] | tuple[Sequence[str], bytes]


class Memfs:
    """``python -m memfs.cli --data DATA ARGS`` in fresh processes, on the server's data."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}

    def many(self, calls: Sequence[Call]) -> list[Result]:
        """Run independent invocations, a few at a time: thirty at once on a loaded
        2-core machine took longer than WAIT to start, not to run."""
        with ThreadPoolExecutor(max_workers=4) as pool:
            return list(pool.map(self._run, calls))

    def _run(self, call: Call) -> Result:
        args, stdin = (list(call[0]), call[1]) if isinstance(call, tuple) else (list(call), b"")
        with subprocess.Popen(
            [sys.executable, "-m", "memfs.cli", "--data", str(self.data), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
        ) as proc:
            out, err = proc.communicate(stdin, timeout=WAIT)
        return Result(args, proc.returncode, out.decode(), err.decode())

    def __call__(self, *args: str, stdin: bytes = b"") -> Result:
        [result] = self.many([(args, stdin)])
        return result

    def ok(self, *args: str, stdin: bytes = b"") -> Result:
        result = self(*args, stdin=stdin)
        assert result.code == 0 and result.err == "", str(result)
        return result

    def all_ok(self, calls: Sequence[Call]) -> list[Result]:
        results = self.many(calls)
        for result in results:
            assert result.code == 0 and result.err == "", str(result)
        return results


def refused(result: Result, code: int, *words: str) -> str:
    """Exit ``code``, nothing on stdout, exactly one ``memfs: …`` line on stderr."""
    assert result.code == code, str(result)
    assert result.out == "", str(result)
    assert result.err.endswith("\n") and result.err.count("\n") == 1, str(result)
    assert result.err.startswith("memfs: "), str(result)
    for word in words:
        assert word in result.err, f"{word!r} not in {result.err!r}"
    return result.err


# ---- the server ------------------------------------------------------------------------


@dataclass
class Env:
    server: RealServer
    memfs: Memfs

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def data(self) -> Path:
        return self.server.data

    def agent(self, agent: str) -> str:
        self.memfs.ok("agents", "create", agent)
        return agent

    def run(self, agent: str, run_id: str) -> dict[str, Any]:
        with self.server.client() as client:
            response = client.get(f"/v1/agents/{quote(agent, safe='')}/runs/{run_id}")
            assert response.status_code == 200, response.text
            doc: dict[str, Any] = response.json()
            return doc

    def wait(self, agent: str, run_id: str, *, attempt: int = 1) -> dict[str, Any]:
        """Poll the server until the run has ended its ``attempt``-th attempt."""
        deadline = time.monotonic() + WAIT
        while True:
            doc = self.run(agent, run_id)
            if doc["status"] in TERMINAL and doc["attempt"] >= attempt:
                return doc
            if time.monotonic() > deadline:
                log = self.server.log_text()[-4000:]
                raise AssertionError(f"run {run_id} did not end attempt {attempt}: {doc}\n{log}")
            time.sleep(0.05)

    def post(
        self, agent: str, trigger: str, secret: str, webhook_id: str, body: bytes
    ) -> httpx.Response:
        """A sender's delivery (no key, no Memfs-Protocol), signed with ``secret``."""
        stamp = int(time.time())
        return httpx.post(
            f"{self.url}/v1/agents/{quote(agent, safe='')}/triggers/{trigger}:deliver",
            content=body,
            headers={
                "webhook-id": webhook_id,
                "webhook-timestamp": str(stamp),
                "webhook-signature": sign(secret, webhook_id, stamp, body),
                "content-type": "application/json",
            },
            timeout=WAIT,
        )


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    data = tmp_path_factory.mktemp("cli-webhooks") / "data"
    server = RealServer(data, extra_args=("--retry-base-ms", "100", "--allow-commands"))
    with server:
        yield Env(server, Memfs(data))


def started(result: Result, webhook_id: str) -> str:
    match = re.fullmatch(rf"started run (run_[0-9a-f]+) \(queued\) for {webhook_id}\n", result.out)
    assert match, str(result)
    return match.group(1)


def state(data: Path) -> dict[str, str]:
    """Every canonical file of the data folder by content hash (not the index)."""
    return {
        str(p.relative_to(data)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in data.rglob("*")
        if p.is_file() and not p.name.startswith("index.sqlite")
    }


# ---- bad input ---------------------------------------------------------------------------


def test_bad_input_is_one_line_exit_2_or_3_and_changes_nothing(env: Env) -> None:
    agent = env.agent("cli/bad")
    env.memfs.ok("triggers", "add", agent, "t")
    before = state(env.data)
    url = ["--url", env.url]
    cases: list[tuple[Call, int, str]] = [
        # Unknown agent.
        (["triggers", "add", "nobody", "t"], 3, "nobody"),
        (["triggers", "ls", "nobody"], 3, "nobody"),
        (["runs", "ls", "nobody"], 3, "nobody"),
        ((["deliver", "nobody", "t", *url], b"{}"), 3, "nobody"),
        (["triggers", "add", "../up", "t"], 2, "agent id"),
        # Bad trigger ids.
        (["triggers", "add", agent, "bad id"], 2, "triggerId"),
        (["triggers", "add", agent, "a/b"], 2, "triggerId"),
        (["triggers", "rm", agent, "bad id"], 2, "triggerId"),
        (["triggers", "rotate", agent, ".."], 2, "triggerId"),
        ((["deliver", agent, "bad id", *url], b"{}"), 2, "triggerId"),
        # Bad trigger definitions, for a new trigger and for the existing one.
        (["triggers", "add", agent, "t2", "--max-attempts", "0"], 2, "maxAttempts"),
        (["triggers", "add", agent, "t", "--max-attempts", "0"], 2, "maxAttempts"),
        (["triggers", "add", agent, "t2", "--max-attempts", "101"], 2, "maxAttempts"),
        (["triggers", "add", agent, "t2", "--max-attempts", "x"], 2, "--max-attempts"),
        (["triggers", "add", agent, "t2", "--timeout", "0", "--command", "true"], 2, "timeout"),
        (["triggers", "add", agent, "t2", "--secret", "nope"], 2, "whsec_"),
        (["triggers", "add", agent, "t2", "--path", "/memories/{other}.md"], 2, "action.path"),
        (["triggers", "add", agent, "t2", "--path", "../escape.md"], 2, "/memories/"),
        # Unknown trigger or run.
        (["triggers", "rm", agent, "missing"], 3, "missing"),
        (["triggers", "rotate", agent, "missing"], 3, "missing"),
        ((["deliver", agent, "missing", *url], b"{}"), 3, "missing"),
        (["runs", "show", agent, "run_0123abcd"], 3, "run_0123abcd"),
        (["runs", "retry", agent, "run_0123abcd"], 3, "run_0123abcd"),
        # Bad run ids and filters.
        (["runs", "show", agent, "../../x"], 2, "run_<hex>"),
        (["runs", "retry", agent, "x/y"], 2, "run_<hex>"),
        (["runs", "ls", agent, "--status", "bogus"], 2, "--status"),
    ]
    results = env.memfs.many([call for call, _code, _word in cases])
    for (_call, code, word), result in zip(cases, results, strict=True):
        refused(result, code, word)

    assert state(env.data) == before
    [trigger] = env.memfs.ok("--json", "triggers", "ls", agent).json()["triggers"]
    assert trigger["triggerId"] == "t" and trigger["maxAttempts"] == 5
    assert env.memfs.ok("runs", "ls", agent).out == ""


# ---- triggers add / ls ---------------------------------------------------------------------


def test_triggers_add_and_ls_show_the_secret_once(env: Env) -> None:
    agent = env.agent("cli/triggers")
    memfs = env.memfs
    given = generate_secret()
    path = "/memories/hooks/{triggerId}/{webhookId}.md"
    created, notes, command, fixed = memfs.all_ok(
        [
            ["triggers", "add", agent, "inbox", "--prompt", "triage this"],
            ["--json", "triggers", "add", agent, "notes", "--path", path, "--max-attempts", "2"],
            # --command takes the rest of the line, so its options come first.
            [
                "--json",
                "triggers",
                "add",
                agent,
                "cmd",
                "--timeout",
                "7",
                "--max-attempts",
                "3",
                "--command",
                "sh",
                "-c",
                "cat >/dev/null",
            ],
            ["triggers", "add", agent, "fixed", "--secret", given],
        ]
    )

    # Text: what was done, then the secret, once.
    assert created.lines[0] == "created trigger inbox" and len(created.lines) == 2
    match = SECRET_LINE.fullmatch(created.lines[1])
    assert match, str(created)
    secret = match.group(1)
    assert len(parse_secret(secret)) == 32
    assert fixed.lines == [
        "created trigger fixed",
        f"secret: {given}  (shown once; signs deliveries)",
    ]

    # --json: the trigger document with its secret.
    doc = notes.json()
    assert set(doc) == TRIGGER_FIELDS | {"secret"}
    assert doc["agentId"] == agent and doc["triggerId"] == "notes"
    assert doc["action"] == {"type": "memory", "path": path} and doc["maxAttempts"] == 2
    assert doc["secret"].startswith("whsec_") and doc["secret"] != secret
    doc = command.json()
    assert doc["action"] == {
        "type": "command",
        "argv": ["sh", "-c", "cat >/dev/null"],
        "timeoutSeconds": 7,
    }
    assert doc["maxAttempts"] == 3

    # Updating keeps the secret and does not print it again.
    updated = memfs.ok("triggers", "add", agent, "inbox", "--prompt", "triage again")
    assert updated.out == "updated trigger inbox\n"
    assert "whsec_" not in updated.out
    updated_json = memfs.ok("--json", "triggers", "add", agent, "inbox", "--prompt", "v3").json()
    assert set(updated_json) == TRIGGER_FIELDS and updated_json["prompt"] == "v3"
    accepted = env.post(agent, "inbox", secret, "msg_kept", b"{}")
    assert accepted.status_code == 202, accepted.text

    listed, listed_json = memfs.all_ok(
        [["triggers", "ls", agent], ["--json", "triggers", "ls", agent]]
    )
    assert listed.lines == [
        "cmd  command  maxAttempts=3",
        "fixed  memory  maxAttempts=5",
        "inbox  memory  maxAttempts=5",
        "notes  memory  maxAttempts=2",
    ]
    triggers = listed_json.json()["triggers"]
    assert [t["triggerId"] for t in triggers] == ["cmd", "fixed", "inbox", "notes"]
    assert all(set(t) == TRIGGER_FIELDS for t in triggers)
    inbox = triggers[2]
    assert inbox["action"] == {"type": "memory", "path": DEFAULT_PATH}  # the default action
    assert inbox["prompt"] == "v3"
    assert "whsec_" not in listed.out + listed_json.out
    env.wait(agent, accepted.json()["id"])


# ---- deliver, runs ls, runs show ---------------------------------------------------------


def test_deliver_runs_once_per_id_and_runs_ls_show_it(env: Env, tmp_path: Path) -> None:
    agent = env.agent("cli/deliver")
    memfs = env.memfs
    memfs.all_ok(
        [
            ["triggers", "add", agent, "gh", "--prompt", "triage"],
            ["triggers", "add", agent, "other"],
        ]
    )
    body = tmp_path / "body.json"
    body.write_bytes(b'{"n": 1}')
    url = ["--url", env.url]

    first = memfs.ok("deliver", agent, "gh", str(body), *url, "--id", "msg_1")
    run_1 = started(first, "msg_1")
    # Options may come before FILE as well as after it.
    again = memfs.ok("deliver", agent, "gh", *url, "--id", "msg_1", str(body))
    assert re.fullmatch(
        rf"already delivered: run {run_1} \((queued|running|succeeded)\) for msg_1\n", again.out
    ), str(again)

    from_stdin, from_dash, generated, other = memfs.all_ok(
        [
            (["deliver", agent, "gh", *url, "--id", "msg_2"], b'{"n": 2}'),
            (["--json", "deliver", agent, "gh", "-", *url, "--id", "msg_3"], b'{"n": 3}'),
            (["deliver", agent, "gh", *url], b"{}"),
            (["deliver", agent, "other", *url, "--id", "msg_1"], b"{}"),
        ]
    )
    run_2 = started(from_stdin, "msg_2")
    doc = from_dash.json()
    assert set(doc) == RUN_FIELDS
    assert (doc["webhookId"], doc["triggerId"], doc["status"]) == ("msg_3", "gh", "queued")
    run_3 = doc["id"]
    match = re.fullmatch(
        r"started run (run_[0-9a-f]+) \(queued\) for (msg_[0-9a-f]{32})\n", generated.out
    )
    assert match, str(generated)
    run_4, generated_id = match.groups()
    run_other = started(other, "msg_1")  # the same id on another trigger is another delivery
    ids = [run_1, run_2, run_3, run_4, run_other]
    assert len(set(ids)) == 5
    ended = {run_id: env.wait(agent, run_id) for run_id in ids}
    assert all(doc["status"] == "succeeded" for doc in ended.values())
    # The four deliveries above raced: 'runs ls' lists by creation time, oldest first.
    oldest_first = sorted(ids, key=lambda run_id: (ended[run_id]["createdAt"], run_id))
    assert oldest_first[0] == run_1

    # A redelivery after the run ended answers with the ended run; no new run.
    late = memfs.ok("deliver", agent, "gh", *url, "--id", "msg_2", stdin=b'{"n": 2}')
    assert late.out == f"already delivered: run {run_2} (succeeded) for msg_2\n"

    # The bodies (from a file, stdin and '-') reached the memories.
    stored = memfs.many(
        [["cat", agent, f"inbox/gh/msg_{n}.md"] for n in (1, 2, 3)]
        + [["cat", agent, f"inbox/gh/{generated_id}.md"]]
    )
    for n, result in enumerate(stored[:3], start=1):
        assert result.code == 0, str(result)
        assert result.out.startswith("---\n") and result.out.endswith(f'{{"n": {n}}}')
        assert "prompt: triage\n" in result.out and f"webhookId: msg_{n}\n" in result.out
    assert stored[3].code == 0 and stored[3].out.endswith("---\n{}"), str(stored[3])

    # runs ls: oldest first, with filters.
    listed, by_trigger, by_status, none_failed, as_json = memfs.all_ok(
        [
            ["runs", "ls", agent],
            ["runs", "ls", agent, "--trigger", "other"],
            ["runs", "ls", agent, "--status", "succeeded", "--trigger", "gh"],
            ["runs", "ls", agent, "--status", "failed"],
            ["--json", "runs", "ls", agent, "--trigger", "gh"],
        ]
    )
    rows = [RUN_LINE.fullmatch(line) for line in listed.lines]
    assert all(rows), str(listed)
    assert [m.group(1) for m in rows if m] == oldest_first
    first_row = rows[0]
    assert first_row is not None
    assert first_row.groups()[1:4] == ("succeeded", "1", "5")
    assert first_row.groups()[5:] == ("gh", "msg_1")
    assert [line.split()[0] for line in by_trigger.lines] == [run_other]
    of_gh = [run_id for run_id in oldest_first if run_id != run_other]
    assert [line.split()[0] for line in by_status.lines] == of_gh
    assert none_failed.out == ""
    listed_docs = as_json.json()["runs"]
    assert [r["id"] for r in listed_docs] == of_gh
    assert all(set(r) == RUN_FIELDS for r in listed_docs)

    # runs show: every field, '-' where empty, no output section for a memory run.
    shown, shown_json = memfs.all_ok(
        [["runs", "show", agent, run_1], ["--json", "runs", "show", agent, run_1]]
    )
    fields = shown.fields()
    assert list(fields) == [
        "id",
        "agentId",
        "triggerId",
        "webhookId",
        "status",
        "attempt",
        "maxAttempts",
        "nextRetryAt",
        "createdAt",
        "startedAt",
        "finishedAt",
        "exitCode",
        "error",
    ]
    assert fields["id"] == run_1 and fields["agentId"] == agent
    assert (fields["triggerId"], fields["webhookId"], fields["status"]) == (
        "gh",
        "msg_1",
        "succeeded",
    )
    assert (fields["attempt"], fields["maxAttempts"]) == ("1", "5")
    assert fields["nextRetryAt"] == fields["exitCode"] == fields["error"] == "-"
    assert all(fields[k].endswith("Z") for k in ("createdAt", "startedAt", "finishedAt"))
    assert "output:" not in shown.lines
    doc = shown_json.json()
    assert set(doc) == RUN_FIELDS
    assert doc == env.run(agent, run_1)  # the CLI and the API tell the same
    assert doc["output"] is None and doc["exitCode"] is None and doc["error"] is None
    assert fields["createdAt"] == doc["createdAt"] and fields["finishedAt"] == doc["finishedAt"]


# ---- command runs: output, failure, retry ------------------------------------------------


def test_failed_command_run_is_retried_as_attempt_2(env: Env) -> None:
    agent = env.agent("cli/commands")
    memfs = env.memfs
    memfs.all_ok(
        [
            [
                "triggers",
                "add",
                agent,
                "good",
                "--timeout",
                "30",
                "--max-attempts",
                "1",
                "--command",
                "sh",
                "-c",
                'printf "got "; cat; echo; echo "attempt $MEMFS_ATTEMPT"',
            ],
            [
                "triggers",
                "add",
                agent,
                "bad",
                "--max-attempts",
                "1",
                "--command",
                "sh",
                "-c",
                'echo "attempt $MEMFS_ATTEMPT failing"; exit 3',
            ],
            # Exits at once without reading its stdin (most programs do).
            ["triggers", "add", agent, "deaf", "--command", "sh", "-c", "echo not reading"],
        ]
    )
    url = ["--url", env.url]
    good, bad, deaf, deaf_small = memfs.all_ok(
        [
            (["deliver", agent, "good", *url, "--id", "msg_good"], b"hello"),
            (["deliver", agent, "bad", *url, "--id", "msg_bad"], b"{}"),
            (["deliver", agent, "deaf", *url, "--id", "msg_deaf_big"], b"x" * 200_000),
            (["deliver", agent, "deaf", *url, "--id", "msg_deaf_small"], b"{}"),
        ]
    )
    good_id, bad_id = started(good, "msg_good"), started(bad, "msg_bad")
    assert env.wait(agent, good_id)["status"] == "succeeded"
    # An unread body is no failure: exit 0 is success, whatever happened to stdin.
    for result, webhook_id in ((deaf, "msg_deaf_big"), (deaf_small, "msg_deaf_small")):
        deaf_run = env.wait(agent, started(result, webhook_id))
        assert (deaf_run["status"], deaf_run["exitCode"], deaf_run["error"]) == (
            "succeeded",
            0,
            None,
        )
        assert deaf_run["attempt"] == 1 and deaf_run["output"] == "not reading\n"
    ended = env.wait(agent, bad_id)
    assert (ended["status"], ended["attempt"], ended["maxAttempts"]) == ("failed", 1, 1)

    shown_good, shown_bad, failed = memfs.all_ok(
        [
            ["runs", "show", agent, good_id],
            ["runs", "show", agent, bad_id],
            ["runs", "ls", agent, "--status", "failed"],
        ]
    )
    fields = shown_good.fields()
    assert (fields["status"], fields["exitCode"], fields["error"]) == ("succeeded", "0", "-")
    output = shown_good.lines[shown_good.lines.index("output:") + 1 :]
    assert output[:2] == ["got hello", "attempt 1"]
    fields = shown_bad.fields()
    assert (fields["status"], fields["attempt"], fields["maxAttempts"]) == ("failed", "1", "1")
    assert (fields["exitCode"], fields["error"], fields["nextRetryAt"]) == ("3", "exit code 3", "-")
    assert "attempt 1 failing" in shown_bad.lines[shown_bad.lines.index("output:") + 1 :]
    [row] = failed.lines
    match = RUN_LINE.fullmatch(row)
    assert match and match.groups()[:4] == (bad_id, "failed", "1", "1"), row

    # runs retry: one more attempt, run by the server.
    retried = memfs.ok("runs", "retry", agent, bad_id)
    assert retried.out == f"queued {bad_id} for attempt 2\n"
    again = env.wait(agent, bad_id, attempt=2)
    assert (again["status"], again["attempt"], again["maxAttempts"]) == ("failed", 2, 2)
    assert again["exitCode"] == 3 and "attempt 2 failing" in again["output"]
    shown = memfs.ok("runs", "show", agent, bad_id)
    assert shown.fields()["attempt"] == "2"
    assert "attempt 2 failing" in shown.lines[shown.lines.index("output:") + 1 :]

    # Retrying a succeeded run is refused and changes nothing.
    run_folder = env.data / layout.agent_prefix(agent) / "runs" / good_id
    before = (env.run(agent, good_id), sorted(p.name for p in run_folder.rglob("*")))
    refused(memfs("runs", "retry", agent, good_id), 4, "succeeded", "only a failed run")
    assert (env.run(agent, good_id), sorted(p.name for p in run_folder.rglob("*"))) == before


# ---- rotate, rm, unreachable server -------------------------------------------------------


def test_rotated_secret_prints_a_new_one_and_the_old_one_still_verifies(env: Env) -> None:
    agent = env.agent("cli/rotate")
    old = env.memfs.ok("--json", "triggers", "add", agent, "rot").json()["secret"]
    rotated = env.memfs.ok("triggers", "rotate", agent, "rot")
    assert len(rotated.lines) == 2, str(rotated)
    assert rotated.lines[0].startswith("new secret: whsec_")
    new = rotated.lines[0].removeprefix("new secret: ")
    assert new != old and len(parse_secret(new)) == 32
    assert rotated.lines[1] == "the previous secret keeps verifying for 24 hours"

    by_old = env.post(agent, "rot", old, "msg_old", b"{}")
    by_new = env.post(agent, "rot", new, "msg_new", b"{}")
    by_stranger = env.post(agent, "rot", generate_secret(), "msg_stranger", b"{}")
    assert by_old.status_code == 202, by_old.text
    assert by_new.status_code == 202, by_new.text
    assert by_stranger.status_code == 401 and "signature" in by_stranger.json()["message"]
    # The CLI signs with the current (new) secret.
    by_cli = env.memfs.ok("deliver", agent, "rot", "--url", env.url, "--id", "msg_cli", stdin=b"{}")
    run_ids = [by_old.json()["id"], by_new.json()["id"], started(by_cli, "msg_cli")]
    for run_id in run_ids:
        assert env.wait(agent, run_id)["status"] == "succeeded"
    listed = env.memfs.ok("runs", "ls", agent).lines
    assert [line.split()[0] for line in listed] == run_ids


def test_deliver_to_a_removed_trigger_or_a_silent_url_fails_clearly(env: Env) -> None:
    agent = env.agent("cli/gone")
    memfs = env.memfs
    secret = memfs.ok("--json", "triggers", "add", agent, "gone").json()["secret"]
    memfs.ok("triggers", "add", agent, "kept")
    removed = memfs.ok("triggers", "rm", agent, "gone")
    assert removed.out == "deleted trigger gone\n"

    silent = f"http://127.0.0.1:{free_port()}"
    after_rm, rm_again, nobody_listens = memfs.many(
        [
            (["deliver", agent, "gone", "--url", env.url, "--id", "msg_1"], b"{}"),
            ["triggers", "rm", agent, "gone"],
            (["deliver", agent, "kept", "--url", silent, "--id", "msg_1"], b"{}"),
        ]
    )
    refused(after_rm, 3, f"trigger 'gone' of agent '{agent}' does not exist")
    refused(rm_again, 3, "'gone'")
    message = refused(nobody_listens, 1, f"could not reach {silent}")
    assert "memfs serve" in message, message
    # The server agrees the trigger is gone, even for its old secret; nothing ran.
    assert env.post(agent, "gone", secret, "msg_2", b"{}").status_code == 404
    assert memfs.ok("triggers", "ls", agent).lines == ["kept  memory  maxAttempts=5"]
    assert memfs.ok("runs", "ls", agent).out == ""
