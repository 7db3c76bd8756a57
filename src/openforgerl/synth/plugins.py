"""What an environment gives task synthesis, found through entry points so `synth` names no environment:

- `TOOL_ENVS` (`openforgerl.synth_envs`): the tool environments `--env <name>` names (`claw`,
  `claw-family`), each a function that builds its `ToolEnv`;
- `WRITERS` (`openforgerl.synth_writers`): how a synthesised task is laid out as a task folder, and which
  shipped tasks a synthesised one must not copy. A task drawn from a Claw world is a folder of `WRITER`'s
  shape (Claw's: its test.sh, solve.sh and actions.json); one drawn from a world that is all data is a
  `TOOL_WORLD` task carrying that world (`world_doc`), run by the environment of that kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from openforgerl.registry import Registry
from openforgerl.synth.toolenv import ToolEnv
from openforgerl.tasks.draft import TaskDraft

__all__ = ["TOOL_ENVS", "TOOL_WORLD", "WRITER", "WRITERS", "TaskWriter"]

WRITER = "claw"
TOOL_WORLD = "tool-world"
"""The `[environment] kind` of a task synthesised from a world that is all data (`world_doc`): it carries
the world, and the installed environment of that kind serves it in the sandbox."""


def _nothing_shipped() -> tuple[set[str], set[str]]:
    return set(), set()


@dataclass(frozen=True)
class TaskWriter:
    write: Callable[[TaskDraft, Path], Path]
    """(draft, out) -> the task folder written under `out`."""
    shipped: Callable[[], tuple[set[str], set[str]]] = _nothing_shipped
    """The shipped suite's first instruction lines and gold call sequences (JSON): a synthesised task of
    the writer's own environment equal to one is dropped, so a pool never holds a held-out task."""


def _tool_env(loaded: object) -> Callable[[], ToolEnv]:
    if not callable(loaded):
        raise TypeError(
            f"the synthesis tool environment entry point names {type(loaded).__name__}, not a function"
        )
    return cast(Callable[[], ToolEnv], loaded)


def _writer(loaded: object) -> TaskWriter:
    if not isinstance(loaded, TaskWriter):
        raise TypeError(
            f"the synthesis task writer entry point names {type(loaded).__name__}, not a TaskWriter"
        )
    return loaded


TOOL_ENVS: Registry[Callable[[], ToolEnv]] = Registry(
    "synthesis tool environment", group="openforgerl.synth_envs", adopt=_tool_env
)
WRITERS: Registry[TaskWriter] = Registry(
    "synthesis task writer", group="openforgerl.synth_writers", adopt=_writer
)
