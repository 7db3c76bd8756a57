"""veRL dataset rows <-> our tasks (pure; no veRL, no I/O beyond reading task folders).

A veRL parquet row (``RLHFDataset``) reaches ``AgentLoopBase.run`` as keyword arguments: the row's
columns (``extra_info``, ``data_source``, ``reward_model``, ``agent_name``, ...) plus what veRL adds
(``raw_prompt``, ``index``, ``uid``, and on the V1 path ``session_id`` / ``global_steps``). Ours carry
everything the rollout needs in ``extra_info``: ``task_id``, ``task_dir`` (the task folder) and
``harness``. ``build_row`` writes that shape; ``RowSpec.parse`` reads it back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AGENT_NAME = "openforgerl"
DATA_SOURCE = "openforgerl"


class RowError(ValueError):
    """A dataset row that names no runnable task (a data bug: it fails the row, loudly)."""


@dataclass(frozen=True)
class RowSpec:
    """What one dataset row asks for: which task, in which harness."""

    task_id: str | None
    task_dir: str | None
    harness: str
    index: int | None = None

    @classmethod
    def parse(cls, row: Mapping[str, Any], default_harness: str = "zero") -> RowSpec:
        info = _as_dict(row.get("extra_info"))
        task_id, task_dir = info.get("task_id"), info.get("task_dir")
        if not task_id and not task_dir:
            raise RowError(f"row has neither extra_info.task_id nor extra_info.task_dir: {sorted(info)}")
        index = info.get("index", row.get("index"))
        return cls(
            _str_or_none(task_id),
            _str_or_none(task_dir),
            str(info.get("harness") or default_harness),
            None if index is None else int(index),
        )


def _as_dict(value: Any) -> dict[str, Any]:
    """extra_info arrives as a dict (or a numpy 0-d object array holding one, via parquet)."""
    if value is None:
        return {}
    if hasattr(value, "item") and not isinstance(value, Mapping):
        value = value.item()
    if not isinstance(value, Mapping):
        raise RowError(f"extra_info must be a mapping, got {type(value).__name__}")
    return dict(value)


def _str_or_none(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def resolve_task_dir(spec: RowSpec, roots: Iterable[Path], index: Mapping[str, Path] | None = None) -> Path:
    """The task folder of a row: ``task_dir`` (absolute, or relative to a root), else ``task_id`` looked
    up."""
    roots = list(roots)
    if spec.task_dir:
        for candidate in _dir_candidates(Path(spec.task_dir), roots):
            if (candidate / "task.toml").is_file():
                return candidate
    if spec.task_id and index is not None and spec.task_id in index:
        return index[spec.task_id]
    raise RowError(
        f"task not found: task_id={spec.task_id!r} task_dir={spec.task_dir!r} "
        f"(roots: {[str(r) for r in roots]})"
    )


def _dir_candidates(path: Path, roots: list[Path]) -> list[Path]:
    return [path] if path.is_absolute() else [root / path for root in roots] + [path]


def task_index(roots: Iterable[Path]) -> dict[str, Path]:
    """task_id -> folder for every task under `roots` (first root wins on a duplicate id)."""
    from openforgerl.tasks.format import find_tasks, load_task

    found: dict[str, Path] = {}
    for root in roots:
        for path in find_tasks(root):
            found.setdefault(load_task(path).task_id, path)
    return found


def build_row(task: Any, *, harness: str, index: int, split: str = "train") -> dict[str, Any]:
    """One veRL parquet row for a loaded task (``openforgerl.tasks.format.Task``)."""
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": task.instruction}],
        "ability": "agent",
        "reward_model": {"style": "rule", "ground_truth": ""},
        "agent_name": AGENT_NAME,
        "extra_info": {
            "index": index,
            "split": split,
            "task_id": task.task_id,
            "task_dir": str(task.root),
            "harness": harness,
        },
    }
