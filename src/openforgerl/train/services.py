"""What a training run stands on: the services the layer above opens for it (engine, call log, gateway,
sandbox backend: `compose/train.py` over the composition root, `openforgerl.stack`) plus the run's
tasks, and how a task selection picks them.
"""

from __future__ import annotations

import fnmatch
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openforgerl.engines.weight_push import WeightPusher
from openforgerl.store import SQLiteCallStore
from openforgerl.tasks.suites import BUILTIN_PREFIX, resolve_task_root
from openforgerl.train.settings import TaskSelection

__all__ = [
    "BUILTIN_PREFIX",
    "TrainServices",
    "redraw_pool",
    "resolve_task_dir",
    "select_tasks",
]


@dataclass
class TrainServices:
    engine_url: str
    pusher: WeightPusher
    store: SQLiteCallStore
    gateway: Any  # openforgerl.gateway.server.RunningGateway
    backend: Any  # a SandboxBackend
    train_tasks: list[Any]
    eval_tasks: list[Any]
    policy_path: Path


def resolve_task_dir(spec: str) -> Path:
    """A selection's `dir`: a folder, or `builtin:<suite>` (tasks/suites.py)."""
    return resolve_task_root(spec, must_exist=False)


def select_tasks(sel: TaskSelection | list[TaskSelection], seed: int) -> list[Any]:
    """Task runtimes matching split / difficulty / tags / pass-rate band, in a seeded order (several
    selections are pooled, each cut to its own `limit` first)."""
    if isinstance(sel, list):
        pooled = [rt for one in sel for rt in select_tasks(one, seed)]
        random.Random(seed).shuffle(pooled)
        return pooled
    from openforgerl.tasks.format import find_tasks, load_task
    from openforgerl.tasks.loader import load_runtime

    chosen = []
    for path in find_tasks(resolve_task_dir(sel.dir)):
        task = load_task(path)
        if sel.split and task.meta.split != sel.split:
            continue
        if sel.names and not any(fnmatch.fnmatch(path.name, pat) for pat in sel.names):
            continue
        if sel.difficulty and task.meta.difficulty not in sel.difficulty:
            continue
        if sel.tags and not set(sel.tags) & set(task.meta.tags):
            continue
        if sel.pass_rate is not None and not _in_band(path, sel.pass_rate):
            continue
        chosen.append(load_runtime(path))
    random.Random(seed).shuffle(chosen)
    return chosen[: sel.limit] if sel.limit else chosen


def redraw_pool(sel: TaskSelection | list[TaskSelection], seed: int, previous: list[Any]) -> list[Any]:
    """The training pool drawn again from the re-calibrated bands; `previous` itself when every
    selection comes back empty, so a band that everything left keeps the run going on what it had."""
    return select_tasks(sel, seed) or previous


def _in_band(path: Path, band: tuple[float, float]) -> bool:
    from openforgerl.synth.calibrate import pass_rate

    rate = pass_rate(path)
    return rate is not None and band[0] < rate < band[1]
