"""The composition root: the one place that wires engine -> call log -> gateway -> sandbox backend.

Every command and the veRL worker open their services through `open_services`, and nothing else
starts a policy engine, a call log or a gateway for them: `train` (train/stack.py adds its tasks and
weight pusher on top), `eval` and `rollout` (the embedded default, a scripted oracle, engine URLs, or a
running gateway), `tasks calibrate` (through train's stack), and the veRL agent loop's worker runtime
(train/verl/runtime.py). What is opened is closed in reverse order in `finally`, so a crash anywhere
never leaves an engine process, a gateway port or a sandbox behind.

The policy engine, by what `engine` is:
- a model name or folder (`tiny`, `smollm2`, a HF directory) or `EngineSettings(kind="local")`: the
  embedded local engine serving it (its own process by default: its own GIL and core, weights pushed
  through its vLLM-style reload route; or a thread of this process with an in-process pusher);
- `EngineSettings(kind="remote", urls=..., dialect=...)`: vLLM / SGLang servers (disk-reload pusher);
- an `Engine` object (the scripted engine of oracles and tests): used as is, no pusher;
- `gateway_url=` (an admin URL; token from $OPENFORGERL_ADMIN_TOKEN): a gateway someone else runs;
  only the sandbox backend is opened here.
`call_deadline_s` is the gateway's per-call limit, derived by the caller's config from its rollout budget
(`TrainConfig.gateway_call_deadline_s`, `LoopSettings.gateway_call_deadline_s`, or
`orchestrator.config.call_deadline_s(budget)` for `eval`): one derivation per config, never restated here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openforgerl.orchestrator.config import DEFAULT_CALL_DEADLINE_S
from openforgerl.train.config import EngineSettings

if TYPE_CHECKING:
    import torch

    from openforgerl.engines.base import Engine
    from openforgerl.train.weight_sync import WeightPusher

__all__ = ["DEFAULT_MODEL", "InProcessPusher", "Services", "engine_from_flag", "open_services"]

DEFAULT_MODEL = "tiny"


class InProcessPusher:
    """Weights into the embedded engine that runs in a background thread of this process."""

    def __init__(self, server: Any) -> None:
        self.server = server  # openforgerl.engines.local.background.BackgroundServer

    async def push(self, model: torch.nn.Module, version: int) -> None:
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self.server.engine.load_state_dict_sync(state, version)


def engine_from_flag(values: Sequence[str], runtimes: Sequence[Any] = (), *, success_rate: float = 1.0,
                     seed: int = 0) -> str | EngineSettings | Engine:
    """`--engine` as `rollout` and `eval` take it: `scripted` (the envs oracle policy over `runtimes`, a test
    double for the model's decisions), engine URL(s) (vLLM dialect), or one model for the local engine."""
    values = list(values) or [DEFAULT_MODEL]
    if values == ["scripted"]:
        from openforgerl.engines.scripted import ScriptedEngine
        from openforgerl.envs.claw.oracle_policy import oracle_policy

        return ScriptedEngine(oracle_policy(list(runtimes), success_rate=success_rate, seed=seed))
    if any("://" in v for v in values):
        return EngineSettings(kind="remote", urls=values)
    if len(values) > 1:
        from openforgerl.errors import UserError

        raise UserError(f"--engine: one model, `scripted`, or engine URLs, not {values}")
    return values[0]


@dataclass
class Services:
    """What a run stands on. `store`/`gateway` are None behind an external gateway; `pusher` is None
    for an `Engine` object given as is; `engine_url` is "" when no engine server was started or named."""

    access: Any  # openforgerl.gateway.access.GatewayAccess: admin access, what the orchestrator uses
    backend: Any  # a SandboxBackend
    store: Any = None  # openforgerl.store.SQLiteCallStore
    gateway: Any = None  # openforgerl.gateway.server.RunningGateway
    engine_url: str = ""
    pusher: WeightPusher | None = None


@asynccontextmanager
async def open_services(out_dir: Path, engine: str | EngineSettings | Engine | None = None, *,
                        model: str = "tiny", gateway_url: str | None = None, backend: str = "local",
                        call_deadline_s: float = DEFAULT_CALL_DEADLINE_S, push_weights: bool = False,
                        **gateway_options: Any) -> AsyncIterator[Services]:
    """Engine, call log (`<out_dir>/calls.db`), gateway and sandbox backend (`<out_dir>/sandboxes`).
    `engine` as a string is a model for the local engine (`model` is the local engine's model when
    `engine` is `EngineSettings(kind="local")` or None). Raises `UnknownBackend` for a backend name
    that is not registered, before anything is started. `push_weights` (training): also the pusher that
    syncs new weights into the engine (it needs torch; `eval` and `rollout` against URLs do not)."""
    from openforgerl.sandbox.registry import BACKENDS, UnknownBackend, make_backend

    if backend not in BACKENDS:
        raise UnknownBackend(f"unknown backend {backend!r} ({' | '.join(BACKENDS)})")
    out_dir = Path(out_dir)
    async with AsyncExitStack() as stack:
        if gateway_url is not None:
            from openforgerl.gateway.access import GatewayAccess

            access, store, gateway, url, pusher = GatewayAccess.from_env(gateway_url), None, None, "", None
        else:
            if isinstance(engine, str):
                chosen: EngineSettings | Engine = EngineSettings(kind="local")
                model = engine
            else:
                chosen = engine or EngineSettings(kind="local")
            policy, url, pusher = await _open_engine(chosen, model, out_dir, stack, push_weights)
            from openforgerl.gateway.server import start_gateway
            from openforgerl.store import SQLiteCallStore

            store = SQLiteCallStore(out_dir / "calls.db")
            stack.push_async_callback(store.aclose)
            gateway = await start_gateway(policy, store, owns_engine=True,
                                          call_deadline_s=call_deadline_s, **gateway_options)
            stack.push_async_callback(gateway.aclose)
            access = gateway.access
        # Opened last, closed first: every sandbox (and a harness still in one) is gone before the
        # gateway it talks to stops.
        sandboxes = await make_backend(backend, out_dir / "sandboxes")
        stack.push_async_callback(sandboxes.aclose)
        yield Services(access, sandboxes, store, gateway, url, pusher)


async def _open_engine(engine: EngineSettings | Engine, model: str, out_dir: Path, stack: AsyncExitStack,
                       push_weights: bool) -> tuple[Engine, str, WeightPusher | None]:
    """(the engine the gateway forwards to, its server URL, the weight pusher if asked) for `engine`."""
    if not isinstance(engine, EngineSettings):
        return engine, "", None
    from openforgerl.engines.openai_compat import OpenAICompatEngine

    weights = Path(engine.weights_dir or out_dir / "weights")
    pusher: WeightPusher | None = None
    if engine.kind == "local":
        from openforgerl.engines.local.model import resolve_model_path

        try:
            path = resolve_model_path(model)
        except FileNotFoundError as exc:
            from openforgerl.errors import UserError

            raise UserError(f"model {model}: {exc}") from None
        if engine.separate_process:
            from openforgerl.engines.local.process import LocalEngineProcess

            proc = await LocalEngineProcess.start(path, out_dir / "engine.log")
            stack.callback(proc.close)
            urls = [proc.url]
        else:
            from openforgerl.engines.local.background import BackgroundServer

            server = BackgroundServer.start(str(path))
            stack.callback(server.close)
            urls, pusher = [server.url], InProcessPusher(server) if push_weights else None
    else:
        if not engine.urls:
            raise ValueError("engine.kind remote needs engine.urls")
        urls = list(engine.urls)
    if push_weights and pusher is None:  # an engine in its own process reloads pushed weights from disk
        from openforgerl.train.weight_sync import DiskReloadPusher

        pusher = DiskReloadPusher(urls, weights, dialect="vllm" if engine.kind == "local" else engine.dialect)
    return OpenAICompatEngine(urls, dialect=engine.dialect), urls[0], pusher
