"""The per-worker services our veRL agent loop (``verl_loop.py``) stands on: one gateway, call log and
sandbox backend, opened from the loop's config through the composition root (``openforgerl.stack``).

veRL builds one agent-loop object per row, inside ``AgentLoopWorker`` actors (``rollout.agent.num_workers``
of them), each with its own asyncio loop. Per worker process we open, lazily on the first row, one
``SQLiteCallStore``, one gateway (``start_gateway`` over ``OpenAICompatEngine`` pointed at veRL's
inference servers, bound to 127.0.0.1) and one sandbox backend, and share them across all rows the
worker runs; they are closed by ``shutdown`` or, best effort, at interpreter exit. A worker-wide
semaphore caps rollouts in flight (veRL starts every row of a chunk at once).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from openforgerl.config import Config, ConfigError
from openforgerl.records import CallRecord, RolloutRecord
from openforgerl.train.verl.rows import RowSpec, resolve_task_dir, task_index

UrlSource = Callable[[], Awaitable[Sequence[str]]]


def loop_config(kwargs: Mapping[str, Any]) -> Config:
    """The agent loop's config: the keys of its ``agent_loop_config_path`` entry that are sections of the
    one schema (``openforgerl.config.Config``: ``harness``, ``sandbox``, ``rollout``, ``reconstruction``,
    ``verl``, ...), each strict. Hydra also hands the loop veRL's own ``name``/``_target_``, its trainer
    config, server manager, tokenizer and more, which are not ours and are left out."""
    from openforgerl.config import load_config

    ours = {k: _plain(v) for k, v in kwargs.items() if k in Config.model_fields}
    config = load_config(ours, source="openforgerl agent loop config")
    if not isinstance(config.harness, str):
        raise ConfigError("openforgerl agent loop config: harness is the rows' default harness, one name")
    return config


def task_roots(config: Config) -> list[Path]:
    """Folders searched for a row's task (``verl.task_roots``; default: the default suite, `builtin:claw`)."""
    if config.verl.task_roots:
        return [Path(r) for r in config.verl.task_roots]
    from openforgerl.tasks.suites import DEFAULT_TASKS, resolve_task_root

    return [resolve_task_root(DEFAULT_TASKS)]


def _plain(value: Any) -> Any:
    """OmegaConf containers -> plain Python (hydra passes DictConfig/ListConfig)."""
    try:
        from omegaconf import OmegaConf
    except ImportError:  # pragma: no cover - omegaconf ships with veRL
        return value
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def pick_record(records: Sequence[RolloutRecord]) -> RolloutRecord:
    """The attempt that represents the row: the one kept in the batch, else the last attempt."""
    kept = [r for r in records if r.in_batch]
    return kept[-1] if kept else records[-1]


class WorkerRuntime:
    """Gateway + call log + backend of one worker process, bound to the event loop that opened them."""

    def __init__(self, config: Config, urls: Sequence[str], dialect: str) -> None:
        self.urls = list(urls)
        engine = config.engine.model_copy(update={"kind": "remote", "urls": self.urls, "dialect": dialect})
        self.config = config.model_copy(update={"engine": engine})
        base = Path(config.verl.work_dir or Path(tempfile.gettempdir()) / "openforgerl-verl")
        self.dir = base / f"worker-{os.getpid()}"
        self.loop = asyncio.get_running_loop()
        self.slots = asyncio.Semaphore(config.rollout.max_running)
        self.index: dict[str, Path] | None = None
        self.tasks: dict[Path, Any] = {}
        self.store: Any = None
        self.gateway: Any = None
        self.backend: Any = None
        self._opened = AsyncExitStack()  # what `open_services` (the composition root) opened

    async def open(self) -> WorkerRuntime:
        """Call log, gateway (before the rollout servers veRL runs) and backend from the composition root."""
        from openforgerl.stack import open_services

        self.dir.mkdir(parents=True, exist_ok=True)
        opened = await self._opened.enter_async_context(open_services(self.dir, self.config))
        self.store, self.gateway, self.backend = opened.store, opened.gateway, opened.backend
        return self

    async def aclose(self) -> None:
        self.backend = self.gateway = self.store = None
        await self._opened.aclose()  # backend, gateway, call log: the reverse of their opening

    def task(self, spec: RowSpec) -> Any:
        """The task runtime a row names (folders loaded once per worker)."""
        from openforgerl.tasks.loader import load_runtime

        roots = task_roots(self.config)
        if spec.task_dir is None and self.index is None:
            self.index = task_index(roots)
        path = resolve_task_dir(spec, roots, self.index)
        if path not in self.tasks:
            self.tasks[path] = load_runtime(path)
        return self.tasks[path]

    async def run(self, spec: RowSpec) -> tuple[RolloutRecord, list[CallRecord]]:
        """One rollout of the row's task (plus infra retries); the attempt that counts and its calls.
        One rollout per row: veRL makes the group (rollout.n rows/sessions share a uid)."""
        from openforgerl.harness.registry import get_harness
        from openforgerl.orchestrator.batch import run_batch

        task = self.task(spec)
        harness = get_harness(spec.harness, **self.config.harness_options.get(spec.harness, {}))
        config = self.config.orchestrator(group_size=1, min_group_size=1)
        async with self.slots:
            batch = await run_batch(
                [task], harness, gateway=self.gateway.access, backend=self.backend, config=config
            )
        record = pick_record(batch.records)
        return record, list(await self.store.list_calls(record.rollout_id))


_RUNTIME: WorkerRuntime | None = None
_OPENING: dict[int, asyncio.Lock] = {}


async def get_runtime(config: Config, urls: UrlSource, dialect: str) -> WorkerRuntime:
    """This process's runtime, opened on first use (and reopened if the event loop changed)."""
    global _RUNTIME
    loop = asyncio.get_running_loop()
    lock = _OPENING.setdefault(id(loop), asyncio.Lock())
    async with lock:
        if _RUNTIME is not None and _RUNTIME.loop is not loop:
            _RUNTIME = None  # the old loop is gone with everything bound to it
        if _RUNTIME is None:
            found = list(config.verl.engine_urls) or list(await urls())
            if not found:
                raise RuntimeError("no inference server address found for the openforgerl agent loop")
            _RUNTIME = await WorkerRuntime(config, [normalize_url(u) for u in found], dialect).open()
    return _RUNTIME


async def shutdown() -> None:
    """Close this process's runtime (idempotent)."""
    global _RUNTIME
    runtime, _RUNTIME = _RUNTIME, None
    if runtime is not None:
        await runtime.aclose()


def _close_at_exit() -> None:
    runtime = _RUNTIME
    if runtime is None or runtime.loop.is_closed() or runtime.loop.is_running():
        return
    runtime.loop.run_until_complete(shutdown())


atexit.register(_close_at_exit)


def normalize_url(address: str) -> str:
    """veRL reports servers as ``host:port`` (``[v6]:port``); the engine wants ``http://host:port``."""
    address = address.strip().rstrip("/")
    return address if "://" in address else f"http://{address}"
