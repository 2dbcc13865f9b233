"""The PostgreSQL index's write session: the SQLite index's writes (``derived/index/
writes.py`` and ``runs.py``), one for one, inside one READ COMMITTED transaction that
holds the index's write lock (``connection.WRITE_LOCK``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from psycopg import Cursor

from memfs.derived.index.links import link_rows
from memfs.derived.index.postgres import search
from memfs.derived.index.postgres.reads import PgRead, encode_text
from memfs.derived.index.postgres.schema import ADD_LINK
from memfs.derived.index.rows import live_delta, memory_row, metadata_json, version_row
from memfs.derived.index.runs import RUN_COLUMNS, RUN_FIELDS
from memfs.derived.index.schema import DERIVED_TABLES
from memfs.domain.commits import Commit
from memfs.domain.content import metadata_text
from memfs.errors import CorruptionError

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_PUT_RUN = (
    f"INSERT INTO runs({RUN_COLUMNS}) VALUES({','.join(['%s'] * len(RUN_FIELDS))})"
    " ON CONFLICT(agent_id, run_id) DO UPDATE SET "
    + ", ".join(f"{c}=excluded.{c}" for c in RUN_FIELDS[2:])
)


def summary(entry: bytes) -> str:
    """The log summary of an entry: its changes without their inline contents (what the
    SQLite index writes with json_remove; the same JSON, compact, keys in order)."""
    changes = json.loads(entry)["changes"]
    for change in changes:
        change.pop("content", None)
    return str(_dumps(changes))


class PgWrite(PgRead):
    """A write transaction holding the index's write lock."""

    def apply_commit(
        self, commit: Commit, visible_at: int, contents: dict[str, bytes], entry: bytes
    ) -> bool:
        """Record ``commit`` (idempotent: False if its revision is already there)."""
        if self._insert_commit(commit, visible_at, entry).rowcount == 0:
            return False
        # The rest depends on no answer: sent as one pipeline, one round trip rather
        # than one per statement (a commit of one change is seven statements).
        with self.conn.pipeline():
            self._apply_changes(commit, visible_at, contents)
        return True

    def _insert_commit(self, commit: Commit, visible_at: int, entry: bytes) -> Cursor[Any]:
        return self._run(
            "INSERT INTO commits VALUES(%s,%s,%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING",
            (
                commit.agent_id,
                commit.revision,
                commit.ts,
                visible_at,
                commit.actor,
                commit.message,
                summary(entry),
            ),
        )

    def _apply_changes(self, commit: Commit, visible_at: int, contents: dict[str, bytes]) -> None:
        agent = commit.agent_id
        # The agent's count and bytes: the touched paths' old rows out now, their new
        # rows in with the revision below (as the SQLite index does).
        self._run(
            "UPDATE agents SET (memory_count, memory_bytes)=(SELECT agents.memory_count-COUNT(*),"
            " agents.memory_bytes-COALESCE(SUM(bytes), 0) FROM memories"
            " WHERE agent_id=%s AND path=ANY(%s)) WHERE agent_id=%s",
            (agent, sorted({c.path for c in commit.changes}), agent),
        )
        for change in commit.changes:
            if change.version > 1:
                self._run(
                    "UPDATE versions SET valid_to=%s, visible_to=%s"
                    " WHERE agent_id=%s AND path=%s AND version=%s",
                    (commit.ts, visible_at, agent, change.path, change.version - 1),
                )
            description, metadata = change.description, change.metadata
            meta_json = metadata_json(change)
            self._run(
                "INSERT INTO versions VALUES(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,NULL,%s,NULL)",
                version_row(commit, change, visible_at, meta_json),
            )
            if change.before is not None:
                self._run(
                    "DELETE FROM memory_meta WHERE agent_id=%s AND path=%s", (agent, change.path)
                )
            if change.after is None:
                self._run(
                    "DELETE FROM memories WHERE agent_id=%s AND path=%s", (agent, change.path)
                )
                search.unindex_doc(self.conn, agent, change.path)
                continue
            self._run(  # an update keeps the memory's created_at
                "INSERT INTO memories VALUES(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
                " ON CONFLICT(agent_id, path) DO UPDATE SET version=excluded.version,"
                " sha256=excluded.sha256, bytes=excluded.bytes,"
                " description=excluded.description, metadata=excluded.metadata,"
                " updated_at=excluded.updated_at, listing=excluded.listing",
                memory_row(commit, change, meta_json),
            )
            if metadata:
                with self.conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO memory_meta VALUES(%s,%s,%s,%s) ON CONFLICT(agent_id, path,"
                        " key) DO UPDATE SET value=excluded.value",
                        [
                            (agent, change.path, encode_text(k), encode_text(metadata_text(v)))
                            for k, v in metadata.items()
                        ],
                    )
            if change.after in contents:
                self._run(
                    "INSERT INTO blobs VALUES(%s,%s,%s) ON CONFLICT DO NOTHING",
                    (agent, change.after, contents[change.after]),
                )
            # A rename brings no content along: its bytes are the cached ones (the one
            # answer this pipeline waits for).
            content = contents.get(change.after)
            if content is None:
                row = self._one(
                    "SELECT content FROM blobs WHERE agent_id=%s AND sha256=%s",
                    (agent, change.after),
                )
                content = bytes(row[0]) if row is not None else None
            search.index_doc(self.conn, agent, change.path, change.after, description, content)
            links = link_rows(agent, change.path, change.version, visible_at, content)
            if links:
                with self.conn.cursor() as cur:
                    cur.executemany(ADD_LINK, links)
        self._run(
            "UPDATE agents SET revision=GREATEST(revision, %s), last_ts=GREATEST(last_ts, %s),"
            " name=COALESCE(%s, name), memory_count=memory_count+%s,"
            " memory_bytes=memory_bytes+%s WHERE agent_id=%s",
            (commit.revision, commit.ts, commit.agent_name, *live_delta(commit), agent),
        )
        self.raise_clock(visible_at)

    def bulk_load(
        self,
        agent: str,
        entries: Iterable[tuple[str, str, dict[str, Any]]],
        blob: Callable[[str], bytes],
    ) -> int:
        """Index a whole log into an agent's empty rows: the rows ``apply_commit`` of
        each commit writes (visible at its timestamp), every statement in one pipeline
        (the rows are empty, so no answer is waited for until the end)."""
        with self.conn.pipeline():
            return self._load(entries, blob)

    def _load(
        self, entries: Iterable[tuple[str, str, dict[str, Any]]], blob: Callable[[str], bytes]
    ) -> int:
        count = 0
        for where, text, doc in entries:
            try:
                commit = Commit.from_doc(doc, where=where)
                contents: dict[str, bytes] = {}
                for change in commit.changes:
                    if change.after is None:
                        continue
                    if change.content is None:
                        contents[change.after] = blob(change.after)  # checked by the reader
                        continue
                    data = change.content.encode()
                    if hashlib.sha256(data).hexdigest() != change.after:
                        bad = CorruptionError(
                            f"log entry {where}: inline content of {change.path} does not"
                            " match its sha256"
                        )
                        bad.file = where  # type: ignore[attr-defined]
                        raise bad
                    contents[change.after] = data
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                raise CorruptionError(f"log entry {where} is unreadable: {exc!r}") from None
            self._insert_commit(commit, commit.ts, text.encode())
            self._apply_changes(commit, commit.ts, contents)
            count += 1
        return count

    def clear_damage(self, agent_id: str) -> None:
        self._run("DELETE FROM damage WHERE agent_id=%s", (agent_id,))

    def clear_tables(self, tables: Iterable[str]) -> None:
        for table in tables:
            if table not in DERIVED_TABLES:
                raise ValueError(f"not an index table: {table!r}")
            self._run(f"DELETE FROM {table}")

    def drop_agent(self, agent_id: str, *, runs: bool = True) -> None:
        for table in DERIVED_TABLES:
            if runs or table not in ("runs", "run_steps"):
                self._run(f"DELETE FROM {table} WHERE agent_id=%s", (agent_id,))

    def mark_damaged(self, agent_id: str, file: str, reason: str) -> None:
        self._run(
            "INSERT INTO damage VALUES(%s,%s,%s) ON CONFLICT(agent_id) DO UPDATE"
            " SET file=excluded.file, reason=excluded.reason",
            (agent_id, file, reason),
        )

    def put_agent(self, agent_id: str, name: str, store_id: str, created_at: int) -> None:
        self._run(
            "INSERT INTO agents(agent_id, name, store_id, created_at) VALUES(%s,%s,%s,%s)"
            " ON CONFLICT DO NOTHING",
            (agent_id, name, store_id, created_at),
        )

    def raise_clock(self, at: int) -> None:
        """Move the visibility clock forward to ``at`` (never back). The clock row is
        updated inside this transaction, which holds the write lock: every node's
        commit reads the clock and raises it under that lock, so one stamped after a
        reader saw the clock always gets a later ``visible_at`` (see connection.py)."""
        self._run("UPDATE meta SET value=GREATEST(value, %s) WHERE key='clock'", (at,))

    def savepoint(self, name: str) -> None:
        self._run(f'SAVEPOINT "{_name(name)}"')

    def rollback_to(self, name: str) -> None:
        self._run(f'ROLLBACK TO SAVEPOINT "{_name(name)}"')

    def release(self, name: str) -> None:
        self._run(f'RELEASE SAVEPOINT "{_name(name)}"')

    def put_run(self, values: Sequence[Any]) -> None:
        self._run(_PUT_RUN, list(values))

    def add_run_step(
        self,
        agent_id: str,
        run_id: str,
        seq: int,
        at: int,
        visible_at: int,
        kind: str,
        attempt: int,
        detail: str,
    ) -> None:
        self._run(
            "INSERT INTO run_steps VALUES(%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT DO NOTHING",
            (agent_id, run_id, seq, at, visible_at, kind, attempt, detail),
        )

    def purge_search(self) -> None:
        """Nothing to merge: a deleted row's words live only in its dead tuple and GIN
        entries, which (auto)VACUUM reclaims as for every other table (VACUUM cannot run
        inside this transaction)."""

    def forget_delivery(self, agent_id: str, run_id: str) -> None:
        self._run(
            "UPDATE runs SET delivery_key=NULL WHERE agent_id=%s AND run_id=%s",
            (agent_id, run_id),
        )


def _name(name: str) -> str:
    if '"' in name or "\x00" in name:
        raise ValueError(f"not a savepoint name: {name!r}")
    return name
