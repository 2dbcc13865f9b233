"""Rebuilding and checking derived state: reindex, fsck, status and commit of hand edits.

Canonical state (agent records, log entries, blobs) is only ever *checked*; damage to
it is reported, never "repaired". Derived state (the index, the working tree, stray
temp files, leftovers of an interrupted erase) is rebuilt by ``--repair``. A file a
person edited in the working tree is an uncommitted edit, reported and never touched.
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import os
import queue
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from memfs import durable, index, layout, paths
from memfs.backend import Backend, MissingObject
from memfs.commits import Commit, read_entry
from memfs.errors import CorruptionError, InvalidRequest, MemfsError, SymlinkRefused
from memfs.store import CommitResult, Delete, Op, Put, Store
from memfs.worktree import WorkTree

# A temp file younger than this may belong to a writer still at work.
TEMP_GRACE_S = 600.0


@dataclass
class FsckReport:
    damaged: list[str] = field(default_factory=list)  # canonical: never auto-repaired
    derived: list[str] = field(default_factory=list)  # rebuilt by --repair
    uncommitted: list[str] = field(default_factory=list)  # hand edits in working trees
    repaired: list[str] = field(default_factory=list)
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
        }


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


def _read_record(store: Store, key: str) -> dict[str, str]:
    record = json.loads(store.backend.get(key))
    if not isinstance(record, dict) or not isinstance(record.get("agentId"), str):
        raise ValueError("no agentId")
    return record


def prefetched(
    backend: Backend, keys: Iterator[str], *, batch: int = 256
) -> Iterator[tuple[str, bytes]]:
    """(key, bytes) of ``keys`` in order, read ahead by a thread: the reads (system
    calls here, round trips on an object store) overlap the caller's work on the
    entries before them. At most two batches are held at a time."""
    chunks: queue.Queue[list[tuple[str, bytes]] | BaseException | None] = queue.Queue(2)
    stop = threading.Event()

    def read() -> None:
        try:
            chunk: list[tuple[str, bytes]] = []
            for key in keys:
                if stop.is_set():
                    return
                chunk.append((key, backend.get(key)))
                if len(chunk) == batch:
                    chunks.put(chunk)
                    chunk = []
            chunks.put(chunk)
            chunks.put(None)
        except BaseException as exc:  # handed to the reader of the entries
            chunks.put(exc)

    reader = threading.Thread(target=read, name="memfs-prefetch", daemon=True)
    reader.start()
    try:
        while True:
            got = chunks.get()
            if got is None:
                return
            if isinstance(got, BaseException):
                raise got
            yield from got
    finally:
        stop.set()
        while reader.is_alive():  # unblock a reader waiting to put, then let it end
            with contextlib.suppress(queue.Empty):
                chunks.get_nowait()
            reader.join(0.01)


def log_entries(store: Store, agent_id: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(key, text, JSON document) of every log entry of an agent in order; raises
    CorruptionError at a gap or at an entry that names another place."""
    expected = 1
    for key, data in prefetched(store.backend, store.backend.list(layout.log_prefix(agent_id))):
        revision = layout.revision_of(key)
        if revision is None:
            raise CorruptionError(f"unexpected object {key} in the log")
        if revision != expected:
            raise CorruptionError(f"log of {agent_id!r} jumps from {expected - 1} to {revision}")
        try:
            text = data.decode()
        except UnicodeDecodeError as exc:
            raise CorruptionError(f"log entry {key} is unreadable: {exc}") from None
        doc = read_entry(text, where=key)
        if doc.get("revision") != revision or doc.get("agentId") != agent_id:
            raise CorruptionError(
                f"log entry {key} names revision {doc.get('revision')} of {doc.get('agentId')!r}"
            )
        yield key, text, doc
        expected += 1


def read_log(store: Store, agent_id: str) -> Iterator[Commit]:
    """Every log entry of an agent in order; raises CorruptionError at a gap."""
    for key, _text, doc in log_entries(store, agent_id):
        yield Commit.from_doc(doc, where=key)


# ---- reindex -------------------------------------------------------------------------


def reindex(store: Store) -> tuple[int, int]:
    """Rebuild the whole index from the backend in one transaction; (agents, commits)."""
    agents = commits = 0
    with store.index.write() as conn:
        old_clock = index.clock(conn)
        for table in index.DERIVED_TABLES:
            conn.execute(f"DELETE FROM {table}")
        for _folder, key in canonical_agents(store):
            try:
                record = _read_record(store, key)
            except MissingObject:
                continue  # leftover of an interrupted erase: not an agent
            except ValueError as exc:
                raise CorruptionError(f"{key} is unreadable: {exc}") from None
            store.adopt_record(conn, record)
            agents += 1
            agent_id = record["agentId"]
            commits += index.bulk_load(
                conn, agent_id, log_entries(store, agent_id), _blob_of(store, agent_id)
            )
        conn.execute("UPDATE meta SET value=MAX(value, ?) WHERE key='clock'", (old_clock,))
    from memfs.runs import Runs  # runs are indexed from their own records

    Runs(store).rescan()
    return agents, commits


def _blob_of(store: Store, agent_id: str) -> Callable[[str], bytes]:
    def blob(sha256: str) -> bytes:
        return store.backend.get(layout.blob_key(agent_id, sha256))

    return blob


# ---- fsck ----------------------------------------------------------------------------


