"""``memfs keys`` against a real running ``memfs serve`` on the same data folder.

- ``keys create --json`` prints the secret once with keyId, scopes, createdAt; ``ls``
  (text and JSON) never shows a secret;
- a key made by the CLI works for the running server, and after ``keys revoke`` its
  next request is a 401, with no restart;
- ``keys rotate-admin`` replaces data/admin.key (0600): every worker of the running
  server refuses the old admin key at once and accepts the new one;
- with MEMFS_ADMIN_KEY set, ``rotate-admin`` refuses (exit 2) and changes nothing.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from servers_real import RealServer, headers, memfs_cli

FILE_KEY = "file-admin-key-0123456789abcdef"


def _requests(server: RealServer, key: str, n: int = 8) -> set[int]:
    """Status codes of ``n`` requests on fresh connections (so both workers answer)."""
    import httpx

    codes = set()
    for _ in range(n):
        with httpx.Client(base_url=server.url, timeout=30) as client:
            codes.add(client.get("/v1/agents/demo/memories", headers=headers(key)).status_code)
    return codes


def test_keys_made_revoked_and_rotated_count_for_a_running_server(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert memfs_cli("agents", "create", "demo", data=data).returncode == 0
    (data / "admin.key").write_text(FILE_KEY + "\n")
    os.chmod(data / "admin.key", 0o600)
    with RealServer(data, workers=2, admin_key=FILE_KEY, key_in_env=False) as server:
        made = memfs_cli(
            "keys", "create", "app", "--scope", "memories:read", "agents:demo", "--json", data=data
        )
        assert made.returncode == 0, made.stderr
        doc = json.loads(made.stdout)
        assert {"keyId", "secret", "scopes", "createdAt"} <= set(doc)
        assert doc["keyId"] == "app" and doc["scopes"] == ["memories:read", "agents:demo"]
        secret = doc["secret"]
        assert _requests(server, secret) == {200}

        listed = memfs_cli("keys", "ls", data=data)
        listed_json = memfs_cli("keys", "ls", "--json", data=data)
        assert listed.returncode == listed_json.returncode == 0
        assert listed.stdout.startswith("app  ") and secret not in listed.stdout
        assert secret not in listed_json.stdout and "secret" not in listed_json.stdout
        assert [k["keyId"] for k in json.loads(listed_json.stdout)["keys"]] == ["app"]

        revoked = memfs_cli("keys", "revoke", "app", data=data)
        assert revoked.returncode == 0, revoked.stderr
        assert _requests(server, secret) == {401}

        assert _requests(server, FILE_KEY) == {200}
        rotated = memfs_cli("keys", "rotate-admin", data=data)
        assert rotated.returncode == 0, rotated.stderr
        new_key = (data / "admin.key").read_text().strip()
        assert new_key != FILE_KEY and new_key not in rotated.stdout
        assert stat.S_IMODE((data / "admin.key").stat().st_mode) == 0o600
        assert _requests(server, FILE_KEY) == {401}
        assert _requests(server, new_key) == {200}


def test_rotate_admin_refuses_while_memfs_admin_key_is_set(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert memfs_cli("agents", "create", "demo", data=data).returncode == 0
    (data / "admin.key").write_text(FILE_KEY + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
    env["MEMFS_ADMIN_KEY"] = "env-admin-key-0123456789abcdef"
    refused = subprocess.run(
        [sys.executable, "-m", "memfs.cli", "keys", "rotate-admin", "--data", str(data)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("memfs: MEMFS_ADMIN_KEY is set"), refused.stderr
    assert "restart the server" in refused.stderr
    assert (data / "admin.key").read_text() == FILE_KEY + "\n"
