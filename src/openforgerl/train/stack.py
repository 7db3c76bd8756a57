"""The services a training run stands on: engine, call log, gateway, sandbox backend, tasks, harness.

Opened together by `open_stack` and closed in reverse order in `finally`, so a crash in a training
step never leaves an engine thread, a gateway port or a sandbox behind.
"""

from __future__ import annotations

import fnmatch
import random
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from openforgerl.sandbox.registry import make_backend
from openforgerl.store import SQLiteCallStore
from openforgerl.train.config import TaskSelection, TrainConfig
from openforgerl.train.weight_sync import DiskReloadPusher, WeightPusher

BUILTIN_PREFIX = "builtin:"


class InProcessPusher:
    """Weights into the embedded engine that runs in a background thread of this process."""

    def __init__(self, server: Any) -> None:
        self.server = server  # openforgerl.engines.local.background.BackgroundServer

    async def push(self, model: torch.nn.Module, version: int) -> None:
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self.server.engine.load_state_dict_sync(state, version)


@dataclass
class Stack:
    config: TrainConfig
    engine_url: str
    pusher: WeightPusher
    store: SQLiteCallStore
    gateway: Any  # openforgerl.gateway.server.RunningGateway
    backend: Any  # a SandboxBackend
    train_tasks: list[Any]
    eval_tasks: list[Any]
    policy_path: Path


def resolve_task_dir(spec: str) -> Path:
    if spec.startswith(BUILTIN_PREFIX):
        from openforgerl.envs.suites import CLAW_SUITE
        from openforgerl.envs.suites.gui_families import GUI_SUITE

        name = spec.removeprefix(BUILTIN_PREFIX)
        suites = {"claw": CLAW_SUITE, "gui": GUI_SUITE}
        if name not in suites:
            raise ValueError(f"unknown builtin task suite {name!r} (known: claw, gui)")
        return suites[name]
    return Path(spec)


def select_tasks(sel: TaskSelection | list[TaskSelection], seed: int) -> list[Any]:
    """Task runtimes matching split / difficulty / tags / pass-rate band, in a seeded order (several
    selections are pooled, each cut to its own `limit` first)."""
    if isinstance(sel, list):
        pooled = [rt for one in sel for rt in select_tasks(one, seed)]
        random.Random(seed).shuffle(pooled)
        return pooled
    from openforgerl.envs.runtime import load_runtime
    from openforgerl.envs.task import find_tasks, load_task

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


def _in_band(path: Path, band: tuple[float, float]) -> bool:
    from openforgerl.synth.calibrate import pass_rate

    rate = pass_rate(path)
    return rate is not None and band[0] < rate < band[1]


@asynccontextmanager
async def open_stack(config: TrainConfig, out_dir: Path) -> AsyncIterator[Stack]:
    from openforgerl.engines.local.model import resolve_model_path
    from openforgerl.engines.openai_compat import OpenAICompatEngine
    from openforgerl.gateway.server import start_gateway

    policy_path = resolve_model_path(config.model)
    async with AsyncExitStack() as stack:
        weights = Path(config.engine.weights_dir or out_dir / "weights")
        urls: Sequence[str]
        pusher: WeightPusher
        if config.engine.kind == "local" and config.engine.separate_process:
            from openforgerl.engines.local.process import LocalEngineProcess

            proc = await LocalEngineProcess.start(policy_path, out_dir / "engine.log")
            stack.callback(proc.close)
            urls = [proc.url]
            pusher = DiskReloadPusher(urls, weights, dialect="vllm")
        elif config.engine.kind == "local":
            from openforgerl.engines.local.background import BackgroundServer

            server = BackgroundServer.start(str(policy_path))
            stack.callback(server.close)
            urls = [server.url]
            pusher = InProcessPusher(server)
        else:
            urls = config.engine.urls
            pusher = DiskReloadPusher(urls, weights, dialect=config.engine.dialect)
        store = SQLiteCallStore(out_dir / "calls.db")
        stack.push_async_callback(store.aclose)
        engine = OpenAICompatEngine(list(urls), dialect=config.engine.dialect)
        gateway = await start_gateway(engine, store, owns_engine=True,
                                      call_deadline_s=config.gateway_call_deadline_s)
        stack.push_async_callback(gateway.aclose)
        backend = await make_backend(config.backend, out_dir / "sandboxes")
        stack.push_async_callback(backend.aclose)
        train = select_tasks(config.tasks, config.seed)
        evals = select_tasks(config.eval_tasks, config.seed) if config.eval_tasks else []
        if not train:
            sels = config.tasks if isinstance(config.tasks, list) else [config.tasks]
            raise ValueError(f"no training tasks match {[sel.model_dump() for sel in sels]}")
        yield Stack(config, urls[0], pusher, store, gateway, backend, train, evals, policy_path)
