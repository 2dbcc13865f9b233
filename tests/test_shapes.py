"""One definition of each JSON wire shape: the server's answers and the client's result
classes both follow ``memfs.domain.shapes``, key for key and in order."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from http_fixtures import AGENT, Api, agent_url, memory_url, settings
from memfs.cli import main as cli_main
from memfs.client import results
from memfs.domain import shapes
from memfs.domain.webhook_verify import sign
from memfs.http.app import build


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    app = build(settings(tmp_path))
    with TestClient(app) as client:
        opened = Api(client, app, tmp_path / "data")
        yield opened


def keys(obj: dict[str, Any]) -> tuple[str, ...]:
    return tuple(obj)


def test_every_answer_has_its_shapes_keys_in_order(api: Api) -> None:
    created = api.put(agent_url(), json={}).json()
    assert keys(created) == shapes.AGENT.keys
    assert keys(api.get("/v1/agents").json()["agents"][0]) == shapes.AGENT.keys

    written = api.write("/memories/a.md", "---\ndescription: d\n---\nbody\n").json()
    assert keys(written) == shapes.MEMORY_WRITE.keys
    memory = api.get(memory_url("/memories/a.md")).json()
    assert keys(memory) == shapes.MEMORY.keys
    listed = api.get(agent_url(AGENT, "/memories")).json()["memories"][0]
    assert keys(listed) == shapes.LISTING.keys
    versions = api.get(agent_url(AGENT, "/versions?path=/memories/a.md")).json()["versions"]
    assert keys(versions[0]) == shapes.VERSION.keys
    assert keys(api.get(agent_url(AGENT, "/memory")).json()) == shapes.SUMMARY.keys

    key = api.put("/v1/tenant/keys/k1", json={"scopes": ["memories:read"]}).json()
    assert keys(key) == shapes.KEY_CREATED.keys
    assert keys(api.get("/v1/tenant/keys").json()["keys"][0]) == shapes.KEY.keys

    trigger = api.put(agent_url(AGENT, "/triggers/gh"), json={"prompt": "p"}).json()
    assert keys(trigger) == shapes.TRIGGER_WITH_SECRET.keys
    assert keys(api.get(agent_url(AGENT, "/triggers/gh")).json()) == shapes.TRIGGER.keys
    stamp, body = int(time.time()), b"{}"
    run = api.post(
        agent_url(AGENT, "/triggers/gh:deliver"),
        content=body,
        headers={
            "webhook-id": "msg_1",
            "webhook-timestamp": str(stamp),
            "webhook-signature": sign(trigger["secret"], "msg_1", stamp, body),
            "Content-Type": "application/json",
        },
        auth=None,
        protocol=None,
    ).json()
    assert keys(run) == shapes.RUN.keys

    asked = {"vectors": {}, "graph": {}, "log": {}}
    inspect = api.post(agent_url(AGENT, "/memory:inspect"), json=asked).json()
    sections = tuple(k for k in inspect if k in shapes.INSPECT_SECTIONS)
    assert sections == shapes.INSPECT_SECTIONS
    assert keys(inspect) == sections + shapes.INSPECT_TAIL.keys


def test_the_cli_json_commit_log_has_the_commit_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = str(tmp_path / "data")
    assert cli_main(["--data", data, "agents", "create", AGENT]) == 0
    note = tmp_path / "n.md"
    note.write_text("hello\n")
    assert cli_main(["--data", data, "put", AGENT, "/memories/n.md", str(note)]) == 0
    capsys.readouterr()
    assert cli_main(["--data", data, "log", AGENT, "--json"]) == 0
    commits = json.loads(capsys.readouterr().out)["commits"]
    assert commits and all(keys(c) == shapes.COMMIT.keys for c in commits)


def test_a_client_class_that_drifts_from_its_shape_is_refused_at_import() -> None:
    @dataclass(frozen=True)
    class Drifted:
        key_id: str
        scopes: tuple[str, ...]
        created_at: str  # "description" went missing

    with pytest.raises(TypeError, match="key shape"):
        results._bind(Drifted, shapes.KEY)


def test_the_client_decodes_each_shape_but_the_ones_it_has_no_class_for() -> None:
    bound = {tuple(v.values()) for v in results._KEYS.values()}
    unbound = [s.name for s in shapes.ALL if s.keys not in bound]
    # The client has no commit log and no counted agent listing; the inspect tail is
    # part of InspectPage; a trigger decodes as triggerWithSecret, the secret optional.
    assert sorted(unbound) == ["agentCounted", "commit", "inspectTail", "trigger"]


def test_build_refuses_a_wrong_number_of_values() -> None:
    with pytest.raises(TypeError, match="3 values for 4 keys"):
        shapes.KEY.build("k", [], "d")
