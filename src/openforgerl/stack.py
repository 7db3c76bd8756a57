"""The composition root: the one place that wires engine -> call log -> gateway -> sandbox backend.

Every command and the veRL worker build one `openforgerl.config.Config` (from YAML or flags) and open
their services through `open_services(out_dir, config)`; nothing else starts a policy engine, a call
log or a gateway for them: `train` (compose/train.py adds its tasks and weight pusher on top), `eval`
and `rollout` (the embedded default, a scripted oracle, engine URLs, or a running gateway), `tasks
calibrate` (through train's services), and the veRL agent loop's worker runtime (compose/verl_worker.py).
The stages never import this module nor the config: the CLI and `openforgerl.compose` wire them. What is
opened is closed in reverse order in `finally`, so a crash anywhere never leaves an engine process, a
gateway port or a sandbox behind.

The policy engine, by what the config and the caller say:
- `engine.kind: local` (the default): the embedded local engine serving `config.model` (`tiny`,
  `smollm2`, a HF directory; its own process by default: its own GIL and core, weights pushed through
  its vLLM-style reload route; or a thread of this process with an in-process pusher);
- `engine.kind: remote` with `engine.urls`: vLLM / SGLang servers (disk-reload pusher);
- `engine=` an `Engine` object (the scripted engine of oracles and tests): used as is, no pusher;
- `gateway_url=` (an admin URL; token from $OPENFORGERL_ADMIN_TOKEN): a gateway someone else runs;
  only the sandbox backend is opened here.
The gateway's settings come from `config.gateway` and its per-call deadline from `config.call_deadline_s`
(derived there from the rollout budget, never restated here).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openforgerl.config import Config, EngineSettings

if TYPE_CHECKING:
    import torch

    from openforgerl.engines.base import Engine
    from openforgerl.engines.weight_push import WeightPusher

__all__ = [
    "DEFAULT_MODEL",
    "InProcessPusher",
    "Services",
    "engine_from_flag",
    "open_gateway",
    "open_services",
    "scripted_engine",
]

DEFAULT_MODEL = "tiny"


class InProcessPusher:
    """Weights into the embedded engine that runs in a background thread of this process."""

    def __init__(self, server: Any) -> None:
        self.server = server  # openforgerl.engines.local.background.BackgroundServer

    async def push(self, model: torch.nn.Module, version: int) -> None:
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self.server.engine.load_state_dict_sync(state, version)


def engine_from_flag(values: Sequence[str]) -> dict[str, object]:
    """`--engine` as `rollout` and `eval` take it, as config overrides: engine URL(s) (vLLM dialect) or
    one model for the local engine. (`scripted`, a test double, is an `Engine` object: `scripted_engine`.)"""
    values = list(values) or [DEFAULT_MODEL]
    if any("://" in v for v in values):
        return {"engine.kind": "remote", "engine.urls": values}
    if len(values) > 1:
        from openforgerl.errors import UserError

        raise UserError(f"--engine: one model, `scripted`, or engine URLs, not {values}")
    return {"model": values[0], "engine.kind": "local"}


def scripted_engine(runtimes: Sequence[Any], *, success_rate: float = 1.0, seed: int = 0) -> Engine:
    """`--engine scripted` / `--scripted-oracle`: the envs oracle policy over `runtimes`, a test double for
    the model's decisions."""
    from openforgerl.engines.scripted import ScriptedEngine
    from openforgerl.env.plugins import DEFAULT_ORACLE, ORACLES

    oracle_policy = ORACLES.get(DEFAULT_ORACLE)
    return ScriptedEngine(oracle_policy(list(runtimes), success_rate=success_rate, seed=seed))


