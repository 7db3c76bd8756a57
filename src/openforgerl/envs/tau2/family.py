"""Registers the tau2 family (`envs/families.py` imports this module before answering `family_of`)."""

from __future__ import annotations

from typing import Any

from openforgerl.envs.families import TaskFamily, register_family
from openforgerl.envs.task import Task

__all__ = ["FAMILY"]


def _runtime(task: Task, **kwargs: Any) -> Any:
    from openforgerl.envs.tau2.runtime import Tau2TaskRuntime

    return Tau2TaskRuntime(task, python=kwargs.get("python"))


FAMILY = register_family(TaskFamily("tau2", lambda t: t.meta.source == "tau2", _runtime, verifier_files=False))
