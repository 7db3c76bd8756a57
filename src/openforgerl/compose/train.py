"""The built-in trainer wired from a `Config`: its plan (`TrainPlan`: settings, harness per step,
orchestrator and reconstruction contracts) and its services (the composition root's engine, call log,
gateway and sandbox backend, plus the run's tasks and the policy it loads).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console

from openforgerl.config import Config
from openforgerl.stack import open_services
from openforgerl.train.services import TrainServices, select_tasks
from openforgerl.train.trainer import Trainer, TrainPlan, TrainSummary

__all__ = ["harness_for", "open_train_services", "train", "train_plan", "trainer_for"]


def harness_for(cfg: Config, step: int) -> Any:
    """One adapter per step; a weighted mix picks per step deterministically (seeded)."""
    from openforgerl.harness.harness_mix import HarnessMix
    from openforgerl.harness.registry import get_harness

    name = (
        cfg.harness
        if isinstance(cfg.harness, str)
        else HarnessMix.parse(cfg.harness, cfg.seed).assign(f"step-{step}")
    )
    options = dict(cfg.harness_options.get(name, {}))
    if name in (
        "zero",
        "zero-gui",
    ):  # the trainer owns sampling: the harness asks for what the engine settings say
        options.setdefault("max_tokens", cfg.engine.max_tokens)
        options.setdefault("temperature", cfg.engine.temperature)
        options.setdefault("wall_clock_s", cfg.rollout.budget_s or 600.0)
    return get_harness(name, **options)


def train_plan(cfg: Config) -> TrainPlan:
    """What the trainer reads of `cfg`."""
    return TrainPlan(
        train=cfg.train,
        eval=cfg.eval,
        tasks=cfg.tasks,
        seed=cfg.seed,
        harness=partial(harness_for, cfg),
        orchestrator=cfg.orchestrator,
        reconstruction=cfg.reconstruction_options(),
    )


def trainer_for(cfg: Config, out_dir: Path, console: Console | None = None) -> Trainer:
    return Trainer(train_plan(cfg), out_dir, console)


async def train(
    cfg: Config, out_dir: Path, console: Console | None = None, *, resume: bool = False
) -> TrainSummary:
    """A whole training run of `cfg` into `out_dir` (what `openforgerl train` runs)."""
    return await trainer_for(cfg, out_dir, console).run(open_train_services(cfg, out_dir), resume=resume)


@asynccontextmanager
async def open_train_services(config: Config, out_dir: Path) -> AsyncIterator[TrainServices]:
    """The services of `openforgerl.stack.open_services` (the composition root) for this config, plus
    its training and evaluation tasks and the policy the trainer loads."""
    from openforgerl.engines.local.model import resolve_model_path

    policy_path = resolve_model_path(config.model)
    train = select_tasks(config.tasks, config.seed)
    evals = select_tasks(config.eval.tasks, config.seed) if config.eval.tasks else []
    if not train:
        sels = config.tasks if isinstance(config.tasks, list) else [config.tasks]
        raise ValueError(f"no training tasks match {[sel.model_dump() for sel in sels]}")
    async with open_services(out_dir, config, push_weights=True) as services:
        assert services.pusher is not None  # push_weights: an EngineSettings engine then always has one
        yield TrainServices(
            services.engine_url,
            services.pusher,
            services.store,
            services.gateway,
            services.backend,
            train,
            evals,
            policy_path,
        )