@dataclass
class Services:
    """What a run stands on. `store`/`gateway` are None behind an external gateway; `backend` is None
    from `open_gateway`; `pusher` is None for an `Engine` object given as is (or without `push_weights`);
    `engine_url` is "" when no engine server was started or named."""

    access: Any  # openforgerl.gateway.access.GatewayAccess: admin access, what the orchestrator uses
    backend: Any  # a SandboxBackend
    store: Any = None  # openforgerl.store.SQLiteCallStore or PostgresCallStore (`open_store`)
    gateway: Any = None  # openforgerl.gateway.server.RunningGateway
    engine_url: str = ""
    pusher: WeightPusher | None = None


@asynccontextmanager
async def open_services(
    out_dir: Path,
    config: Config,
    *,
    engine: Engine | None = None,
    gateway_url: str | None = None,
    push_weights: bool = False,
) -> AsyncIterator[Services]:
    """Engine, call log, gateway (`open_gateway`) and sandbox backend (`<out_dir>/sandboxes`) for `config`.
    `engine`: an `Engine` object to serve instead of the configured one. `push_weights` (training): also
    the pusher that syncs new weights into the engine (it needs torch; `eval` and `rollout` against URLs
    do not). With `gateway_url` (someone else's gateway) only the sandbox backend is opened."""
    from openforgerl.sandbox.registry import make_backend

    out_dir = Path(out_dir)
    async with AsyncExitStack() as stack:
        if gateway_url is not None:
            from openforgerl.gateway.access import GatewayAccess

            services = Services(GatewayAccess.from_env(gateway_url), None)
        else:
            services = await stack.enter_async_context(
                open_gateway(out_dir, config, engine=engine, push_weights=push_weights)
            )
        # Opened last, closed first: every sandbox (and a harness still in one) is gone before the
        # gateway it talks to stops.
        services.backend = await make_backend(config.sandbox.backend, out_dir / "sandboxes", config.sandbox)
        stack.push_async_callback(services.backend.aclose)
        yield services


@asynccontextmanager
async def open_gateway(
    out_dir: Path,
    config: Config,
    *,
    engine: Engine | None = None,
    push_weights: bool = False,
    admin_token: str | None = None,
    secret: str | None = None,
) -> AsyncIterator[Services]:
    """The policy engine, the call log (`config.store.path`, default `<out_dir>/calls.db`) and the gateway
    in front of them (`config.gateway`, its per-call deadline `config.call_deadline_s`); no sandbox
    backend (`Services.backend` None): what `openforgerl gateway` serves, and the first half of
    `open_services`. `admin_token` (generated when None) and `secret` (key derivation shared by
    replicas) are secrets, so never part of the config."""
    async with AsyncExitStack() as stack:
        policy, url, pusher = await _open_engine(
            engine or config.engine,
            config.model,
            Path(out_dir),
            stack,
            push_weights,
            clamp=config.max_tokens_cap,
        )
        from openforgerl.gateway.server import start_gateway
        from openforgerl.store import open_store

        # a postgresql:// URL: one call log shared by gateway replicas (store/postgres.py)
        store = open_store(config.store.path or Path(out_dir) / "calls.db")
        stack.push_async_callback(store.aclose)
        gateway = await start_gateway(
            policy,
            store,
            owns_engine=True,
            admin_token=admin_token,
            secret=secret,
            **config.gateway.server_options(config.call_deadline_s),
        )
        stack.push_async_callback(gateway.aclose)
        yield Services(gateway.access, None, store, gateway, url, pusher)


async def _open_engine(
    engine: EngineSettings | Engine,
    model: str,
    out_dir: Path,
    stack: AsyncExitStack,
    push_weights: bool,
    clamp: int | None = None,
) -> tuple[Engine, str, WeightPusher | None]:
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
        from openforgerl.engines.weight_push import DiskReloadPusher

        pusher = DiskReloadPusher(urls, weights, dialect="vllm" if engine.kind == "local" else engine.dialect)
    remote = OpenAICompatEngine(
        urls,
        dialect=engine.dialect,
        model=engine.served_model,
        max_tokens_cap=engine.max_tokens_cap,
        max_tokens_clamp=clamp,
    )
    return remote, urls[0], pusher
