"""Registers the tau2 family: task folders written by the tau2 importer (`envs/tau2/importer.py`) say
`[environment] kind = "tau2"`. Found through the `openforgerl.environments` entry point (pyproject.toml)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openforgerl.env.errors import TaskFormatError
from openforgerl.tasks.families import TaskFamily, register_family
from openforgerl.tasks.format import Task

if TYPE_CHECKING:
    from openforgerl.env.contract import TaskRuntime

__all__ = ["FAMILY", "KIND"]

KIND = "tau2"


def _runtime(task: Task, **kwargs: Any) -> TaskRuntime:
    from openforgerl.envs.tau2.runtime import Tau2TaskRuntime

    return Tau2TaskRuntime(task, python=kwargs.get("python"))


def _check(task: Task) -> None:
    """The verifier's input: the upstream task as imported (gold actions, criteria)."""
    path = task.root / "tests" / "tau2_task.json"
    if not path.is_file():
        raise TaskFormatError(path, "", "missing (a tau2 task is verified against its upstream task)")


FAMILY = register_family(TaskFamily("tau2", _runtime, kinds=(KIND,), check=_check))
