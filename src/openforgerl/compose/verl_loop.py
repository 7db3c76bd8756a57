"""veRL agent loop ``openforgerl``: each veRL prompt row runs as one of our rollouts, in a real harness.

This is the module veRL loads (the ``verl.plugins`` entry point, or ``VERL_USE_EXTERNAL_MODULES``), so
it is wiring above the stages: it builds the one config from the loop's registry entry and opens the
worker's services through the composition root (``verl_worker.py``); the veRL-free row and output logic
it drives lives in the train stage (``train/verl/``).

How it plugs in (veRL 0.9.1, read from its source in ``.venv-verl``):

- veRL's ``AgentLoopWorker`` builds one loop object per row with ``hydra.utils.instantiate`` from the
  registry entry (``@register("openforgerl")`` below, or the YAML at
  ``actor_rollout_ref.rollout.agent.agent_loop_config_path``, whose extra keys are sections of the one
  config schema, ``openforgerl.config.Config``: ``verl_worker.loop_config``), passing ``server_manager``:
  a ``verl.workers.rollout.llm_server.LLMServerClient``.
  That client has **no address attribute**: it holds ``_load_balancer``, the Ray actor
  ``GlobalRequestLoadBalancer`` whose server ids *are* the replicas' HTTP addresses ``host:port``
  (``LLMServerManager`` builds it from ``dict(zip(server_addresses, server_handles))``;
  ``LLMServerManager.get_addresses()`` returns the same list, documented as "the OpenAI chat completion
  API http addresses"). So ``server_addresses`` asks, in order: ``verl.engine_urls``, a
  ``server_addresses`` attribute / ``get_addresses()`` (an ``LLMServerManager``), then
  ``await server_manager._load_balancer.get_all_servers.remote()``. Each vLLM/SGLang replica runs the
  engine's full OpenAI server there (vLLM's ``build_app``), which is what our gateway's
  ``OpenAICompatEngine`` talks to (``return_token_ids`` + logprobs; dialect from ``rollout.name``).
- ``run(sampling_params, **row)`` parses ``extra_info`` (``task_id`` / ``task_dir`` / ``harness``), runs
  the task through ``orchestrator.run_batch`` (group size 1, infra faults retried ``rollout.retries``
  times) against this worker's gateway, reconstructs samples from the call log and returns:
  * V1 (``trainer.use_v1=true``, veRL's default): ``list[AgentLoopOutput]``, every chain, the main
    agent's final chain last (V1 copies its reward to the others and uses only it for GRPO statistics);
    ``[]`` for a dropped rollout (V1 logs "Empty output" and stores nothing: a real drop).
  * classic: one ``AgentLoopOutput`` (the final chain); a dropped rollout is an all-zero-mask
    placeholder with ``extra_fields.dropped=True``, kept out of group statistics by the estimator
    ``openforgerl_grpo`` (``advantage.py``, registered with ``core_algos.register_adv_est``).
  ``reward_score`` is our verifier's reward, so veRL's reward loop is not asked for one.
- Per worker process: one gateway, call log and sandbox backend (``verl_worker.py``), opened lazily.

What was run here (2-core CPU machine, no GPU, no Ray cluster; veRL 0.9.1 ``--no-deps`` in
``.venv-verl`` from ``scripts/install_verl.sh``): ``tests/train/test_verl_agent_loop.py`` imports this
module in that venv (also through ``VERL_USE_EXTERNAL_MODULES``), instantiates the loop exactly as
``AgentLoopWorker._run_agent_loop`` does (``hydra.utils.instantiate`` of our YAML entry with
``DictConfigWrap``/``ToolListWrap``, a real tokenizer, veRL's real ``LLMServerClient`` whose load
balancer is veRL's real ``GlobalRequestLoadBalancer`` object called in-process instead of as a Ray
actor, holding the address of a scripted engine served over HTTP in vLLM's wire shape), runs Claw tasks
in real bubblewrap sandboxes with the ``zero`` harness, and checks the results are veRL's own
``AgentLoopOutput`` (V1 list, classic row, ``[]`` on an injected engine fault), that they pass veRL's
own classic padding/batching (``AgentLoopWorker._agent_loop_postprocess``/``_postprocess``) and that
the estimator is registered and matches veRL's ``grpo`` when nothing is dropped. Once by hand (not a
test: it starts a local Ray instance) the address discovery ran against a real Ray actor of
``GlobalRequestLoadBalancer`` inside veRL's ``LLMServerClient`` and returned its two addresses.
Not run here: ``python -m verl.trainer.main_ppo`` itself (needs Ray, GPUs and vLLM/SGLang), V1's
TransferQueue (``transfer_queue`` is not installed), real vLLM servers started by veRL, multi-node
placement. ``examples/verl/`` holds the launch script for a GPU cluster.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from openforgerl.compose.verl_worker import get_runtime, loop_config
from openforgerl.config import Config
from openforgerl.train.verl.outputs import rollout_rows, with_pil_images
from openforgerl.train.verl.rows import AGENT_NAME, RowSpec
from openforgerl.trajectory import ReconstructionOptions

__all__ = [
    "AGENT_NAME",
    "VERL_AVAILABLE",
    "loop_mode",
    "reconstruction_options",
    "run_row",
    "server_addresses",
]


async def server_addresses(server_manager: Any) -> list[str]:
    """veRL's inference server HTTP addresses as seen from an agent loop (see module docstring)."""
    direct = getattr(server_manager, "server_addresses", None)
    if direct:
        return [str(a) for a in direct]
    if callable(getattr(server_manager, "get_addresses", None)):
        return [str(a) for a in server_manager.get_addresses()]
    balancer = getattr(server_manager, "_load_balancer", None)
    if balancer is not None:
        return [str(a) for a in await balancer.get_all_servers.remote()]
    return []


