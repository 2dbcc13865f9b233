"""Rebuilding and checking derived state: reindex, fsck, status and commit of hand edits.

Canonical state (agent records, log entries, blobs) is checked; damage to it is
reported with the command that fixes it, and ``--repair`` restores a damaged blob or
log entry only from an intact copy (the index keeps every content and commit it
derived, each checked against its sha256 before use). Derived state (the index, the working tree, stray
temp files, leftovers of an interrupted erase) is rebuilt by ``--repair``. A file a
person edited in the working tree is an uncommitted edit, reported and never touched.
"""

from __future__ import annotations

import contextlib
import functools
import getpass
import hashlib
import json
import logging
import os
import shutil
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from memfs.canonical import durable, layout
from memfs.canonical.backend import LocalBackend, MissingObject
from memfs.core.log_reading import corrupt, log_entries, read_log
from memfs.core.store import CommitResult, Delete, Op, Put, Store
from memfs.derived import index
from memfs.derived.index.base import ReadSession, WriteSession
from memfs.derived.worktree import WorkTree
from memfs.domain import content as contentlib
from memfs.domain import paths
from memfs.domain.commits import INLINE_LIMIT, Commit, format_ts
from memfs.errors import CorruptionError, Damaged, InvalidRequest, MemfsError, SymlinkRefused

# A temp file younger than this may belong to a writer still at work.
TEMP_GRACE_S = 600.0

log = logging.getLogger("memfs.maintenance")

FIX_REPAIR = "memfs fsck --repair"


@dataclass
class FsckReport:
    damaged: list[str] = field(default_factory=list)  # canonical, each with its fix
    derived: list[str] = field(default_factory=list)  # rebuilt by --repair
    uncommitted: list[str] = field(default_factory=list)  # hand edits in working trees
    repaired: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # worth knowing, harmless
    restored: list[str] = field(default_factory=list)  # canonical files put back, temp removed
    reindex_needed: bool = False  # an agent healed by --repair: rebuild its rows
    agents: int = 0
    commits: int = 0
    objects: int = 0

    @property
    def ok(self) -> bool:
        """No canonical damage, and no derived problem left unrepaired."""
        return not self.damaged and len(self.derived) == len(self.repaired)

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "agents": self.agents,
            "commits": self.commits,
            "objects": self.objects,
            "damaged": self.damaged,
            "derived": self.derived,
            "repaired": self.repaired,
            "uncommitted": self.uncommitted,
            "warnings": self.warnings,
            "restored": self.restored,
        }


@dataclass
class ReindexResult:
    agents: int = 0
    commits: int = 0
    damaged: list[tuple[str, str, str]] = field(default_factory=list)  # agent, file, why


def _file_of(exc: CorruptionError, fallback: str) -> str:
    return str(getattr(exc, "file", fallback))


# ---- agents as the backend holds them ------------------------------------------------


def canonical_agents(store: Store) -> Iterator[tuple[str, str]]:
    """(folder name, agent record key) of every agent folder the backend holds."""
    after = ""
    while True:
        key = next(store.backend.list(layout.AGENTS, start_after=after), None)
        if key is None:
            return
        folder = key.split("/")[1]
        yield folder, f"{layout.AGENTS}{folder}/.memfs/agent.json"
        after = f"{layout.AGENTS}{folder}/\U0010ffff"


def read_record(store: Store, key: str) -> dict[str, str]:
    record = json.loads(store.backend.get(key))
    if not isinstance(record, dict) or not isinstance(record.get("agentId"), str):
        raise ValueError("no agentId")
    return record


# ---- reindex -------------------------------------------------------------------------


_RUN_TABLES = ("runs", "run_steps")


