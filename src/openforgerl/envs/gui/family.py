"""A GUI environment kind as a task family: `register_kind(GuiEnvironment(...))` registers the kind's screen
(`registry`) and the task family that runs `[environment] kind = "<kind>"` folders with `GuiTaskRuntime`.
Import-light: the service process imports the environment packages that call it."""

from __future__ import annotations

from typing import Any

from openforgerl.envs.gui.registry import GuiEnvironment, register
from openforgerl.tasks.families import TaskFamily, register_family

__all__ = ["register_kind"]


def _runtime(task: Any, **options: Any) -> Any:
    from openforgerl.envs.gui.runtime import GuiTaskRuntime

    return GuiTaskRuntime(task, **options)


def _check(task: Any) -> None:
    from openforgerl.envs.gui.runtime import check_gui_task

    check_gui_task(task)


def register_kind(env: GuiEnvironment) -> GuiEnvironment:
    register(env)
    register_family(TaskFamily(f"gui:{env.kind}", _runtime, kinds=(env.kind,), check=_check))
    return env
