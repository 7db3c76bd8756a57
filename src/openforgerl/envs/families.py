"""Task families: which runtime runs a task folder. One ordered table, so a new environment family is a
module that calls `register_family` (a test defines one in its own file in under 60 lines), not a new
branch in `load_runtime`. Families registered by users are asked first; the built-ins (GUI kinds, Claw
checks, Harbor / claw-bench scripts) last, in that order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openforgerl.envs.task import Task

__all__ = ["TaskFamily", "environment_kind", "family_of", "register_family"]


@dataclass(frozen=True)
class TaskFamily:
    name: str
    matches: Callable[[Task], bool]
    runtime: Callable[..., Any]
    """(task, **kwargs) -> a `TaskRuntime` (orchestrator/task_protocol.py)."""
    verifier_files: bool = True
    """Whether loading checks the task's `[metadata.openforgerl] verifier` files (tests/checks.toml, …);
    a family that verifies in its own code says False."""


def environment_kind(task: Task) -> str | None:
    kind = (task.config.environment.model_extra or {}).get("kind")
    return kind if isinstance(kind, str) else None


def _gui_runtime(task: Task, **kwargs: Any) -> Any:
    from openforgerl.envs.gui.runtime import GuiTaskRuntime

    return GuiTaskRuntime(task, **kwargs)


def _claw_runtime(task: Task, **kwargs: Any) -> Any:
    from openforgerl.envs.runtime import ClawTaskRuntime

    return ClawTaskRuntime(task, **kwargs)


def _harbor_runtime(task: Task, **kwargs: Any) -> Any:
    from openforgerl.envs.importers.harbor import HarborTaskRuntime

    return HarborTaskRuntime(task, python=kwargs.get("python"))


_USER: list[TaskFamily] = []
FAMILY_MODULES: list[str] = ["openforgerl.envs.tau2.family"]
"""Modules that `register_family` when imported, imported on the first `family_of` (lazily: a family
module may import the task model, which imports this one)."""
_imported: set[str] = set()
_BUILTIN = (
    TaskFamily("gui", lambda t: environment_kind(t) is not None, _gui_runtime),  # kinds: envs.gui.registry
    TaskFamily("claw", lambda t: t.meta.verifier == "checks", _claw_runtime),
    TaskFamily("harbor", lambda t: True, _harbor_runtime),
)


def register_family(family: TaskFamily) -> TaskFamily:
    """Add (or replace, by name) a family; it is asked before the built-ins and earlier user ones."""
    _USER[:] = [family, *(f for f in _USER if f.name != family.name)]
    return family


def family_of(task: Task) -> TaskFamily:
    for module in [m for m in FAMILY_MODULES if m not in _imported]:
        import_module(module)
        _imported.add(module)
    return next(f for f in (*_USER, *_BUILTIN) if f.matches(task))