def reindex(store: Store, *, progress: Callable[[str], None] | None = None) -> ReindexResult:
    """Rebuild the whole index from the backend in one transaction.

    Every content is checked against its sha256. An agent whose files fail a check is
    refused, not indexed from them: it keeps what the index held (an intact copy for
    ``fsck --repair``) and is marked damaged; every other agent is rebuilt."""
    result = ReindexResult()
    started = last_note = time.monotonic()
    with store.index.write_session() as ix:
        old_clock = ix.clock()
        ix.clear_tables(_RUN_TABLES)
        seen: set[str] = set()
        for folder, key in canonical_agents(store):
            try:
                record = read_record(store, key)
            except MissingObject:
                continue  # leftover of an interrupted erase: not an agent
            except ValueError as exc:
                agent_id = _agent_of_folder(folder)
                if agent_id is not None:
                    seen.add(agent_id)
                    ix.mark_damaged(agent_id, key, f"unreadable agent record ({exc})")
                result.damaged.append((agent_id or folder, key, f"unreadable agent record ({exc})"))
                continue
            agent_id = record["agentId"]
            seen.add(agent_id)
            entries, blob = log_entries(store, agent_id), _blob_of(store, agent_id)
            rebuild: _Rebuild | None = getattr(ix, "rebuild_agent", None)
            try:
                if rebuild is not None:  # nothing written before the log is checked
                    result.commits += rebuild(
                        agent_id, entries, blob, functools.partial(_clear, store, ix, record)
                    )
                else:  # an engine that writes as it reads: a savepoint undoes the agent
                    ix.savepoint("agent")
                    try:
                        _clear(store, ix, record)
                        result.commits += ix.bulk_load(agent_id, entries, blob)
                    except CorruptionError:
                        ix.rollback_to("agent")
                        ix.release("agent")
                        raise
                    ix.release("agent")
            except CorruptionError as exc:
                file = _file_of(exc, layout.log_prefix(agent_id))
                if ix.agent(agent_id) is None:
                    store.adopt_record(ix, record)
                ix.mark_damaged(agent_id, file, exc.message)
                result.damaged.append((agent_id, file, exc.message))
                log.error("agent %r is damaged: %s: %s", agent_id, file, exc.message)
            result.agents += 1
            now = time.monotonic()
            if progress is not None and now - last_note >= 5:
                last_note = now
                progress(
                    f"reindex: {result.agents} agents, {result.commits} commits"
                    f" ({now - started:.0f} s)"
                )
        for gone in sorted(ix.agent_ids()):
            if gone not in seen:  # erased (or moved away) since the index was made
                ix.drop_agent(gone)
        ix.raise_clock(old_clock)
    from memfs.core.runs import Runs  # runs are indexed from their own records

    Runs(store).rescan()
    return result


# ``base.Rebuild.rebuild_agent``, as reindex finds it on a write session.
_Rebuild = Callable[
    [str, Iterator[tuple[str, str, dict[str, Any]]], Callable[[str], bytes], Callable[[], None]],
    int,
]


def _clear(store: Store, ix: WriteSession, record: dict[str, str]) -> None:
    """An agent's old rows out (its runs stay: reindex rescans them apart), its
    record in: the start of its rebuild."""
    ix.drop_agent(record["agentId"], runs=False)
    store.adopt_record(ix, record)


def _agent_of_folder(folder: str) -> str | None:
    """The agent id a folder name encodes, None if it encodes none."""
    with contextlib.suppress(Exception):
        agent_id = urllib.parse.unquote(folder, errors="strict")
        if paths.agent_dir_name(paths.agent_id(agent_id)) == folder:
            return agent_id
    return None


def _blob_of(store: Store, agent_id: str) -> Callable[[str], bytes]:
    def blob(sha256: str) -> bytes:
        key = layout.blob_key(agent_id, sha256)
        try:
            data = store.backend.get(key)
        except MissingObject:
            raise corrupt(key, f"{key}: content is missing") from None
        if hashlib.sha256(data).hexdigest() != sha256:
            raise corrupt(key, f"{key}: content does not match its sha256")
        return data

    return blob


# ---- temp files ----------------------------------------------------------------------


def sweep_temp_files(store: Store, *, older_than_s: float = TEMP_GRACE_S) -> int:
    """Remove temp files crashed writers left (older than a writer could take); the
    server calls this at start and periodically. Returns how many went."""
    removed = 0
    for tmp in durable.stale_temp_files(store.data_dir, older_than_s=older_than_s):
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            removed += 1
    if removed:
        log.warning("removed %d temp file(s) left by interrupted writes", removed)
    return removed


# ---- fsck ----------------------------------------------------------------------------


