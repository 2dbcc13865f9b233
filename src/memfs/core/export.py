"""Export an agent's (or a scope's) whole history, and import it back.

JSON lines, per agent in id order: one ``agent`` record, one ``version`` record per
stored version (content and metadata included, tombstones with ``content: null``),
then its ``commit`` records (the log, oldest first). ``import_records`` rebuilds the
canonical objects from them byte-for-byte — same revisions, timestamps, hashes and
store id — into agents that do not exist yet. ``git_commits`` feeds a
``git fast-import`` stream (see gitexport.py).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

from memfs.canonical import layout
from memfs.core.log_reading import read_log
from memfs.core.store import Store
from memfs.domain import paths
from memfs.domain.commits import INLINE_LIMIT, Commit, format_ts, parse_ts
from memfs.domain.gitexport import GitCommit
from memfs.errors import Conflict, InvalidRequest

FORMAT = 1


def agents_in(store: Store, agent_id: str | None, scope: str | None) -> list[str]:
    if agent_id is not None:
        store.get_agent(agent_id)
        return [agent_id]
    assert scope is not None
    paths.scope_id(scope)
    return [a.agent_id for a in store.iter_agents() if paths.in_scope(a.agent_id, scope)]


def iter_export(store: Store, agent_ids: Iterable[str]) -> Iterator[dict[str, Any]]:
    for agent_id in agent_ids:
        agent = store.get_agent(agent_id)
        yield {
            "type": "agent",
            "format": FORMAT,
            "agentId": agent.agent_id,
            "name": _first_name(store, agent_id),
            "memoryStoreId": agent.memory_store_id,
            "createdAt": format_ts(agent.created_at),
        }
        commits = list(read_log(store, agent_id))
        for commit in commits:
            for change in commit.changes:
                content = store.content_of(agent_id, change.after) if change.after else None
                yield {
                    "type": "version",
                    "agentId": agent_id,
                    "path": change.path,
                    "version": change.version,
                    "revision": commit.revision,
                    "operation": change.operation,
                    "contentSha256": change.after,
                    "bytes": change.size,
                    "description": change.description,
                    "metadata": change.metadata,
                    "validFrom": format_ts(commit.ts),
                    "content": content.decode() if content is not None else None,
                }
        for commit in commits:
            doc = json.loads(commit.to_bytes())
            for change in doc["changes"]:
                change.pop("content", None)
            yield {"type": "commit", **doc}


def _first_name(store: Store, agent_id: str) -> str:
    record = store.agent_record(agent_id)
    return str(record["name"]) if record else agent_id


def import_records(store: Store, records: Iterable[dict[str, Any]]) -> list[str]:
    """Recreate exported agents in ``store``; refuses agents that already exist.

    All or nothing: when a record is refused, the agents this import created so far
    are erased again, so a failed import leaves the store as it was.
    """
    imported: list[str] = []
    try:
        _import_all(store, records, imported)
    except BaseException:
        for agent_id in imported:  # only agents this import created
            store.erase_agent(agent_id)
        raise
    store.sync()
    return imported


def _import_all(store: Store, records: Iterable[dict[str, Any]], imported: list[str]) -> None:
    contents: dict[tuple[str, str, int], str | None] = {}
    current: str | None = None
    revision = 0
    for number, record in enumerate(records, start=1):
        kind = record.get("type") if isinstance(record, dict) else None
        try:
            if kind == "agent":
                current = _import_agent(store, record)
                imported.append(current)
                contents.clear()
                revision = 0
            elif kind == "version":
                if record["agentId"] != current:
                    raise ValueError("version record outside its agent")
                contents[(record["agentId"], record["path"], int(record["version"]))] = record[
                    "content"
                ]
            elif kind == "commit":
                if record["agentId"] != current:
                    raise ValueError("commit record outside its agent")
                if int(record["revision"]) != revision + 1:
                    raise ValueError(f"revision {record['revision']} follows {revision}")
                _import_commit(store, record, contents)
                revision += 1
            else:
                raise ValueError(f"unknown record type {kind!r}")
        except KeyError as exc:
            raise InvalidRequest(f"import record {number} has no field {exc}") from None
        except (TypeError, ValueError) as exc:
            raise InvalidRequest(f"import record {number} is invalid: {exc}") from None


def _import_agent(store: Store, record: dict[str, Any]) -> str:
    agent_id = paths.agent_id(record["agentId"])
    if record.get("format") != FORMAT:
        raise ValueError(f"unsupported export format {record.get('format')!r}")
    doc = {
        "format": 1,
        "agentId": agent_id,
        "name": str(record["name"]),
        "memoryStoreId": str(record["memoryStoreId"]),
        "createdAt": format_ts(parse_ts(record["createdAt"])),
    }
    if next(store.backend.list(layout.agent_prefix(agent_id)), None) is not None:
        raise Conflict(f"agent {agent_id!r} already exists here; import into an empty store")
    body = json.dumps(doc, ensure_ascii=False).encode() + b"\n"
    if not store.backend.put_if_absent(layout.agent_key(agent_id), body):
        raise Conflict(f"agent {agent_id!r} already exists here")
    with store.index.write_session() as ix:
        store.adopt_record(ix, doc)
    return agent_id


def _import_commit(
    store: Store, record: dict[str, Any], contents: dict[tuple[str, str, int], str | None]
) -> None:
    agent_id = record["agentId"]
    doc = {k: v for k, v in record.items() if k != "type"}
    doc["changes"] = [dict(c) for c in record["changes"]]
    for change in doc["changes"]:
        if change["after"] is None:
            continue
        text = contents.get((agent_id, change["path"], int(change["version"])))
        if text is None:
            raise ValueError(f"no content for {change['path']} v{change['version']}")
        data = text.encode()
        if hashlib.sha256(data).hexdigest() != change["after"] or len(data) != change["bytes"]:
            raise ValueError(f"content of {change['path']} v{change['version']} is not its sha256")
        if len(data) > INLINE_LIMIT:  # stored as a blob, as the original commit did
            store.backend.put_if_absent(layout.blob_key(agent_id, change["after"]), data)
        else:
            change["content"] = text
    commit = Commit.from_json(doc)
    if not store.backend.put_if_absent(
        layout.log_key(agent_id, commit.revision), commit.to_bytes()
    ):
        raise ValueError(f"revision {commit.revision} of {agent_id!r} is there already")


def git_commits(store: Store, agent_id: str) -> Iterator[GitCommit]:
    """One git commit per revision of ``agent_id``, contents read as they go."""
    store.get_agent(agent_id)
    for commit in read_log(store, agent_id):
        yield GitCommit(
            revision=commit.revision,
            timestamp=dt.datetime.fromtimestamp(commit.ts / 1_000_000, tz=dt.UTC),
            actor=commit.actor,
            message=commit.message,
            changes=[
                (c.path, store.content_of(agent_id, c.after) if c.after else None)
                for c in commit.changes
            ],
        )