def _get(config: Any, dotted: str, default: Any = None) -> Any:
    node = config
    for part in dotted.split("."):
        if node is None:
            return default
        node = (
            node.get(part) if isinstance(node, Mapping) or hasattr(node, "get") else getattr(node, part, None)
        )
    return default if node is None else node


def loop_mode(config: Config, trainer_config: Any) -> str:
    """``v1`` or ``classic``; ``auto`` follows ``trainer.use_v1`` (veRL 0.9.1 defaults it to true)."""
    if config.verl.mode in ("v1", "classic"):
        return config.verl.mode
    return "v1" if bool(_get(trainer_config, "trainer.use_v1", True)) else "classic"


def dialect_of(config: Config, trainer_config: Any) -> str:
    name = config.verl.dialect or str(_get(trainer_config, "actor_rollout_ref.rollout.name", "vllm"))
    return "sglang" if name == "sglang" else "vllm"


def reconstruction_options(
    config: Config, trainer_config: Any, image_token_id: int | None = None
) -> ReconstructionOptions:
    """The config's ``reconstruction`` section, its unset lengths fitted to veRL's
    ``rollout.prompt_length`` / ``response_length`` (its batch shapes)."""
    prompt = _get(trainer_config, "actor_rollout_ref.rollout.prompt_length")
    response = _get(trainer_config, "actor_rollout_ref.rollout.response_length")
    return config.reconstruction_options(
        max_prompt_len=None if prompt is None else int(prompt),
        max_response_len=None if response is None else int(response),
        image_token_id=image_token_id,
    )


async def run_row(
    server_manager: Any,
    trainer_config: Any,
    config: Config,
    row: Mapping[str, Any],
    *,
    pad_token_id: int = 0,
    image_token_id: int | None = None,
) -> tuple[list[dict[str, Any]] | dict[str, Any], float]:
    """Everything ``run`` does, veRL-free: (rows, rollout seconds). ``image_token_id`` (veRL's
    processor's ``<|image_pad|>``) checks pad counts where a call recorded no processor identity."""
    started = time.monotonic()

    async def urls() -> list[str]:
        return await server_addresses(server_manager)

    runtime = await get_runtime(config, urls, dialect_of(config, trainer_config))
    record, calls = await runtime.run(RowSpec.parse(row, str(config.harness)))
    steps = row.get("global_steps")
    rows = rollout_rows(
        record,
        calls,
        mode=loop_mode(config, trainer_config),
        options=reconstruction_options(config, trainer_config, image_token_id),
        global_steps=None if steps is None else int(steps),
        pad_token_id=pad_token_id,
    )
    return with_pil_images(rows, runtime.store.read_blob), time.monotonic() - started


try:  # veRL is optional: everything above works without it.
    from verl.experimental.agent_loop.agent_loop import (
        AgentLoopBase,
        AgentLoopMetrics,
        AgentLoopOutput,
        register,
    )
    from verl.utils.tokenizer import get_processor_token_id

    VERL_AVAILABLE = True
except ImportError:  # pragma: no cover - exercised by the no-veRL test environment
    VERL_AVAILABLE = False

if VERL_AVAILABLE:
    from openforgerl.train.verl import advantage as _advantage

    _advantage.register_with_verl()

    def to_agent_loop_output(row: dict[str, Any], seconds: float) -> AgentLoopOutput:
        return AgentLoopOutput(**row, metrics=AgentLoopMetrics(generate_sequences=seconds))

    @register(AGENT_NAME)
    class OpenForgeAgentLoop(AgentLoopBase):  # type: ignore[misc]  # veRL is untyped here
        """Runs the row's task in our orchestrator + gateway against veRL's servers (module docstring)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.settings = loop_config(kwargs)

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> Any:
            pad = getattr(self.tokenizer, "pad_token_id", None) or 0
            rows, seconds = await run_row(
                self.server_manager,
                self.config,
                self.settings,
                kwargs,
                pad_token_id=int(pad),
                image_token_id=get_processor_token_id(self.processor, "image"),
            )
            if isinstance(rows, list):
                return [to_agent_loop_output(r, seconds) for r in rows]
            return to_agent_loop_output(rows, seconds)

    __all__ += ["OpenForgeAgentLoop", "to_agent_loop_output"]