def fsck(store: Store, *, repair: bool = False) -> FsckReport:
    """Check everything and report every finding (never stopping at the first), each
    with the command that fixes it; ``repair`` fixes what can be fixed safely."""
    report = FsckReport()
    store.sync()  # entries a crashed writer left unindexed are applied first (or refused)
    heads: dict[str, dict[str, str]] = {}
    history: dict[str, dict[str, set[str]]] = {}
    for folder, key in canonical_agents(store):
        try:
            record = read_record(store, key)
        except MissingObject:
            report.derived.append(f"agents/{folder}: leftover of an interrupted erase")
            if repair:
                _remove_leftover(store, folder)
                report.repaired.append(f"agents/{folder}: removed")
            continue
        except ValueError as exc:
            agent_id = _agent_of_folder(folder)
            fix = (
                f"restore {key} from a backup (memfs restore), or erase the agent:"
                f" memfs agents rm {agent_id}"
                if agent_id
                else "move the folder out of the data folder"
            )
            report.damaged.append(f"{key}: unreadable agent record ({exc}) — fix: {fix}")
            continue
        agent_id = record["agentId"]
        if paths.agent_dir_name(agent_id) != folder:
            report.damaged.append(
                f"{key}: names agent {agent_id!r}, which lives elsewhere"
                " — fix: move the folder out of the data folder"
            )
            continue
        report.agents += 1
        before = len(report.damaged)
        if repair:
            _restore_from_index(store, agent_id, report)
        head, seen = _check_agent(store, agent_id, report)
        heads[agent_id], history[agent_id] = head, seen
        if repair and len(report.damaged) == before:
            _clear_damage(store, agent_id, report)
    for where in _symlinked_folders(store):
        report.damaged.append(
            f"{where}: a symlink where memfs expects a folder (memfs never follows it)"
            " — fix: replace it with the real folder"
        )
    for tmp in durable.stale_temp_files(store.data_dir, older_than_s=TEMP_GRACE_S):
        # Harmless (nobody reads them), and the server sweeps them: a warning only.
        report.warnings.append(
            f"{tmp}: temp file left by an interrupted write (removed by the"
            f" server's sweep, or now by {FIX_REPAIR})"
        )
        if repair:
            tmp.unlink(missing_ok=True)
            report.restored.append(f"{tmp}: removed")
    _check_index(store, heads, report, repair)
    for agent_id, head in heads.items():
        _check_tree(store, agent_id, head, history[agent_id], report, repair)
    return report


def _symlinked_folders(store: Store) -> list[str]:
    """Agent folders, and their .memfs and memories folders, that are symlinks."""
    found: list[str] = []
    agents = store.data_dir / "agents"
    if agents.is_symlink():
        return ["agents"]
    if not agents.is_dir():
        return found
    for entry in sorted(os.scandir(agents), key=lambda e: e.name):
        if entry.is_symlink():
            found.append(f"agents/{entry.name}")
        elif entry.is_dir(follow_symlinks=False):
            for sub in (".memfs", "memories"):
                if os.path.islink(os.path.join(entry.path, sub)):
                    found.append(f"agents/{entry.name}/{sub}")
    return found