def fsck(store: Store, *, repair: bool = False) -> FsckReport:
    report = FsckReport()
    store.sync()  # entries a crashed writer left unindexed are applied first
    heads: dict[str, dict[str, str]] = {}
    history: dict[str, dict[str, set[str]]] = {}
    for folder, key in canonical_agents(store):
        try:
            record = _read_record(store, key)
        except MissingObject:
            report.derived.append(f"agents/{folder}: leftover of an interrupted erase")
            if repair:
                _remove_leftover(store, folder)
                report.repaired.append(f"agents/{folder}: removed")
            continue
        except ValueError as exc:
            report.damaged.append(f"{key}: unreadable agent record ({exc})")
            continue
        agent_id = record["agentId"]
        if paths.agent_dir_name(agent_id) != folder:
            report.damaged.append(f"{key}: names agent {agent_id!r}, which lives elsewhere")
            continue
        report.agents += 1
        head, seen = _check_agent(store, agent_id, report)
        heads[agent_id], history[agent_id] = head, seen
    for where in _symlinked_folders(store):
        report.damaged.append(
            f"{where}: a symlink where memfs expects a folder; memfs never follows it,"
            " replace it with the real folder"
        )
    for tmp in durable.stale_temp_files(store.data_dir, older_than_s=TEMP_GRACE_S):
        report.derived.append(f"{tmp}: temp file left by an interrupted write")
        if repair:
            tmp.unlink(missing_ok=True)
            report.repaired.append(f"{tmp}: removed")
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
    try:
        for commit in read_log(store, agent_id):
            report.commits += 1
            for change in commit.changes:
                where = f"{agent_id} r{commit.revision} {change.path}"
                if change.version != versions.get(change.path, 0) + 1:
                    report.damaged.append(f"{where}: version {change.version} out of sequence")
                if change.before != head.get(change.path):
                    report.damaged.append(f"{where}: 'before' does not match the previous version")
                versions[change.path] = change.version
                if change.after is None:
                    head.pop(change.path, None)
                    continue
                head[change.path] = change.after
                seen.setdefault(change.path, set()).add(change.after)
                if change.content is not None:
                    if hashlib.sha256(change.content.encode()).hexdigest() != change.after:
                        report.damaged.append(f"{where}: inline content does not match its sha256")
                else:
                    referenced.add(change.after)
    except CorruptionError as exc:
        report.damaged.append(exc.message)
    objects_prefix = layout.agent_prefix(agent_id) + "objects/"
    stored: set[str] = set()
    for key in store.backend.list(objects_prefix):
        name = key[len(objects_prefix) :].replace("/", "")
        report.objects += 1
        stored.add(name)
        if hashlib.sha256(store.backend.get(key)).hexdigest() != name:
            report.damaged.append(f"{key}: content does not match its sha256")
    for missing in sorted(referenced - stored):
        report.damaged.append(f"{agent_id}: content {missing} is referenced by the log but missing")
    return head, seen


def _check_index(
    store: Store, heads: dict[str, dict[str, str]], report: FsckReport, repair: bool
) -> None:
    problems: list[str] = []
    with store.index.read() as conn:
        indexed = {a.agent_id for a in index.agents(conn, "", None, 1 << 40)}
        for agent_id in sorted(indexed - heads.keys()):
            problems.append(f"index: agent {agent_id!r} is indexed but has no record")
        for agent_id, head in heads.items():
            if agent_id not in indexed:
                problems.append(f"index: agent {agent_id!r} is missing")
                continue
            rows = conn.execute(
                "SELECT path, sha256, bytes, description, version, updated_at, listing"
                " FROM memories WHERE agent_id=?",
                (agent_id,),
            ).fetchall()
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
    report.derived.extend(problems)
    if problems and repair and not report.damaged:
        reindex(store)
        report.repaired.extend(f"{p} (reindexed)" for p in problems)


def _check_tree(
    store: Store,
    agent_id: str,
    head: dict[str, str],
    seen: dict[str, set[str]],
    report: FsckReport,
    repair: bool,
) -> None:
    tree = WorkTree(layout.worktree_root(store.data_dir, agent_id))
    try:
        on_disk = {path: file for path, file in tree.scan()}
    except SymlinkRefused as exc:
        report.damaged.append(f"{agent_id}: {exc.message}")
        return
    for link in tree.symlinks():
        report.uncommitted.append(
            f"{agent_id} {link}: a symlink in the working tree; memfs never follows it,"
            " remove it"
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


def status(store: Store, agent_id: str) -> list[TreeChange]:
    """Differences between an agent's working tree and its head, like ``git status``."""
    store.get_agent(agent_id)
    tree = WorkTree(layout.worktree_root(store.data_dir, agent_id))
    head: dict[str, str] = {}
    with store.index.read() as conn:
        for path, sha in conn.execute(
            "SELECT path, sha256 FROM memories WHERE agent_id=?", (agent_id,)
        ):
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
        sha = head.pop(path, None)
        if sha is None:
            out.append(TreeChange("added", path))
        elif tree.sha256(path) != sha:
            out.append(TreeChange("modified", path))
    out.extend(TreeChange("deleted", path) for path in head)
    return sorted(out, key=lambda c: c.path.encode())


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
    with store.index.read() as conn:
        current = {c.path: index.memory(conn, agent_id, c.path) for c in changes}
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
            ops.append(Put(change.path, data, if_match=expected, create_only=row is None))
    try:
        return store.apply(agent_id, ops, actor=actor, message=message or "commit working tree")
    except MemfsError as exc:
        raise type(exc)(f"commit refused: {exc.message}", field=exc.field) from None


def default_actor() -> str:
    """``local:<login name>``: who a CLI commit is recorded as unless --actor says."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"local:{user}"
