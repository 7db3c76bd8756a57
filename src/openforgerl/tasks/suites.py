"""Where a task selection points: a folder, or `builtin:<suite>` for a suite an environment ships.

Environments name their shipped suites through the `openforgerl.suites` entry points (pyproject.toml:
`claw = "openforgerl.envs.claw.suite:CLAW_SUITE"`), so every command that takes a task folder takes
`builtin:claw` the same way, and this package never imports an environment.
"""

from __future__ import annotations

from pathlib import Path

from openforgerl.errors import UserError

__all__ = ["BUILTIN_PREFIX", "SUITE_ENTRY_POINTS", "builtin_suites", "resolve_task_root"]

BUILTIN_PREFIX = "builtin:"
SUITE_ENTRY_POINTS = "openforgerl.suites"


def builtin_suites() -> dict[str, Path]:
    """Every installed suite: name -> its folder (loading each entry point imports only that suite)."""
    from importlib.metadata import entry_points

    return {point.name: Path(point.load()) for point in entry_points(group=SUITE_ENTRY_POINTS)}


def resolve_task_root(spec: Path | str, *, must_exist: bool = True) -> Path:
    """The folder `spec` names. `builtin:<suite>` is looked up among the installed suites; with
    `must_exist`, a folder that is not there is one line naming it, not an empty task list."""
    text = str(spec)
    if text.startswith(BUILTIN_PREFIX):
        name = text.removeprefix(BUILTIN_PREFIX)
        suites = builtin_suites()
        if name not in suites:
            known = ", ".join(BUILTIN_PREFIX + n for n in sorted(suites)) or "none installed"
            raise UserError(f"unknown task suite {text!r} (known: {known})")
        return suites[name]
    path = Path(spec)
    if must_exist and not path.exists():
        raise UserError(f"no task folder at {path}: give a task folder (holding task.toml), a folder of them, "
                        f"or {BUILTIN_PREFIX}<suite> (e.g. {BUILTIN_PREFIX}claw)")
    return path
