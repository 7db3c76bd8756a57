"""A task folder -> its runtime, through the family that runs it (tasks/families.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openforgerl.tasks.families import family_of
from openforgerl.tasks.format import find_tasks, load_task
from openforgerl.tasks.suites import resolve_task_root

__all__ = ["load_runtime", "load_runtimes"]


def load_runtime(root: Path | str, **options: Any) -> Any:
    """The runtime of one task folder (options such as `python`, `port` go to the family's factory)."""
    task = load_task(root)
    return family_of(task).runtime(task, **options)


def load_runtimes(root: Path | str, **options: Any) -> list[Any]:
    """The runtimes of every task folder under `root` (a folder, or `builtin:<suite>`; a folder that is
    not there is a `UserError`, not an empty list)."""
    return [load_runtime(p, **options) for p in find_tasks(resolve_task_root(root))]