def _check_agent(
    store: Store, agent_id: str, report: FsckReport
) -> tuple[dict[str, str], dict[str, set[str]]]:
    head: dict[str, str] = {}
    versions: dict[str, int] = {}
    seen: dict[str, set[str]] = {}
    referenced: set[str] = set()
    copies = _index_copies(store, agent_id)
    manual = (
        f"restore the agent's folder from a backup (memfs restore), or erase it:"
        f" memfs agents rm {agent_id}"
    )
    try:
        for commit in read_log(store, agent_id):
            report.commits += 1
            key = layout.log_key(agent_id, commit.revision)
            for change in commit.changes:
                where = f"{key} ({change.path})"
                if change.version != versions.get(change.path, 0) + 1:
                    report.damaged.append(
                        f"{where}: version {change.version} out of sequence — fix: {manual}"
                    )
                if change.before != head.get(change.path):
                    report.damaged.append(
                        f"{where}: 'before' does not match the previous version — fix: {manual}"
                    )
                versions[change.path] = change.version
                if change.after is None:
                    head.pop(change.path, None)
                    continue
                head[change.path] = change.after
                seen.setdefault(change.path, set()).add(change.after)
                if change.content is not None:
                    if hashlib.sha256(change.content.encode()).hexdigest() != change.after:
                        fix = FIX_REPAIR if commit.revision in copies.commits else manual
                        report.damaged.append(
                            f"{where}: inline content does not match its sha256 — fix: {fix}"
                        )
                else:
                    referenced.add(change.after)
    except CorruptionError as exc:
        file = _file_of(exc, layout.log_prefix(agent_id))
        revision = layout.revision_of(file)
        if revision is not None and revision in copies.commits:
            fix = FIX_REPAIR
        elif revision is not None and revision > copies.head and _last_entry(store, agent_id, file):
            fix = f"{FIX_REPAIR} (moves it to .memfs/quarantine/: it was never indexed)"
        else:
            fix = manual
        report.damaged.append(f"{exc.message} — fix: {fix}")
    objects_prefix = layout.agent_prefix(agent_id) + "objects/"
    stored: set[str] = set()
    for key in store.backend.list(objects_prefix):
        name = key[len(objects_prefix) :].replace("/", "")
        report.objects += 1
        stored.add(name)
        if hashlib.sha256(store.backend.get(key)).hexdigest() != name:
            fix = FIX_REPAIR if name in copies.blobs else manual
            report.damaged.append(f"{key}: content does not match its sha256 — fix: {fix}")
    for missing in sorted(referenced - stored):
        fix = FIX_REPAIR if missing in copies.blobs else manual
        report.damaged.append(
            f"{layout.blob_key(agent_id, missing)}: content referenced by the log is missing"
            f" — fix: {fix}"
        )
    return head, seen


@dataclass
class _Copies:
    """What the index holds of an agent, each piece checked: intact copies to restore
    damaged canonical files from."""

    head: int = 0
    blobs: set[str] = field(default_factory=set)
    commits: set[int] = field(default_factory=set)


def _index_copies(store: Store, agent_id: str) -> _Copies:
    copies = _Copies()
    with store.index.read_session() as ix:
        row = ix.agent(agent_id)
        copies.head = row.revision if row else 0
        for sha, data in ix.cached_blobs(agent_id):
            if hashlib.sha256(data).hexdigest() == sha:
                copies.blobs.add(sha)
        copies.commits.update(ix.commit_revisions(agent_id))
    return copies


def _last_entry(store: Store, agent_id: str, key: str) -> bool:
    """True if ``key`` is the newest log entry of the agent."""
    return all(k <= key for k in store.backend.list(layout.log_prefix(agent_id), start_after=key))


def _entry_from_index(store: Store, agent_id: str, revision: int) -> bytes | None:
    """Log entry ``revision`` rebuilt from the index's commit row and contents (None if
    the index lacks a piece of it or a content fails its sha256)."""
    with store.index.read_session() as ix:
        row = ix.commit_entry(agent_id, revision)
        if row is None:
            return None
        changes = json.loads(row[3])
        for change in changes:
            after = change.get("after")
            if after is not None and int(change["bytes"]) <= INLINE_LIMIT:
                data = ix.blob(agent_id, after)
                if data is None or hashlib.sha256(data).hexdigest() != after:
                    return None
                change["content"] = data.decode()
    doc: dict[str, Any] = {
        "format": 1,
        "agentId": agent_id,
        "revision": revision,
        "ts": format_ts(int(row[0])),
        "actor": row[1],
        "message": row[2],
        "changes": changes,
    }
    message = str(row[2])
    if not changes and message.startswith("rename agent to "):
        doc["agentName"] = message.removeprefix("rename agent to ")  # as Store writes it
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _restore_from_index(store: Store, agent_id: str, report: FsckReport) -> None:
    """Put back damaged blobs and log entries of an agent from the index's intact copies;
    move an unreadable newest entry the index never took aside, into quarantine."""
    copies = _index_copies(store, agent_id)
    prefix = layout.agent_prefix(agent_id)
    for sha in sorted(copies.blobs):
        key = layout.blob_key(agent_id, sha)
        try:
            sound = hashlib.sha256(store.backend.get(key)).hexdigest() == sha
        except MissingObject:
            sound = not _referenced_by_blob(store, agent_id, sha)
        if not sound:
            with store.index.read_session() as ix:
                data = ix.blob(agent_id, sha)
            assert data is not None
            durable.replace(store.data_dir / key, data)
            report.restored.append(f"{key}: restored from the index's copy")
    for key in list(store.backend.list(layout.log_prefix(agent_id))):
        revision = layout.revision_of(key)
        if revision is None:
            continue
        try:
            commit = Commit.from_bytes(store.backend.get(key), where=key)
            intact = (
                commit.revision == revision
                and commit.agent_id == agent_id
                and all(
                    c.content is None or hashlib.sha256(c.content.encode()).hexdigest() == c.after
                    for c in commit.changes
                )
            )
        except (CorruptionError, Damaged):
            intact = False
        if intact:
            continue
        entry = _entry_from_index(store, agent_id, revision) if revision in copies.commits else None
        if entry is not None:
            durable.replace(store.data_dir / key, entry)
            if isinstance(store.backend, LocalBackend):
                store.backend.drop_frame(key)  # the restored file is the entry now
            report.restored.append(f"{key}: restored from the index's copy")
        elif revision > copies.head and _last_entry(store, agent_id, key):
            target = store.data_dir / f"{prefix}quarantine/{key.rsplit('/', 1)[-1]}"
            durable.ensure_dir(target.parent)
            if (store.data_dir / key).is_file():
                (store.data_dir / key).rename(target)
                durable.fsync_dir((store.data_dir / key).parent)
            else:  # a frame of the agent's segments: its bytes set aside, the frame erased
                durable.replace(target, _raw_entry(store, key))
                store.backend.delete(key)
            report.restored.append(f"{key}: moved to {target} (unreadable, never indexed)")


