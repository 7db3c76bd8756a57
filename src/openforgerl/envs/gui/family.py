"""Every GUI environment kind as a task family: importing this module (the `gui` entry point of
`openforgerl.environments`) registers, for each kind installed under `openforgerl.gui_kinds`
(`openforgerl.env.screens`), the task family that runs `[environment] kind = "<kind>"` folders with
`GuiTaskRuntime`; `register_kind(GuiEnvironment(...))` does both for a kind defined in code."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openforgerl.env.screens import GuiEnvironment, kinds, register
from openforgerl.tasks.families import TaskFamily, register_family

if TYPE_CHECKING:
    from openforgerl.env.contract import TaskRuntime
    from openforgerl.tasks.schema import Task

__all__ = ["register_kind"]


def _runtime(task: Task, **options: Any) -> TaskRuntime:
    from openforgerl.envs.gui.runtime import GuiTaskRuntime

    return GuiTaskRuntime(task, **options)


def _check(task: Any) -> None:
    from openforgerl.envs.gui.runtime import check_gui_task

    check_gui_task(task)


def _family(kind: str) -> TaskFamily:
    return register_family(TaskFamily(f"gui:{kind}", _runtime, kinds=(kind,), check=_check))


def register_kind(env: GuiEnvironment) -> GuiEnvironment:
    register(env)
    _family(env.kind)
    return env


for _kind in kinds():
    _family(_kind)
