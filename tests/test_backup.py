"""``memfs backup`` / ``memfs restore`` with real processes.

- a backup taken by a ``memfs backup`` process while writer threads and webhook
  deliveries run against a real two-worker ``memfs serve`` is restored into a new
  folder: every write, run and key acknowledged before the backup started is there,
  fsck finds nothing wrong, every restored run that succeeded has the memory its
  action wrote, and a server on the restored folder accepts the same admin and app
  keys and drives the restored runs to an end;
- restore refuses a damaged backup naming the file (before writing anything), an
  unfinished one (no manifest), and a non-empty target unless ``--force``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from memfs.client import Client
from servers_real import RealServer, memfs_cli

AGENT = "team/notes"
OTHER = "team/inbox"
FILE_KEY = "backup-admin-key-0123456789abcdef"
WAIT = 120.0


def _until(check: object, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if callable(check) and check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Load:
    """Writer and delivery threads against a server; each ack is recorded as it comes."""

    def __init__(self, server: RealServer, secret: str) -> None:
        self.server = server
        self.secret = secret
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.writes: list[tuple[str, str, str]] = []  # (agent, path, content)
        self.runs: list[tuple[str, str]] = []  # (webhook id, run id)
        self.errors: list[BaseException] = []
        self.threads = [
            threading.Thread(target=self._write, args=(AGENT, "a")),
            threading.Thread(target=self._write, args=(OTHER, "b")),
            threading.Thread(target=self._deliver),
        ]

    def __enter__(self) -> Load:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(WAIT)
        assert not self.errors, self.errors

    def acked(self) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
        with self.lock:
            return list(self.writes), list(self.runs)

    def _write(self, agent: str, name: str) -> None:
        try:
            with Client(self.server.url, FILE_KEY) as client:
                n = 0
                while not self.stop.is_set():
                    n += 1
                    path, content = f"/memories/load/{name}-{n:05d}.md", f"# {name} {n}\n"
                    if n % 7 == 0:  # now and then a large one: a blob beside the entry
                        content += "x" * 20_000 + "\n"
                    client.put_memory(agent, path, content)
                    with self.lock:
                        self.writes.append((agent, path, content))
        except BaseException as exc:
            self.errors.append(exc)

    def _deliver(self) -> None:
        try:
            with Client(self.server.url, "") as sender:
                n = 0
                while not self.stop.is_set():
                    n += 1
                    webhook_id = f"msg_{n:05d}"
                    run, started = sender.deliver(
                        AGENT, "inbox", b'{"n": %d}' % n, secret=self.secret, webhook_id=webhook_id
                    )
                    assert started
                    with self.lock:
                        self.runs.append((webhook_id, run.id))
        except BaseException as exc:
            self.errors.append(exc)


def _files_snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_backup_beside_a_busy_server_restores_every_acknowledged_thing(tmp_path: Path) -> None:
    data, dest, restored = tmp_path / "data", tmp_path / "backup", tmp_path / "restored"
    data.mkdir(mode=0o700)
    (data / "admin.key").write_text(FILE_KEY + "\n")
    os.chmod(data / "admin.key", 0o600)
    with RealServer(data, workers=2, admin_key=FILE_KEY, key_in_env=False) as server:
        with Client(server.url, FILE_KEY) as admin:
            admin.put_agent(AGENT)
            admin.put_agent(OTHER)
            secret = admin.put_trigger(AGENT, "inbox", prompt="file it").secret
            assert secret
            app = admin.create_key("reader", scopes=["memories:read", f"agents:{AGENT}"])
        with Load(server, secret) as load:
            _until(lambda: len(load.acked()[0]) >= 40 and len(load.acked()[1]) >= 10, "load")
            writes, runs = load.acked()  # acknowledged before the backup starts
            done = memfs_cli("backup", str(dest), data=data, timeout=WAIT)
            assert done.returncode == 0, done.stderr
            assert done.stdout.startswith("backed up 2 agent(s), 1 key(s): ")
            # The load went on while the backup ran: the backup is not of a quiet store.
            _until(lambda: len(load.acked()[0]) > len(writes) + 10, "writes after the backup")
    assert os.stat(dest).st_mode & 0o777 == 0o700

    made = memfs_cli("restore", str(dest), data=restored, timeout=WAIT)
    assert made.returncode == 0, made.stderr
    assert made.stderr == f"memfs: creating data folder {restored}\n"
    fsck = memfs_cli("--json", "fsck", data=restored, timeout=WAIT)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
    report = json.loads(fsck.stdout)
    assert report["damaged"] == [] and report["derived"] == [] and report["agents"] == 2

    # Every acknowledged write is in the restored working tree and its index.
    for agent, path, content in writes:
        tree = restored / "agents" / agent.replace("/", "%2F") / path.lstrip("/")
        assert tree.read_text() == content, path
    with RealServer(restored, workers=1, admin_key=FILE_KEY, key_in_env=False) as again:
        with Client(again.url, FILE_KEY) as admin:
            for agent, path, content in writes[:: max(1, len(writes) // 20)]:
                assert admin.get_memory(agent, path).content == content
            restored_runs = {r.id: r for r in admin.iter_runs(AGENT)}
            for webhook_id, run_id in runs:
                assert restored_runs[run_id].webhook_id == webhook_id
            # A run the backup holds as succeeded has the memory its action wrote.
            for run in restored_runs.values():
                if run.status == "succeeded":
                    admin.get_memory(AGENT, f"/memories/inbox/inbox/{run.webhook_id}.md")
            # The restored server drives every restored run to its end.
            _until(
                lambda: all(r.status == "succeeded" for r in admin.iter_runs(AGENT)),
                "restored runs to succeed",
            )
            assert {k.key_id for k in admin.list_keys()} == {"reader"}
        with Client(again.url, app.secret or "") as reader:
            agent, path, content = next(w for w in writes if w[0] == AGENT)
            assert reader.get_memory(agent, path).content == content


def test_restore_verifies_every_file_and_refuses_a_non_empty_target(tmp_path: Path) -> None:
    data, dest = tmp_path / "data", tmp_path / "backup"
    assert memfs_cli("agents", "create", "demo", data=data).returncode == 0
    big = tmp_path / "big.md"
    big.write_text("# big\n" + "y" * 30_000)
    assert memfs_cli("put", "demo", "big.md", str(big), data=data).returncode == 0
    assert memfs_cli("backup", str(dest), data=data).returncode == 0
    again = memfs_cli("backup", str(dest), data=data)
    assert again.returncode == 2 and "not empty" in again.stderr

    # One flipped byte in a blob: refused, naming the file, nothing written.
    [blob] = [p for p in dest.rglob("*") if p.is_file() and "/objects/" in str(p)]
    original = blob.read_bytes()
    blob.write_bytes(original[:-1] + b"z")
    target = tmp_path / "target"
    refused = memfs_cli("restore", str(dest), data=target)
    assert refused.returncode == 2
    assert refused.stderr == f"memfs: backup file {blob} is damaged: its sha256 differs\n"
    assert not target.exists()
    blob.write_bytes(original)

    # A non-empty target only with --force, which replaces what it held, and only
    # when what it holds is a memfs data folder.
    target.mkdir()
    (target / "stray.txt").write_text("keep me?")
    refused = memfs_cli("restore", str(dest), data=target)
    assert refused.returncode == 2 and "--force" in refused.stderr
    refused = memfs_cli("restore", str(dest), "--force", data=target)
    assert refused.returncode == 2 and "not a memfs data folder" in refused.stderr
    assert _files_snapshot(target) == {"stray.txt": b"keep me?"}
    (target / "stray.txt").unlink()
    assert memfs_cli("agents", "create", "other", data=target).returncode == 0
    forced = memfs_cli("restore", str(dest), "--force", data=target)
    assert forced.returncode == 0, forced.stderr
    agents = memfs_cli("agents", "ls", data=target)
    assert agents.stdout == "demo\n"  # what the folder held before is gone
    assert memfs_cli("cat", "demo", "big.md", data=target).stdout == big.read_text()

    # Without its manifest a folder is an unfinished backup.
    (dest / "memfs-backup.json").unlink()
    refused = memfs_cli("restore", str(dest), data=tmp_path / "other")
    assert refused.returncode == 2 and "memfs-backup.json is missing" in refused.stderr
