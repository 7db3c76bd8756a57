"""The rollout table of one run: a small SQLite index, paged and filtered in SQL.

Built once per run from the call log's `rollouts` table (json_extract inside SQLite, the bodies never
reach Python) or, without a call log, by streaming the rollout JSONL files; only the summary
columns are kept (no verifier logs, no metadata), so 10,000 rollouts cost a few MB. A page is one
`SELECT ... LIMIT/OFFSET` over that index.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from openforgerl.analytics.rundir import RunDir, suite_family
from openforgerl.records import RolloutRecord

__all__ = ["FILTERS", "RolloutIndex", "RolloutRow"]

FILTERS = ("task", "harness", "status", "kind", "infra", "version", "q")
_COLUMNS = (
    "rollout_id",
    "task_id",
    "harness",
    "status",
    "reward",
    "infra_reason",
    "policy_version",
    "kind",
    "calls",
    "family",
    "passed",
    "started_at",
    "src",
    "offset",
)
_SCHEMA = """CREATE TABLE idx (rollout_id TEXT PRIMARY KEY, task_id TEXT, harness TEXT, status TEXT,
 reward REAL, infra_reason TEXT, policy_version INTEGER, kind TEXT, calls INTEGER, family TEXT,
 passed INTEGER, started_at REAL, src INTEGER, offset INTEGER)"""
_FROM_DB = """INSERT OR REPLACE INTO idx SELECT
 json_extract(body,'$.rollout_id'), json_extract(body,'$.task_id'), json_extract(body,'$.harness'),
 json_extract(body,'$.status'), json_extract(body,'$.reward'),
 CASE WHEN json_extract(body,'$.status') LIKE 'infra_error:%' THEN json_extract(body,'$.status')
      WHEN json_extract(body,'$.infra_tainted') THEN 'tainted' ELSE NULL END,
 coalesce((SELECT max(value) FROM json_each(json_extract(body,'$.policy_versions'))), 0),
 ?, 0, NULL, coalesce(json_extract(body,'$.reward_components.pass'), json_extract(body,'$.reward') >= 1.0),
 json_extract(body,'$.started_at'), -1, rowid
 FROM run.rollouts"""


@dataclass(frozen=True, slots=True)
class RolloutRow:
    rollout_id: str
    task_id: str | None
    harness: str | None
    status: str | None
    reward: float | None
    infra_reason: str | None
    policy_version: int
    kind: str
    calls: int
    family: str
    passed: bool
    started_at: float | None


class RolloutIndex:
    def __init__(self, run: RunDir) -> None:
        self.run = run
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(_SCHEMA)
        self._build()

    def _build(self) -> None:
        files = self.run.rollout_files()
        if self.run.db_path.is_file():
            self._db.execute("ATTACH DATABASE ? AS run", (f"file:{self.run.db_path}?mode=ro",))
        if files:
            for n, (path, kind) in enumerate(files):
                self._from_jsonl(n, path, kind)
        elif self.run.db_path.is_file():
            self._db.execute(_FROM_DB, ("run",))
        if self.run.db_path.is_file():
            self._db.execute("CREATE TEMP TABLE counts (rollout_id TEXT PRIMARY KEY, n INTEGER)")
            self._db.execute(
                "INSERT INTO counts SELECT rollout_id, count(*) FROM run.calls GROUP BY rollout_id"
            )
            self._db.execute(
                "UPDATE idx SET calls = coalesce((SELECT n FROM "
                "counts WHERE counts.rollout_id = idx.rollout_id), 0)"
            )
            self._db.commit()
            self._db.execute("DETACH DATABASE run")
        families = {t: suite_family(t) for (t,) in self._db.execute("SELECT DISTINCT task_id FROM idx")}
        self._db.executemany(
            "UPDATE idx SET family=? WHERE task_id IS ?", [(f, t) for t, f in families.items()]
        )
        for col in ("task_id", "harness", "status", "policy_version", "kind"):
            self._db.execute(f"CREATE INDEX i_{col} ON idx({col})")
        self._db.commit()

    def _from_jsonl(self, src: int, path: Any, kind: str) -> None:
        rows = []
        offset = 0
        with path.open("rb") as fh:
            for line in fh:
                if line.strip():
                    rows.append((*_row(json.loads(line), kind), src, offset))
                offset += len(line)
                if len(rows) >= 2000:
                    self._insert(rows)
                    rows = []
        self._insert(rows)

    def _insert(self, rows: list[tuple[Any, ...]]) -> None:
        self._db.executemany(f"INSERT OR REPLACE INTO idx VALUES ({','.join('?' * len(_COLUMNS))})", rows)

    # -- queries -------------------------------------------------------------------------------
    def _where(self, filters: Mapping[str, str]) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        for key, col in (("task", "task_id"), ("harness", "harness"), ("status", "status"), ("kind", "kind")):
            if filters.get(key):
                clauses.append(f"{col} = ?")
                params.append(filters[key])
        if filters.get("version"):
            clauses.append("policy_version = ?")
            params.append(int(filters["version"]) if filters["version"].isdigit() else -1)
        if filters.get("infra") == "yes":
            clauses.append("infra_reason IS NOT NULL")
        elif filters.get("infra") == "no":
            clauses.append("infra_reason IS NULL")
        if filters.get("q"):
            clauses.append("(task_id LIKE ? OR rollout_id LIKE ?)")
            params += [f"%{filters['q']}%"] * 2
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", params

    def page(
        self, filters: Mapping[str, str], offset: int = 0, limit: int = 100
    ) -> tuple[list[RolloutRow], int]:
        where, params = self._where(filters)
        cols = ",".join(_COLUMNS[:-2])
        with self._lock:
            total = self._db.execute(f"SELECT count(*) FROM idx{where}", params).fetchone()[0]
            rows = self._db.execute(
                f"SELECT {cols} FROM idx{where} ORDER BY started_at, rollout_id LIMIT ? OFFSET ?",
                [*params, limit, offset],
            ).fetchall()
        return [_as_row(r) for r in rows], int(total)

    def distinct(self, column: str) -> list[Any]:
        assert column in _COLUMNS
        with self._lock:
            return [
                v
                for (v,) in self._db.execute(
                    f"SELECT DISTINCT {column} FROM idx WHERE {column} IS NOT NULL ORDER BY {column}"
                )
            ]

    def get(self, rollout_id: str) -> RolloutRow | None:
        with self._lock:
            row = self._db.execute(
                f"SELECT {','.join(_COLUMNS[:-2])} FROM idx WHERE rollout_id=?", (rollout_id,)
            ).fetchone()
        return _as_row(row) if row else None

    def record(self, rollout_id: str) -> RolloutRecord | None:
        """The full record, read from where the index found it (one line or one row, never a scan)."""
        with self._lock:
            found = self._db.execute(
                "SELECT src, offset FROM idx WHERE rollout_id=?", (rollout_id,)
            ).fetchone()
        if found is None:
            return None
        src, offset = found
        if src >= 0:
            path = self.run.rollout_files()[src][0]
            with path.open("rb") as fh:
                fh.seek(offset)
                return RolloutRecord.model_validate_json(fh.readline())
        conn = self.run.connect()
        if conn is None:
            return None
        try:
            row = conn.execute("SELECT body FROM rollouts WHERE rowid=?", (offset,)).fetchone()
        finally:
            conn.close()
        return RolloutRecord.model_validate_json(row[0]) if row else None

    def for_task(self, task_id: str) -> list[RolloutRow]:
        rows, _ = self.page({"task": task_id}, 0, 1000)
        return rows

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT count(*) FROM idx").fetchone()[0])


def _infra(rec: Mapping[str, Any]) -> str | None:
    status = str(rec.get("status") or "")
    if status.startswith("infra_error:"):
        return status
    return "tainted" if rec.get("infra_tainted") else None


def _row(rec: Mapping[str, Any], kind: str) -> tuple[Any, ...]:
    comps = rec.get("reward_components") or {}
    reward = rec.get("reward")
    passed = comps.get("pass", 1.0 if (reward or 0.0) >= 1.0 else 0.0) >= 1.0
    return (
        rec["rollout_id"],
        rec.get("task_id"),
        rec.get("harness"),
        rec.get("status"),
        reward,
        _infra(rec),
        max(rec.get("policy_versions") or [0]),
        kind,
        0,
        None,
        int(passed),
        rec.get("started_at"),
    )
    # src and offset are appended by the caller


def _as_row(r: tuple[Any, ...]) -> RolloutRow:
    return RolloutRow(
        r[0],
        r[1],
        r[2],
        r[3],
        r[4],
        r[5],
        int(r[6] or 0),
        r[7],
        int(r[8] or 0),
        r[9] or "?",
        bool(r[10]),
        r[11],
    )  # src/offset stay in the index


SLUG = re.compile(r"[^A-Za-z0-9_.-]+")
