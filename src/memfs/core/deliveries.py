"""A sender's delivery, judged in one place: verify → exactly once → register → wake.

The HTTP route only reads the body (with the limit ``target`` names) and calls
``accept``; every rule of the flow lives here, so a second edge (an MCP server, a
console) delivers with the same answers:

1. ``target``: one 404 for an unknown agent and an unknown trigger (a sender without a
   key must not learn which agents exist), and the body limit (a memory action can't
   store more than ``memoryBytes``, so the body is refused with 413 before any 202).
   ``seen`` is the target as this process last checked it, with no I/O at all: what
   an event loop may ask before it reads the body (the limit to read it with).
2. ``accept``: the target checked again (``current``: three stats when nothing
   changed), the Standard Webhooks signature, then the one exactly-once judgement (a
   known webhook id answers its run, 200), then the size of the memory the body
   makes, then the durable record and its indexed run (202), then the runner's wake.
   All of it in the one call, so an edge hands a delivery to a worker thread once.

A target is kept per store with the identity (``canonical/identity.py``) of the two
files that define it: the agent's record ``agent.json`` (erasure deletes it first; a
new agent is a new file) and the trigger's newest record (immutable; any update,
rotation or delete is a successor record, whose name is stat'ed). Exact at every
delivery, across processes, never a time window: a change anywhere is a different
identity or a successor, and the target is read afresh. A backend without files (S3,
memory) has no identities: its target is read at each delivery (``target``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from memfs.canonical import identity, layout
from memfs.canonical.backend import is_file
from memfs.config import Settings
from memfs.core import commit
from memfs.core.actions.memory import memory_content, memory_size_at_most
from memfs.core.runs import Run, Runs
from memfs.core.store import Store
from memfs.core.triggers import Trigger, Triggers, record_key
from memfs.derived.index import reads
from memfs.derived.index.connection import Index as SqliteIndex
from memfs.domain.webhook_verify import verify
from memfs.errors import InvalidRequest, NotFound, PayloadTooLarge, Unauthorized


@dataclass(frozen=True)
class Target:
    """The trigger a delivery URL names, and the most body it takes."""

    agent_id: str
    trigger: Trigger
    body_limit: int
    memory_limited: bool  # the limit is memoryBytes (a memory action), not webhookBodyBytes
    # The identities of the agent's record and of the trigger's record when they were
    # read (None: a backend without files, or a file missing; never kept then).
    proof: tuple[identity.Identity, identity.Identity] | None = None
    # With a proof: the files of the agent's record, of the trigger's record and of its
    # successor's name, which ``_stands`` stats.
    files: tuple[str, str, str] | None = None

    def explain(self, exc: PayloadTooLarge) -> PayloadTooLarge:
        """``exc`` (a body over ``body_limit``) saying which limit it hit."""
        if self.memory_limited:
            exc.message += " (the most this trigger's memory action can store: memoryBytes)"
            exc.args = (exc.message,)
        return exc


# The targets a process checked last, per store: (agent id, trigger id) -> Target.
# Bounded: emptied when full, refilled by the triggers still delivered to.
SEEN_MAX = 4096
_SEEN: weakref.WeakKeyDictionary[Store, dict[tuple[str, str], Target]] = (
    weakref.WeakKeyDictionary()
)


def _seen(store: Store) -> dict[tuple[str, str], Target]:
    seen = _SEEN.get(store)
    if seen is None:
        seen = _SEEN.setdefault(store, {})
    return seen


def seen(store: Store, agent_id: str, trigger_id: str) -> Target | None:
    """The target as this process last found it, without any I/O (None: never found,
    or not kept). Not a judgement: only the limit to read a body with; ``accept``
    checks it again before anything is decided."""
    return _seen(store).get((agent_id, trigger_id))


def target(store: Store, settings: Settings, agent_id: str, trigger_id: str) -> Target:
    """The target read afresh (the agent's row, the trigger's newest record), kept."""
    backend = store.backend
    # Taken before the reads: a file replaced in between (an erasure, a new agent)
    # leaves a kept identity the next check does not match, never the other way round.
    agent_ident = identity.of(backend, layout.agent_key(agent_id))
    try:
        store.get_agent(agent_id)
        # Checked against its newest record rather than read afresh (a sender's
        # retries and a busy trigger's deliveries read the same record each time).
        trigger = Triggers(backend).get_seen(store.triggers_seen, agent_id, trigger_id)
    except NotFound:
        _seen(store).pop((agent_id, trigger_id), None)
        raise NotFound(
            "no trigger answers at this URL; check the agent id and trigger id",
            field="triggerId",
        ) from None
    limit = settings.webhook_body_bytes
    if trigger.action.get("type") != "command":
        limit = min(limit, settings.memory_bytes)
    trigger_ident = identity.of(backend, record_key(agent_id, trigger_id, trigger.seq))
    proof = files = None
    if agent_ident is not None and trigger_ident is not None:
        proof = (agent_ident, trigger_ident)
        named = [
            identity.path_of(backend, key)
            for key in (
                layout.agent_key(agent_id),
                record_key(agent_id, trigger_id, trigger.seq),
                record_key(agent_id, trigger_id, trigger.seq + 1),
            )
        ]
        if None not in named:
            files = (str(named[0]), str(named[1]), str(named[2]))
    found = Target(agent_id, trigger, limit, limit < settings.webhook_body_bytes, proof, files)
    kept = _seen(store)
    if proof is None:
        kept.pop((agent_id, trigger_id), None)
    else:
        if len(kept) >= SEEN_MAX:
            kept.clear()
        kept[(agent_id, trigger_id)] = found
    return found


def _stands(store: Store, found: Target) -> bool:
    """Whether ``found``'s two files are the same and its trigger has no successor
    record (three stats; False for a target without a proof)."""
    proof, files = found.proof, found.files
    if proof is None or files is None:
        return False
    # The files named when the target was read (a trigger's record is never a log
    # entry, so ``exists`` of its successor is the stat of its file).
    return (
        identity.of_file(files[0]) == proof[0]
        and identity.of_file(files[1]) == proof[1]
        and not is_file(files[2])
    )


def current(store: Store, settings: Settings, found: Target) -> Target:
    """``found`` if it still stands (its two files the same, no successor record: three
    stats; the agent not damaged since: its row), else the target read afresh (NotFound
    when it is gone)."""
    if _stands(store, found):
        # Damage lives in the agent's index row, not in a file (any process may
        # mark it: this server, ``memfs fsck`` or ``reindex``): asked each time, so
        # a damaged agent's sender gets 503 and retries after the repair, rather
        # than a 202 for a run that can't store.
        store.get_agent(found.agent_id)
        return found
    return target(store, settings, found.agent_id, found.trigger.trigger_id)


# The largest body a retry is verified for on the event loop (its HMAC, ~1 µs a KiB);
# a larger one goes to the delivery pool, as every first delivery does.
RETRY_ON_LOOP_BYTES = 64 * 1024


def retry_on_loop(
    store: Store,
    settings: Settings,
    found: Target,
    body: bytes,
    headers: Mapping[str, str],
    *,
    now: float,
) -> Run | None:
    """The run of a retried id, judged without leaving the event loop, or None: then
    ``accept`` judges the delivery in the pool, as every first delivery.

    Answers only what ``accept`` would answer, 200 with the run, and only when every
    check ``accept`` makes passes here on what this process keeps (a local backend's
    files and the SQLite index, never a network round trip): the signature with the
    kept target's live secrets; the id one this process answered before
    (``Runs.known_now``: an ``lstat``, a ``stat``); the target standing (three stats)
    and its agent's row (one SQLite statement: NotFound or Damaged raised as
    ``current`` raises them, so a damaged agent answers 503, a retry too). Anything
    else (a bad signature, an id not answered here, a changed trigger or agent, a
    run with a newer event) is None: ``accept`` answers it, in its own order, so a
    bad signature is 401 and a deleted trigger 404 exactly as before. The signature
    is checked first and the id only once it passed, so how long a refusal takes
    says nothing about which ids were delivered."""
    if found.proof is None or len(body) > RETRY_ON_LOOP_BYTES or not _local_index(store):
        return None
    if len(body) > found.body_limit:
        return None
    try:
        webhook_id = verify(
            found.trigger.live_secrets(int(now * 1_000_000)),
            headers,
            body,
            now=now,
            tolerance_seconds=settings.webhook_tolerance_seconds,
        )
    except (Unauthorized, InvalidRequest):
        return None
    run = Runs(store).known_now(found.agent_id, found.trigger.trigger_id, webhook_id)
    if run is None or not _stands(store, found):
        return None
    sound_agent(store, found.agent_id)  # NotFound or Damaged, as ``current`` raises them
    return run


def sound_agent(store: Store, agent_id: str) -> None:
    """NotFound or Damaged as ``Store.get_agent`` raises them, from ONE statement of
    the SQLite index (the row and its damage; ``get_agent`` also reads the clock)."""
    index = store.index
    assert isinstance(index, SqliteIndex)
    with index.statement_session() as one:
        row, damage = reads.agent_and_damage(one.conn, agent_id)
    commit.sound(agent_id, row, damage)


def _local_index(store: Store) -> bool:
    """Whether the store's index is the SQLite file (a statement is a local read), not
    a database across the network."""
    return isinstance(store.index, SqliteIndex)


def accept(
    store: Store,
    settings: Settings,
    target: Target,
    body: bytes,
    headers: Mapping[str, str],
    content_type: str,
    *,
    now: float,
    wake: Callable[[], None] | None = None,
) -> tuple[Run, bool]:
    """The run of this delivery: created now (True, the runner woken) or the run of its
    webhook id delivered before (False). ``target`` is checked again first (it may be
    one this process kept: ``seen``), so a trigger deleted or an agent erased since is
    NotFound here. Raises Unauthorized for a bad signature and PayloadTooLarge for a
    body over the target's limit or whose memory would exceed memoryBytes."""
    target = current(store, settings, target)
    if len(body) > target.body_limit:
        # Read with the limit of a kept target that has changed since (a command
        # action made a memory one): the limit as it stands decides.
        raise target.explain(
            PayloadTooLarge(f"body is larger than {target.body_limit} bytes", field="body")
        )
    trigger = target.trigger
    webhook_id = verify(
        trigger.live_secrets(int(now * 1_000_000)),
        headers,
        body,
        now=now,
        tolerance_seconds=settings.webhook_tolerance_seconds,
    )
    runs = Runs(store)
    # The one exactly-once judgement: a retry is answered from its record without
    # writing (and fsyncing) a temp file; a race past it is settled by put_if_absent.
    known = runs.known(target.agent_id, trigger.trigger_id, webhook_id)
    if known is not None:
        return known, False
    media = content_type[:256]
    if trigger.action.get("type") != "command":
        # The exact memory (frontmatter, and base64 for a binary body) must fit too.
        facts = {"webhookId": webhook_id, "contentType": media, "receivedAt": int(now * 1e6)}
        # The exact size (YAML) only when the cheap bound does not already fit.
        fits = memory_size_at_most(trigger, facts, len(body)) <= settings.memory_bytes
        size = 0 if fits else len(memory_content(trigger, facts, body))
        if size > settings.memory_bytes:
            raise PayloadTooLarge(
                f"this trigger's memory action stores at most {settings.memory_bytes} bytes"
                f" (memoryBytes) and this body makes a memory of {size}; send less, or use a"
                " command action",
                field="body",
            )
    run, created = runs.create(
        target.agent_id, trigger.trigger_id, webhook_id, body, media, trigger.max_attempts
    )
    if created and wake is not None:
        wake()
    return run, created