def _raw_entry(store: Store, key: str) -> bytes:
    """The stored bytes of a log entry, unchecked (what quarantine keeps)."""
    if isinstance(store.backend, LocalBackend):
        return store.backend.raw_log_entry(key)
    return store.backend.get(key)


def _referenced_by_blob(store: Store, agent_id: str, sha: str) -> bool:
    """True if the index knows ``sha`` as a content too large to be inline (a blob)."""
    with store.index.read_session() as ix:
        return ix.has_version_larger_than(agent_id, sha, INLINE_LIMIT)


def _clear_damage(store: Store, agent_id: str, report: FsckReport) -> None:
    """An agent that checks out sound again serves again (its index rows rebuilt)."""
    with store.index.read_session() as ix:
        damage = ix.damage(agent_id)
    if damage is None:
        return
    with store.index.write_session() as ix:
        ix.clear_damage(agent_id)
    report.restored.append(f"{agent_id}: sound again, serving (was damaged: {damage[0]})")
    report.reindex_needed = True


def _check_index(
    store: Store, heads: dict[str, dict[str, str]], report: FsckReport, repair: bool
) -> None:
    problems: list[str] = []
    with store.index.read_session() as ix:
        indexed = {a.agent_id for a in ix.agents("", None, 1 << 40)}
        for agent_id in sorted(indexed - heads.keys()):
            problems.append(f"index: agent {agent_id!r} is indexed but has no record")
        for agent_id, head in heads.items():
            if agent_id not in indexed:
                problems.append(f"index: agent {agent_id!r} is missing")
                continue
            rows = ix.live_rows(agent_id)
            if {r[0]: r[1] for r in rows} != head:
                problems.append(f"index: current memories of {agent_id!r} differ from the log")
            # A page is the rows' stored listing JSON: it must say what the row says.
            stale = [
                r[0] for r in rows if r[6] != index.listing_text(r[0], r[2], r[1], r[3], r[4], r[5])
            ]
            if stale:
                problems.append(
                    f"index: the listing of {len(stale)} memories of {agent_id!r} is stale"
                    f" (first: {stale[0]})"
                )
            # The summary reads the count and bytes kept in the agent's row.
            kept, live = ix.agent_stats(agent_id), (len(rows), sum(int(r[2]) for r in rows))
            if kept != live:
                problems.append(
                    f"index: the memory count and bytes of {agent_id!r} are stale"
                    f" (kept {kept[0]} and {kept[1]}, live {live[0]} and {live[1]})"
                )
            problems += _search_problems(agent_id, head, ix.search_rows(agent_id))
            problems += _link_problems(ix, agent_id)
    report.derived.extend(problems)
    if (problems or report.reindex_needed) and repair:
        # Damaged agents keep their rows (reindex refuses their files); the rest rebuild.
        reindex(store)
        report.repaired.extend(f"{p} (reindexed)" for p in problems)


