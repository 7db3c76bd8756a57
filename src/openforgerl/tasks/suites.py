"""Where a task selection points: a folder, or `builtin:<suite>` for a suite an environment ships.

Environments name their shipped suites through the `openforgerl.suites` entry points (pyproject.toml:
`claw = "openforgerl.envs.claw.suite:CLAW_SUITE"`), so every command that takes a task folder takes
`builtin:claw` the same way, and this package never imports an environment.
"""

from __future__ import annotations

from pathlib import Path

from openforgerl.errors import UserError
from openforgerl.registry import Registry, nearest

__all__ = [
    "BUILTIN_PREFIX",
    "DEFAULT_TASKS",
    "SUITES",
    "SUITE_ENTRY_POINTS",
    "builtin_suites",
    "resolve_task_root",
]

BUILTIN_PREFIX = "builtin:"
SUITE_ENTRY_POINTS = "openforgerl.suites"
DEFAULT_TASKS = BUILTIN_PREFIX + "claw"
"""The task set used where none is named (the config's `tasks.dir`, veRL's task roots, analytics' task
index): a suite found through its entry point, so the core imports no environment for it."""


def _suite_path(loaded: object) -> Path:
    return Path(str(loaded))


SUITES: Registry[Path] = Registry("task suite", group=SUITE_ENTRY_POINTS, adopt=_suite_path)
"""Suite name -> its folder (looking one name up loads only that suite's entry point)."""


def builtin_suites() -> dict[str, Path]:
    """Every installed suite: name -> its folder."""
    return dict(SUITES.items())


def resolve_task_root(spec: Path | str, *, must_exist: bool = True) -> Path:
    """The folder `spec` names. `builtin:<suite>` is looked up among the installed suites; with
    `must_exist`, a folder that is not there is one line naming it, not an empty task list."""
    text = str(spec)
    if text.startswith(BUILTIN_PREFIX):
        name = text.removeprefix(BUILTIN_PREFIX)
        if name not in SUITES:
            close = nearest(name, SUITES.names())
            hint = f"; did you mean {BUILTIN_PREFIX + close!r}?" if close is not None else ""
            known = ", ".join(BUILTIN_PREFIX + n for n in sorted(SUITES.names())) or "none installed"
            raise UserError(f"unknown task suite {text!r}{hint} (known: {known})")
        return SUITES.get(name)
    path = Path(spec)
    if must_exist and not path.exists():
        raise UserError(
            f"no task folder at {path}: give a task folder (holding task.toml), a folder of them, "
            f"or {BUILTIN_PREFIX}<suite> (e.g. {BUILTIN_PREFIX}claw)"
        )
    return path
