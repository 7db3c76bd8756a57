"""Read a run directory (train `--out-dir` or eval `--out`) without writing to it.

Layout read (every part optional except some rollout records):
- `calls.db`: the gateway's call log (`calls`, `rollouts` tables), opened read-only;
- `train_rollouts.jsonl`, `eval_rollouts.jsonl`, `rollouts.jsonl`: one `RolloutRecord` per attempt
  (the kind is the file's prefix; `rollouts.jsonl` is `eval`); without them the `rollouts` table;
- `rollouts/<rollout_id>/audit.json`: the Claw services' audit (`capture.py` writes it),
  `rollouts/<rollout_id>/files/`: the sandbox's workdir as the agent left it.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from openforgerl.records import CallRecord, RolloutRecord

__all__ = ["ROLLOUT_FILES", "RunDir", "TaskFacts", "TaskIndex", "suite_family"]

ROLLOUT_FILES = {"train_rollouts.jsonl": "train", "eval_rollouts.jsonl": "eval", "rollouts.jsonl": "eval"}
ARTIFACTS = "rollouts"


def suite_family(task_id: str | None) -> str:
    """`claw/calendar-create-01-error-retry` → `calendar-create`: the suite family a task was generated
    from, the name up to its first number (not the `tasks.TaskFamily` that runs the folder)."""
    name = (task_id or "?").rsplit("/", 1)[-1]
    words = name.split("-")
    head = []
    for w in words:
        if w.isdigit():
            break
        head.append(w)
    return "-".join(head) or name


class RunDir:
    """One run directory; every read stays inside `root`."""

    def __init__(self, root: Path | str, label: str | None = None) -> None:
        self.root = Path(root)
        self.label = label or self.root.name

    @property
    def db_path(self) -> Path:
        return self.root / "calls.db"

    def connect(self) -> sqlite3.Connection | None:
        """A read-only connection to the call log (None when the run has none)."""
        if not self.db_path.is_file():
            return None
        conn = sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True, check_same_thread=False)
        return conn

    def rollout_files(self) -> list[tuple[Path, str]]:
        return [
            (self.root / name, kind) for name, kind in ROLLOUT_FILES.items() if (self.root / name).is_file()
        ]

    def iter_rollouts(self) -> Iterator[tuple[str, RolloutRecord]]:
        """(kind, record) per rollout id (the last attempt line wins), JSONL first, else the DB table."""
        files = self.rollout_files()
        if files:
            seen: dict[str, tuple[str, RolloutRecord]] = {}
            for path, kind in files:
                with path.open() as fh:
                    for line in fh:
                        if line.strip():
                            rec = RolloutRecord.model_validate_json(line)
                            seen[rec.rollout_id] = (kind, rec)
            yield from seen.values()
            return
        conn = self.connect()
        if conn is None:
            return
        with conn:
            for (body,) in conn.execute("SELECT body FROM rollouts ORDER BY rowid"):
                yield "run", RolloutRecord.model_validate_json(body)
        conn.close()

    def calls(self, rollout_id: str, conn: sqlite3.Connection | None = None) -> list[CallRecord]:
        own = conn is None
        conn = conn or self.connect()
        if conn is None:
            return []
        try:
            rows = conn.execute(
                "SELECT body FROM calls WHERE rollout_id=? ORDER BY idx", (rollout_id,)
            ).fetchall()
        finally:
            if own:
                conn.close()
        return [CallRecord.model_validate_json(b) for (b,) in rows]

    def artifact_dir(self, rollout_id: str) -> Path | None:
        """`rollouts/<id>/` if it is a real folder inside the run (never a link)."""
        if not re.fullmatch(r"[A-Za-z0-9_.:-]+", rollout_id) or rollout_id in (".", ".."):
            return None
        path = self.root / ARTIFACTS / rollout_id
        if path.is_symlink() or not path.is_dir() or (self.root / ARTIFACTS).is_symlink():
            return None
        return path

    def audit(self, rollout_id: str) -> list[dict[str, Any]] | None:
        folder = self.artifact_dir(rollout_id)
        path = folder / "audit.json" if folder else None
        if path is None or path.is_symlink() or not path.is_file():
            return None
        data = json.loads(path.read_text())
        calls = data.get("calls") if isinstance(data, dict) else data
        return list(calls) if isinstance(calls, list) else None


@dataclass(frozen=True)
class TaskFacts:
    task_id: str
    offered: tuple[str, ...]
    gold: tuple[tuple[str, Mapping[str, Any]], ...]
    forbidden: tuple[tuple[str, Mapping[str, Any]], ...]
    has_faults: bool


class TaskIndex:
    """Task id → what the metrics need from the task folder (offered tools, gold actions, safety)."""

    def __init__(self, dirs: Sequence[Path]) -> None:
        self.dirs = list(dirs)

    @classmethod
    def default(cls) -> TaskIndex:
        from openforgerl.tasks.suites import DEFAULT_TASKS, resolve_task_root

        return cls([resolve_task_root(DEFAULT_TASKS)])

    @cached_property
    def _roots(self) -> dict[str, Path]:
        from openforgerl.tasks.format import find_tasks, load_task

        out: dict[str, Path] = {}
        for d in self.dirs:
            for path in find_tasks(d):
                try:
                    out[load_task(path).task_id] = path
                except Exception:  # a broken task folder is not this tool's problem
                    continue
        return out

    def facts(self, task_id: str | None) -> TaskFacts | None:
        root = self._roots.get(task_id or "")
        return _load_facts(root) if root is not None else None


def _load_facts(root: Path) -> TaskFacts:
    from openforgerl.env.checks.spec import CalledCheck, load_spec
    from openforgerl.env.world_tools import offered_tools
    from openforgerl.tasks.format import load_task

    task = load_task(root)
    actions_path = root / "solution" / "actions.json"
    actions = json.loads(actions_path.read_text()) if actions_path.is_file() else []
    gold = tuple(
        (str(a["tool"]), dict(a.get("args") or {})) for a in actions if isinstance(a, dict) and "tool" in a
    )
    forbidden: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    checks = root / "tests" / "checks.toml"
    if checks.is_file():  # load_task ran the family's check, which registered the family's own check kinds
        spec = load_spec(checks)
        forbidden = tuple(
            (c.tool, dict(c.match))
            for c in spec.checks
            if isinstance(c, CalledCheck) and c.kind == "not_called"
        )
    offered = tuple(offered_tools(task.meta.tools, task.meta.services))
    return TaskFacts(task.task_id, offered, gold, forbidden, bool(task.meta.faults))