FIX_REINDEX = "memfs reindex"


def _search_problems(agent_id: str, head: dict[str, str], rows: dict[str, str | None]) -> list[str]:
    """The full-text index of an agent against its current memories (path → sha256)."""
    fix = f" — fix: {FIX_REINDEX} (or {FIX_REPAIR})"
    out: list[str] = []
    missing = sorted(head.keys() - rows.keys())
    stale = sorted(p for p in head.keys() & rows.keys() if rows[p] != head[p])
    extra = sorted(rows.keys() - head.keys())
    for what, found in (("missing", missing), ("stale", stale), ("left over", extra)):
        if found:
            out.append(
                f"index: the full-text row of {len(found)} memories of {agent_id!r}"
                f" is {what} (first: {found[0]}){fix}"
            )
    return out


def _link_problems(ix: ReadSession, agent_id: str) -> list[str]:
    """The links table of an agent (inspect's edges) against the links of each stored
    version's cached content, as the commit that stored it wrote them."""
    contents = dict(ix.cached_blobs(agent_id))
    want: set[tuple[Any, ...]] = set()
    seek: tuple[str, str, int] = (agent_id, "", 0)
    while True:
        rows = ix.version_rows(seek, agent_id + "\x00", 1 << 62, 1000)
        for row in rows:
            for link in index.link_rows(agent_id, row[1], row[2], row[10], contents.get(row[3])):
                want.add(link[1:])
        if len(rows) < 1000:
            break
        seek = (agent_id, rows[-1][1], rows[-1][2])
    have = set(ix.agent_links(agent_id))
    fix = f" — fix: {FIX_REINDEX} (or {FIX_REPAIR})"
    out: list[str] = []
    for what, found in (("missing", want - have), ("left over", have - want)):
        if found:
            first = min(found)
            out.append(
                f"index: {len(found)} link rows of {agent_id!r} are {what}"
                f" (first: {first[0]}@{first[1]} -> {first[3]}){fix}"
            )
    return out


def _check_tree(
    store: Store,
    agent_id: str,
    head: dict[str, str],
    seen: dict[str, set[str]],
    report: FsckReport,
    repair: bool,
) -> None:
    if not store.worktree:
        return  # objects on S3: no tree to check
    tree = WorkTree(layout.worktree_root(store.data_dir, agent_id))
    try:
        on_disk = {path: file for path, file in tree.scan()}
    except SymlinkRefused as exc:
        report.damaged.append(f"{agent_id}: {exc.message}")
        return
    for link in tree.symlinks():
        report.uncommitted.append(
            f"{agent_id} {link}: a symlink in the working tree; memfs never follows it, remove it"
        )
    for path, sha in sorted(head.items()):
        file = on_disk.pop(path, None)
        if file is None:
            if os.path.lexists(tree.file(path)):  # a folder or something odd stands there
                report.uncommitted.append(f"{agent_id} {path}: replaced by a non-file")
            else:
                report.uncommitted.append(f"{agent_id} {path}: deleted in the working tree")
            continue
        actual = tree.sha256(path)
        if actual == sha:
            continue
        if actual is not None and actual in seen.get(path, set()):
            # An older version memfs itself wrote: stale, safe to bring up to date.
            report.derived.append(f"{agent_id} {path}: working tree holds an older version")
            if repair:
                tree.restore(path, store.content_of(agent_id, sha))
                report.repaired.append(f"{agent_id} {path}: restored")
        else:
            report.uncommitted.append(f"{agent_id} {path}: modified in the working tree")
    for path in sorted(on_disk):
        report.uncommitted.append(f"{agent_id} {path}: new file in the working tree")


def _remove_leftover(store: Store, folder: str) -> None:
    prefix = f"{layout.AGENTS}{folder}/.memfs/"
    for key in list(store.backend.list(prefix)):
        store.backend.delete(key)
    shutil.rmtree(store.data_dir / "agents" / folder, ignore_errors=True)


# ---- status and commit of hand edits -----------------------------------------------


@dataclass(frozen=True)
class TreeChange:
    state: str  # "modified" | "added" | "deleted" | "invalid"
    path: str
    reason: str = ""


