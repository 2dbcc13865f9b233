"""Online backup of a data folder's canonical state, and restore from it.

A backup is a plain folder: every canonical object under its backend key (``keys/…``,
``agents/<dir>/.memfs/…``), the generated secrets ``admin.key`` and ``token.key``, and
last ``memfs-backup.json``, the manifest: each file's size and sha256. A folder with
no manifest is an unfinished backup and restore refuses it.

Consistency without a lock (the argument is in docs/design-notes.md): canonical
objects are immutable and create-if-absent, so a copy of an object is the object.
What listing at different instants could break is references between objects, and
each reference points from a later-written object to an earlier-written one (a log
entry to its blobs, a run event to its delivery record, a succeeded run to the commit
its action made). Copying the *referrers* first (deliveries, runs, then the log, then
the blobs) means every object a copied object names already existed when its own
folder was listed, so it is copied too. Whatever was written after its folder was
listed is simply not in the backup, as if the backup had been taken a moment earlier.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from memfs import __version__
from memfs.canonical import durable, layout
from memfs.canonical.backend import LocalBackend, MissingObject
from memfs.core.delivery_records import record_of
from memfs.core.store import Store
from memfs.derived.worktree import WorkTree
from memfs.domain.commits import format_ts, now_us
from memfs.errors import InvalidRequest

MANIFEST = "memfs-backup.json"
SECRETS = ("admin.key", "token.key")
# Per agent, in the order they are copied: referrers before what they refer to.
AGENT_PARTS = ("deliveries/", "runs/", "triggers/", "log/", "objects/")


@dataclass
class BackupReport:
    files: int = 0
    bytes: int = 0
    agents: list[str] = field(default_factory=list)
    keys: int = 0
    skipped: list[str] = field(default_factory=list)  # written while the backup ran

    def to_json(self) -> dict[str, object]:
        return {
            "files": self.files,
            "bytes": self.bytes,
            "agents": len(self.agents),
            "keys": self.keys,
            "skipped": self.skipped,
        }


class _Writer:
    """Files of the backup: 0600 in 0700 folders, each durable, listed in the manifest."""

    def __init__(self, dest: Path) -> None:
        self.dest = dest
        self.entries: dict[str, dict[str, object]] = {}

    def put(self, rel: str, data: bytes) -> None:
        path = self.dest / rel
        _make_dirs(self.dest, path.parent)
        durable.create_new(path, data, mode=0o600)
        self.entries[rel] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    def drop(self, rel: str) -> None:
        (self.dest / rel).unlink(missing_ok=True)
        self.entries.pop(rel, None)


def _make_dirs(root: Path, folder: Path) -> None:
    missing = []
    probe = folder
    while probe != root and not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for one in reversed(missing):
        one.mkdir(mode=0o700, exist_ok=True)
        durable.fsync_dir(one.parent)


def _empty_or_absent(path: Path) -> bool:
    return not path.exists() or (path.is_dir() and not any(path.iterdir()))


def backup(data_dir: Path, dest: Path) -> BackupReport:
    """Copy the canonical state of ``data_dir`` into the new folder ``dest``."""
    if not _empty_or_absent(dest):
        raise InvalidRequest(f"{dest} exists and is not empty; back up into a new folder")
    if dest.resolve().is_relative_to(data_dir.resolve()):
        raise InvalidRequest(f"{dest} is inside the data folder {data_dir}; choose another place")
    backend = LocalBackend(data_dir)
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    writer = _Writer(dest)
    report = BackupReport()
    for name in SECRETS:
        with _suppress_missing():
            writer.put(name, (data_dir / name).read_bytes())
    for key in list(backend.list("keys/")):
        with _suppress_missing():
            writer.put(key, backend.get(key))
            report.keys += 1
    for folder in _agent_folders(data_dir):
        _backup_agent(backend, folder, writer, report)
    manifest = {
        "format": 1,
        "memfsVersion": __version__,
        "createdAt": format_ts(now_us()),
        "files": {rel: writer.entries[rel] for rel in sorted(writer.entries)},
    }
    durable.create_new(dest / MANIFEST, json.dumps(manifest, indent=1).encode(), mode=0o600)
    report.files = len(writer.entries)
    report.bytes = sum(int(str(e["bytes"])) for e in writer.entries.values())
    return report


def _suppress_missing() -> contextlib.suppress:
    """An object deleted while the backup ran (a revoked key, a collected delivery)."""
    return contextlib.suppress(MissingObject, FileNotFoundError)


def _agent_folders(data_dir: Path) -> list[str]:
    try:
        return sorted(e.name for e in os.scandir(data_dir / "agents") if e.is_dir())
    except FileNotFoundError:
        return []


def _backup_agent(
    backend: LocalBackend, folder: str, writer: _Writer, report: BackupReport
) -> None:
    prefix = f"{layout.AGENTS}{folder}/.memfs/"
    record_key = prefix + "agent.json"
    try:
        record = backend.get(record_key)
    except MissingObject:
        return  # being erased, or the leftover of an interrupted erase: not an agent
    copied = [record_key]
    writer.put(record_key, record)
    runs_with_start: set[str] = set()
    run_files: dict[str, list[str]] = {}
    for part in AGENT_PARTS:
        keys = list(backend.list(prefix + part))
        if part == "log/":
            keys = _contiguous_log(keys, report)
        for key in keys:
            try:
                data = backend.get(key)
            except MissingObject:
                continue  # a delivery collected meanwhile: its event 1 is under runs/
            if part == "objects/":
                name = key[len(prefix + part) :].replace("/", "")
                if hashlib.sha256(data).hexdigest() != name:
                    raise InvalidRequest(
                        f"{key} in the data folder does not match its sha256; "
                        "run 'memfs fsck' and fix the damage before backing up"
                    )
            writer.put(key, data)
            copied.append(key)
            if part == "deliveries/":
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    runs_with_start.add(str(record_of(key, data)["runId"]))
            elif part == "runs/":
                run_id, _, rest = key[len(prefix + part) :].partition(".")
                run_files.setdefault(run_id, []).append(key)
                if rest == "e000001.json":
                    runs_with_start.add(run_id)
    # Events of a run whose delivery came after deliveries/ was listed: that run
    # started after the backup's instant for deliveries, so it is left out whole.
    for run_id, keys in run_files.items():
        if run_id not in runs_with_start:
            for key in keys:
                writer.drop(key)
            report.skipped.append(f"run {run_id}: delivered while the backup ran")
    if not backend.exists(record_key):
        # Erased while the backup ran: the erasure wins, nothing of the agent is kept.
        for key in copied:
            writer.drop(key)
        report.skipped.append(f"agent folder {folder}: erased while the backup ran")
        return
    report.agents.append(folder)


def _contiguous_log(keys: list[str], report: BackupReport) -> list[str]:
    """Entries 1..N with no gap: a folder read while entries are added may show N+2
    without N+1, and a log with a hole is not a log."""
    out = []
    for expected, key in enumerate(sorted(keys), start=1):
        if layout.revision_of(key) != expected:
            report.skipped.append(f"{key}: committed while the backup ran")
            break
        out.append(key)
    return out


# ---- restore --------------------------------------------------------------------------


def verify(src: Path) -> dict[str, dict[str, object]]:
    """The manifest's files, each checked (size, sha256, blob names); raises naming one."""
    manifest_path = src / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_bytes())
        files = manifest["files"]
        if manifest.get("format") != 1 or not isinstance(files, dict):
            raise ValueError("unknown format")
    except FileNotFoundError:
        raise InvalidRequest(
            f"{src} is not a finished memfs backup: {MANIFEST} is missing"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidRequest(f"{manifest_path} is unreadable: {exc}") from None
    for rel, entry in files.items():
        _check_name(rel)
        path = src / rel
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InvalidRequest(f"backup file {path} is unreadable: {exc.strerror}") from None
        if not isinstance(entry, dict) or len(data) != entry.get("bytes"):
            raise InvalidRequest(f"backup file {path} is damaged: its size differs")
        sha = hashlib.sha256(data).hexdigest()
        if sha != entry.get("sha256"):
            raise InvalidRequest(f"backup file {path} is damaged: its sha256 differs")
        if (
            "/.memfs/objects/" in rel
            and rel.split("/.memfs/objects/", 1)[1].replace("/", "") != sha
        ):
            raise InvalidRequest(f"backup file {path} is damaged: it does not match its name")
    return files


def _looks_like_data(folder: Path) -> bool:
    names = {entry.name for entry in folder.iterdir()}
    return bool(names) and names <= {
        "agents",
        "keys",
        "work",
        "index.sqlite",
        "index.sqlite-wal",
        "index.sqlite-shm",
        "index.sqlite.lock",
        *SECRETS,
    } | {n for n in names if durable.is_temp_name(n)}


def _check_name(rel: object) -> None:
    ok = isinstance(rel, str) and (
        rel in SECRETS
        or (rel.startswith("keys/") and rel.count("/") == 1)
        or (rel.startswith(layout.AGENTS) and "/.memfs/" in rel)
    )
    if ok:
        assert isinstance(rel, str)
        parts = rel.split("/")
        ok = all(p not in ("", ".", "..") and not durable.is_temp_name(p) for p in parts)
    if not ok:
        raise InvalidRequest(f"the backup manifest names {rel!r}, which memfs never writes")


def restore(src: Path, data_dir: Path, *, force: bool = False) -> int:
    """Rebuild ``data_dir`` from the backup ``src``; the number of files restored.

    Everything is verified before the first byte is written. The caller derives the
    index and the working trees afterwards (``maintenance.reindex``, ``checkout``).
    """
    files = verify(src)
    if data_dir.exists() and not data_dir.is_dir():
        raise InvalidRequest(f"{data_dir} is not a folder")
    if src.resolve().is_relative_to(data_dir.resolve()):
        raise InvalidRequest(f"the backup {src} is inside {data_dir}; restore elsewhere")
    if not _empty_or_absent(data_dir):
        if not force:
            raise InvalidRequest(
                f"{data_dir} is not empty; restore into a new folder, or add --force to "
                "replace what it holds (stop any server on it first)"
            )
        if not _looks_like_data(data_dir):
            # --force deletes what the folder holds: only ever a memfs data folder's.
            raise InvalidRequest(
                f"{data_dir} holds files but is not a memfs data folder; --force only "
                "replaces a data folder"
            )
        for entry in list(data_dir.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    if not data_dir.exists():
        print(f"memfs: creating data folder {data_dir}", file=sys.stderr)
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    for rel in sorted(files):
        path = data_dir / rel
        _make_dirs(data_dir, path.parent)
        durable.create_new(path, (src / rel).read_bytes(), mode=0o600)
    return len(files)


def checkout(store: Store) -> int:
    """Write every agent's current memories into its working tree (after a reindex);
    the number of files written."""
    written = 0
    for agent in store.iter_agents():
        tree = WorkTree(layout.worktree_root(store.data_dir, agent.agent_id))
        tree.root.mkdir(parents=True, exist_ok=True)
        with store.index.read_session() as ix:
            rows = ix.live_contents(agent.agent_id)
        for path, sha in rows:
            content = store.content_of(agent.agent_id, sha)
            tree.update(path, None, sha, content, agent.revision)
            written += 1
    return written
