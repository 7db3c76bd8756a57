"""Task families: which runtime runs a task folder. A family claims `[environment] kind` values and/or
`[metadata.openforgerl] verifier` values; a folder with a kind goes to the family of that kind, one without
to the family of its verifier. So a new environment is a package that calls `register_family` (a test
defines one in its own file), never a new branch here.

Environment packages register themselves when imported; the installed ones are found through the
`openforgerl.environments` entry points (pyproject.toml) the first time a family is looked up or
registered (`registry.Registry`), so this package never imports them (Harbor-style folders, tasks/harbor.py,
are found the same way). Families registered by code are asked first (a user family can take over `checks`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from openforgerl.env.errors import TaskFormatError
from openforgerl.registry import Registry

if TYPE_CHECKING:
    from openforgerl.env.contract import TaskRuntime
    from openforgerl.tasks.schema import Task

__all__ = [
    "ENTRY_POINTS",
    "FAMILIES",
    "RuntimeFactory",
    "TaskFamily",
    "environment_kind",
    "family_of",
    "register_family",
]

ENTRY_POINTS = "openforgerl.environments"


def _accept(task: Task) -> None:
    return None


class RuntimeFactory(Protocol):
    """A family's factory: a loaded task -> its runtime. Options the caller may pass (`python`, the
    interpreter in-sandbox services run with; `port`) are keywords a factory ignores when unused."""

    def __call__(self, task: Task, **options: Any) -> TaskRuntime: ...


@dataclass(frozen=True)
class TaskFamily:
    name: str
    runtime: RuntimeFactory
    """(task, **options) -> the task's runtime."""
    kinds: tuple[str, ...] = ()
    """`[environment] kind` values this family runs."""
    verifiers: tuple[str, ...] = ()
    """`verifier` values it runs, for folders without a kind."""
    check: Callable[[Task], None] = _accept
    """Validates the folder at load (raises `TaskFormatError`): the family's own files and fields."""


FAMILIES: Registry[TaskFamily] = Registry("task family", group=ENTRY_POINTS)
"""Family name -> family; the installed environment packages register theirs when first looked up."""


def register_family(family: TaskFamily) -> TaskFamily:
    """Add a family; it takes over the kinds and verifiers it names from every earlier one (a family
    registered by code from the installed environments' ones). Its name must be new."""
    return FAMILIES.register(family.name, family)


def _claimed(attr: str) -> dict[str, TaskFamily]:
    """Every claimed value of `attr` ("kinds" or "verifiers") -> the family asked first for it."""
    table: dict[str, TaskFamily] = {}
    for _, family in FAMILIES.items():  # later ones overwrite: code-registered ones last
        table.update(dict.fromkeys(getattr(family, attr), family))
    return table


def environment_kind(task: Task) -> str | None:
    kind = (task.config.environment.model_extra or {}).get("kind")
    return kind if isinstance(kind, str) and kind else None


def family_of(task: Task) -> TaskFamily:
    """The family that runs `task`; a folder no installed family runs is a `TaskFormatError`."""
    kind = environment_kind(task)
    key, attr, field = (
        (kind, "kinds", "environment.kind")
        if kind is not None
        else (task.meta.verifier, "verifiers", "metadata.openforgerl.verifier")
    )
    table = _claimed(attr)
    if key in table:
        return table[key]
    known = ", ".join(sorted(table)) or "none"
    raise TaskFormatError(
        task.root / "task.toml",
        field,
        f"no installed environment runs {key!r} (known: {known}; after a fresh checkout "
        "run `pip install -e .` so the environment packages are registered)",
    )
