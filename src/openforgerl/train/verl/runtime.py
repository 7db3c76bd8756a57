"""The per-worker services our veRL agent loop stands on: one gateway, call log and sandbox backend.

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
import dataclasses
import os
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openforgerl.orchestrator.config import OrchestratorConfig, call_deadline_s, check_call_deadline
from openforgerl.records import CallRecord, RolloutRecord
from openforgerl.train.verl.rows import RowSpec, resolve_task_dir, task_index

UrlSource = Callable[[], Awaitable[Sequence[str]]]


@dataclass(frozen=True)
class LoopSettings:
    """Options of the ``openforgerl`` agent loop (extra keys of its entry in ``agent_loop_config_path``)."""

    mode: str = "auto"
    """``v1`` (list of outputs), ``classic`` (one output), ``auto``: ``v1`` when ``trainer.use_v1``."""
    task_roots: tuple[str, ...] = ()
    """Folders searched for a row's ``task_id`` / relative ``task_dir`` (default: the built-in Claw suite)."""
    default_harness: str = "zero"
    harness_options: dict[str, Any] = field(default_factory=dict)
    """Constructor options per harness name, e.g. ``{"zero": {"max_turns": 8}}``."""
    engine_urls: tuple[str, ...] = ()
    """Override the discovered veRL server addresses (e.g. a vLLM router in front of them)."""
    dialect: str | None = None
    """``vllm`` / ``sglang``; default from ``actor_rollout_ref.rollout.name``."""
    work_dir: str = ""
    """Call logs and sandboxes of this worker (default: ``$TMPDIR/openforgerl-verl``)."""
    backend: str = "local"
    max_running: int = 64
    max_retries: int = 1
    """Fresh attempts of an infra-failed rollout before the row is returned as dropped."""
    timeout_policy: str = "drop"
    budget_s: float | None = None
    call_deadline_s: float | None = None
    """The gateway's per-call engine limit; None derives it from `budget_s` (budget - margin). Each
    rollout's calls are further bounded by its own deadline, which the gateway gets when it opens."""
    harness_cache: str = ""
    """Where harness CLIs are installed (default: the orchestrator's; not under /tmp for local sandboxes)."""
    overflow: str = "truncate"
    """Chains longer than veRL's prompt/response lengths: ``truncate`` / ``drop`` / ``split``."""

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, Any]) -> LoopSettings:
        """Known keys only (hydra also hands the loop veRL's own ``name``/``_target_`` and more)."""
        known = {k: _plain(v) for k, v in kwargs.items() if k in cls.__dataclass_fields__}
        for key in ("task_roots", "engine_urls"):
            if key in known:
                known[key] = tuple(str(x) for x in known[key])
        return cls(**known)

    def __post_init__(self) -> None:
        check_call_deadline(self.call_deadline_s, self.budget_s)

    @property
    def gateway_call_deadline_s(self) -> float:
        return call_deadline_s(self.budget_s, self.call_deadline_s)

    def roots(self) -> list[Path]:
        if self.task_roots:
            return [Path(r) for r in self.task_roots]
        from openforgerl.envs.claw.suite import CLAW_SUITE

        return [CLAW_SUITE]

    def orchestrator(self) -> OrchestratorConfig:
        """One rollout per row (veRL makes the group: rollout.n rows/sessions share a uid)."""
        config = OrchestratorConfig(n=1, min_group_size=1, max_retries=self.max_retries,
                                    timeout_policy=self.timeout_policy,  # type: ignore[arg-type]
                                    max_running=self.max_running, budget_s=self.budget_s)
        return dataclasses.replace(config, harness_cache=Path(self.harness_cache)) if self.harness_cache else config


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

    def __init__(self, settings: LoopSettings, urls: Sequence[str], dialect: str) -> None:
        self.settings = settings
        self.urls = list(urls)
        self.dialect = dialect
        base = Path(settings.work_dir or Path(tempfile.gettempdir()) / "openforgerl-verl")
        self.dir = base / f"worker-{os.getpid()}"
        self.loop = asyncio.get_running_loop()
        self.slots = asyncio.Semaphore(settings.max_running)
        self.index: dict[str, Path] | None = None
        self.tasks: dict[Path, Any] = {}
        self.store: Any = None
        self.gateway: Any = None
        self.backend: Any = None
        self._opened = AsyncExitStack()  # what `open_services` (the composition root) opened

    async def open(self) -> WorkerRuntime:
        """Call log, gateway (before the rollout servers veRL runs) and backend from the composition root."""
        from openforgerl.stack import open_services
        from openforgerl.train.config import EngineSettings

        self.dir.mkdir(parents=True, exist_ok=True)
        engine = EngineSettings(kind="remote", urls=self.urls, dialect=self.dialect)  # type: ignore[arg-type]
        opened = await self._opened.enter_async_context(
            open_services(self.dir, engine, backend=self.settings.backend,
                          call_deadline_s=self.settings.gateway_call_deadline_s))
        self.store, self.gateway, self.backend = opened.store, opened.gateway, opened.backend
        return self

    async def aclose(self) -> None:
        self.backend = self.gateway = self.store = None
        await self._opened.aclose()  # backend, gateway, call log: the reverse of their opening

    def task(self, spec: RowSpec) -> Any:
        """The task runtime a row names (folders loaded once per worker)."""
        from openforgerl.tasks.loader import load_runtime

        roots = self.settings.roots()
        if spec.task_dir is None and self.index is None:
            self.index = task_index(roots)
        path = resolve_task_dir(spec, roots, self.index)
        if path not in self.tasks:
            self.tasks[path] = load_runtime(path)
        return self.tasks[path]

    async def run(self, spec: RowSpec) -> tuple[RolloutRecord, list[CallRecord]]:
        """One rollout of the row's task (plus infra retries); the attempt that counts and its calls."""
        from openforgerl.harness.registry import get_harness
        from openforgerl.orchestrator.batch import run_batch

        task = self.task(spec)
        harness = get_harness(spec.harness, **self.settings.harness_options.get(spec.harness, {}))
        config = self.settings.orchestrator()
        async with self.slots:
            batch = await run_batch([task], harness, gateway=self.gateway.access, backend=self.backend,
                                    config=config)
        record = pick_record(batch.records)
        return record, list(await self.store.list_calls(record.rollout_id))


_RUNTIME: WorkerRuntime | None = None
_OPENING: dict[int, asyncio.Lock] = {}


async def get_runtime(settings: LoopSettings, urls: UrlSource, dialect: str) -> WorkerRuntime:
    """This process's runtime, opened on first use (and reopened if the event loop changed)."""
    global _RUNTIME
    loop = asyncio.get_running_loop()
    lock = _OPENING.setdefault(id(loop), asyncio.Lock())
    async with lock:
        if _RUNTIME is not None and _RUNTIME.loop is not loop:
            _RUNTIME = None  # the old loop is gone with everything bound to it
        if _RUNTIME is None:
            found = list(settings.engine_urls) or list(await urls())
            if not found:
                raise RuntimeError("no inference server address found for the openforgerl agent loop")
            _RUNTIME = await WorkerRuntime(settings, [normalize_url(u) for u in found], dialect).open()
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