NO_TREE = (
    "there is no working tree: objects are on S3 (MEMFS_OBJECTS / --objects), where"
    " several servers share them; read and write memories through memfs instead"
)


# How many times ``status`` catches the index up before it answers what it found.
STATUS_CATCH_UPS = 3


def status(store: Store, agent_id: str) -> list[TreeChange]:
    """Differences between an agent's working tree and its head, like ``git status``.

    A commit's tree files are renamed into place once its log entry is durable and
    before it is indexed (``Committer._place_tree``): a tree file ahead of the index is
    a commit still being indexed (or one a crash left unindexed), not a hand edit. So
    differences found while the log holds an entry past the index's head are looked at
    again once the index has caught up from the log."""
    store.get_agent(agent_id)
    if not store.worktree:
        raise InvalidRequest(NO_TREE)
    for _ in range(STATUS_CATCH_UPS):
        revision, changes = _status_at_head(store, agent_id)
        if not changes or not store.backend.exists(layout.log_key(agent_id, revision + 1)):
            break
        store.commits.catch_up_agent(agent_id)
    return changes


def _status_at_head(store: Store, agent_id: str) -> tuple[int, list[TreeChange]]:
    """The index's revision of the agent, read before its tree, and the differences."""
    tree = WorkTree(layout.worktree_root(store.data_dir, agent_id))
    head: dict[str, str] = {}
    with store.index.read_session() as ix:
        agent = ix.agent(agent_id)
        revision = agent.revision if agent is not None else 0
        for path, sha in ix.live_contents(agent_id):
            head[path] = sha
    out: list[TreeChange] = []
    for link in tree.symlinks():
        head.pop(link, None)
        out.append(
            TreeChange("invalid", link, "a symlink; memfs never follows symlinks, remove it")
        )
    for path, _file in tree.scan():
        try:
            valid = paths.memory_path(path)
            if valid != path:
                raise InvalidRequest("file name is not NFC-normalised")
        except InvalidRequest as exc:
            out.append(TreeChange("invalid", path, exc.message))
            continue
        committed = head.pop(path, None)
        if committed is None:
            out.append(TreeChange("added", path))
        elif tree.sha256(path) != committed:
            out.append(TreeChange("modified", path))
    out.extend(TreeChange("deleted", path) for path in head)
    return revision, sorted(out, key=lambda c: c.path.encode())


def commit_worktree(
    store: Store, agent_id: str, *, actor: str, message: str
) -> CommitResult | None:
    """Record every hand edit of the working tree as one commit; None if there is none."""
    changes = status(store, agent_id)
    bad = [c for c in changes if c.state == "invalid"]
    if bad:
        raise InvalidRequest(
            f"can't commit {bad[0].path}: {bad[0].reason}; rename or remove it first",
            issues=[f"{c.path}: {c.reason}" for c in bad],
        )
    if not changes:
        return None
    tree = WorkTree(layout.worktree_root(store.data_dir, agent_id))
    with store.index.read_session() as ix:
        current = {c.path: ix.memory(agent_id, c.path) for c in changes}
    ops: list[Op] = []
    for change in changes:
        row = current[change.path]
        expected = row.sha256 if row else None
        if change.state == "deleted":
            ops.append(Delete(change.path, if_match=expected))
        else:
            data = tree.read(change.path)
            if data is None:
                raise InvalidRequest(f"can't commit {change.path}: it changed while committing")
            try:  # the same checks as the commit's, here so that a refusal names the file
                contentlib.parse(data, limit=store.memory_bytes)
            except MemfsError as exc:
                raise type(exc)(
                    f"can't commit {change.path}: {exc.message}; fix the file or remove it",
                    field="path",
                ) from None
            ops.append(Put(change.path, data, if_match=expected, create_only=row is None))
    try:
        return store.apply(agent_id, ops, actor=actor, message=message or "commit working tree")
    except MemfsError as exc:
        named = ", ".join(c.path for c in changes[:3]) + (" …" if len(changes) > 3 else "")
        raise type(exc)(f"commit of {named} refused: {exc.message}", field=exc.field) from None


def default_actor() -> str:
    """``local:<login name>``: who a CLI commit is recorded as unless --actor says."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"local:{user}"
