"""Task families: which runtime runs a task folder. A family claims `[environment] kind` values and/or
`[metadata.openforgerl] verifier` values; a folder with a kind goes to the family of that kind, one without
to the family of its verifier. So a new environment is a package that calls `register_family` (a test
defines one in its own file), never a new branch here.

Environment packages register themselves when imported; the installed ones are found through the
`openforgerl.environments` entry points (pyproject.toml) the first time a family is looked up or
registered, so this package never imports them (Harbor-style folders, tasks/harbor.py, are found the same
way). Families registered after those are asked first (a user family can take over `checks`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from openforgerl.tasks.errors import TaskFormatError

if TYPE_CHECKING:
    from openforgerl.orchestrator.task_protocol import TaskRuntime
    from openforgerl.tasks.format import Task

__all__ = ["ENTRY_POINTS", "TaskFamily", "environment_kind", "family_of", "register_family"]

ENTRY_POINTS = "openforgerl.environments"


def _accept(task: Task) -> None:
    return None


@dataclass(frozen=True)
class TaskFamily:
    name: str
    runtime: Callable[..., TaskRuntime]
    """(task, **options) -> the task's runtime (options: `python`, `port`; ignore what you do not use)."""
    kinds: tuple[str, ...] = ()
    """`[environment] kind` values this family runs."""
    verifiers: tuple[str, ...] = ()
    """`verifier` values it runs, for folders without a kind."""
    check: Callable[[Task], None] = _accept
    """Validates the folder at load (raises `TaskFormatError`): the family's own files and fields."""


_BUILTIN: list[TaskFamily] = []  # registered while the installed environments load
_USER: list[TaskFamily] = []  # registered any other time: asked first
_phase = "unloaded"  # -> "loading" -> "loaded"


def _load_environments() -> None:
    """Import every installed environment package once (each registers its families)."""
    global _phase
    if _phase != "unloaded":
        return
    _phase = "loading"
    from importlib.metadata import entry_points  # here: in-sandbox tools import this module too

    try:
        for point in entry_points(group=ENTRY_POINTS):
            point.load()
    finally:
        _phase = "loaded"


def register_family(family: TaskFamily) -> TaskFamily:
    """Add a family; it takes over the kinds and verifiers it names from every earlier one."""
    (_BUILTIN if _phase == "loading" else _USER).append(family)
    return family


def _claimed(attr: str) -> dict[str, TaskFamily]:
    """Every claimed value of `attr` ("kinds" or "verifiers") -> the family asked first for it."""
    table: dict[str, TaskFamily] = {}
    for family in (*_BUILTIN, *_USER):  # later ones overwrite: users last
        table.update(dict.fromkeys(getattr(family, attr), family))
    return table


def environment_kind(task: Task) -> str | None:
    kind = (task.config.environment.model_extra or {}).get("kind")
    return kind if isinstance(kind, str) and kind else None


def family_of(task: Task) -> TaskFamily:
    """The family that runs `task`; a folder no installed family runs is a `TaskFormatError`."""
    _load_environments()
    kind = environment_kind(task)
    key, attr, field = ((kind, "kinds", "environment.kind") if kind is not None
                        else (task.meta.verifier, "verifiers", "metadata.openforgerl.verifier"))
    table = _claimed(attr)
    if key in table:
        return table[key]
    known = ", ".join(sorted(table)) or "none"
    raise TaskFormatError(task.root / "task.toml", field,
                          f"no installed environment runs {key!r} (known: {known}; after a fresh checkout "
                          "run `pip install -e .` so the environment packages are registered)")

