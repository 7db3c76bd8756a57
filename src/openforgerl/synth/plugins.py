"""What an environment gives task synthesis, found through entry points so `synth` names no environment:

- `TOOL_ENVS` (`openforgerl.synth_envs`): the tool environments `--env <name>` names (`claw`,
  `claw-family`), each a function that builds its `ToolEnv`;
- `WRITERS` (`openforgerl.synth_writers`): how a synthesised task is laid out as a task folder, and which
  shipped tasks a synthesised one must not copy. Every synthesised task is a folder of `WRITER`'s shape
  (Claw's: its test.sh, solve.sh and actions.json), whichever tool environment it was drawn from.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from openforgerl.registry import Registry
from openforgerl.synth.toolenv import ToolEnv
from openforgerl.tasks.draft import TaskDraft

__all__ = ["TOOL_ENVS", "WRITER", "WRITERS", "TaskWriter"]

WRITER = "claw"


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
