"""Registers the tau2 family (`envs/families.py` imports this module before answering `family_of`)."""

from __future__ import annotations

from typing import Any

from openforgerl.envs.families import TaskFamily, register_family
from openforgerl.envs.task import Task

__all__ = ["FAMILY"]


def _runtime(task: Task, **kwargs: Any) -> Any:
    from openforgerl.envs.tau2.runtime import Tau2TaskRuntime

    return Tau2TaskRuntime(task, python=kwargs.get("python"))


def _is_tau2(task: Task) -> bool:
    """Folders written by the tau2 importer (older ones, with Claw checks and no upstream task, stay Claw)."""
    return task.meta.source == "tau2" and (task.root / "tests" / "tau2_task.json").is_file()


FAMILY = register_family(TaskFamily("tau2", _is_tau2, _runtime, verifier_files=False))
