"""Runs in the veRL venv (``.venv-verl/bin/python``), started by test_verl_agent_loop.py.

Does what veRL's ``AgentLoopWorker`` does for our loop, with veRL's own code wherever it runs on CPU:
- ``import verl`` with ``VERL_USE_EXTERNAL_MODULES=openforgerl.compose.verl_loop`` (the launch
  script's mechanism) must register the agent loop and the ``openforgerl_grpo`` estimator;
- the trainer config is veRL's Hydra config composed with examples/verl/run_grpo.sh's overrides;
- the registry entry is loaded from examples/verl/agent_loop.yaml the way the worker loads it;
- ``server_manager`` is veRL's ``LLMServerClient`` whose load balancer is veRL's own
  ``GlobalRequestLoadBalancer`` called in-process (Ray's actor call shape, no Ray cluster here), holding
  the address of the "inference server": a scripted engine served over HTTP in vLLM's wire shape;
- each loop object is built by ``hydra.utils.instantiate`` with veRL's wrappers, then ``run``.
Prints one JSON line with what the test checks.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import verl  # imports our module through VERL_USE_EXTERNAL_MODULES
from verl.experimental.agent_loop.agent_loop import (
    AgentLoopOutput,
    AgentLoopWorker,
    DictConfigWrap,
    ToolListWrap,
    _agent_loop_registry,
)

REGISTERED_AT_IMPORT = "openforgerl" in _agent_loop_registry

import hydra  # noqa: E402
import torch  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf, open_dict  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from verl.workers.rollout.llm_server import LLMServerClient  # noqa: E402
from verl.workers.rollout.router import GlobalRequestLoadBalancer  # noqa: E402

from openforgerl.compose import verl_worker as worker_runtime  # noqa: E402
from openforgerl.engines.scripted import Faults, ScriptedEngine  # noqa: E402
from openforgerl.engines.scripted_server import start_scripted_server  # noqa: E402
from openforgerl.envs.claw.oracle_policy import oracle_policy  # noqa: E402
from openforgerl.tasks.format import load_task  # noqa: E402
from openforgerl.tasks.loader import load_runtime  # noqa: E402
from openforgerl.train.verl.rows import build_row  # noqa: E402

ASSETS = Path(__file__).resolve().parents[2] / "src" / "openforgerl" / "assets" / "tiny"


class InProcessActor:
    """Ray actor-handle call shape (``handle.method.remote(...)`` -> awaitable) over a local object."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._obj, name)

        class _Method:
            def remote(self, *args: Any, **kwargs: Any) -> Any:
                async def call() -> Any:
                    return method(*args, **kwargs)

                return call()

        return _Method()


def trainer_config(overrides: list[str]) -> Any:
    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return compose("ppo_trainer", overrides=overrides)


def registry_entry(config: Any, work_dir: str) -> Any:
    """Load agent_loop_config_path like AgentLoopWorker.__init__, then point work_dir at the test's tmp."""
    for entry in OmegaConf.load(config.actor_rollout_ref.rollout.agent.agent_loop_config_path):
        _agent_loop_registry[entry.name] = entry
    entry = _agent_loop_registry["openforgerl"]
    with open_dict(entry):
        entry.verl.work_dir = work_dir
        entry.rollout.retries = 0
        entry.rollout.budget_s = 150
        entry.harness_options = {"zero": {"max_turns": 6, "wall_clock_s": 120}}
    return entry


def tokenizer() -> Any:
    tok = PreTrainedTokenizerFast(tokenizer_file=str(ASSETS / "tokenizer.json"), pad_token="<|endoftext|>")
    tok.chat_template = (ASSETS / "chat_template.jinja").read_text()
    return tok


def build_loop(config: Any, client: Any, tok: Any) -> Any:
    """Exactly the keyword arguments of AgentLoopWorker._run_agent_loop's instantiate call."""
    return hydra.utils.instantiate(
        config=_agent_loop_registry["openforgerl"],
        trainer_config=DictConfigWrap(config=config),
        server_manager=client,
        tokenizer=tok,
        processor=None,
        hf_model_type=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap([]),
    )


def row_kwargs(row: dict[str, Any], uid: str, *, v1: bool) -> dict[str, Any]:
    """What veRL passes as **kwargs: the row's columns (agent_name is consumed by the worker) + its own."""
    kwargs = {k: v for k, v in row.items() if k != "agent_name"}
    kwargs.update(raw_prompt=row["prompt"], index=row["extra_info"]["index"], uid=uid)
    if v1:
        kwargs.update(session_id=0, global_steps=7)
    return kwargs


def describe(out: Any) -> dict[str, Any]:
    return {
        "type": f"{type(out).__module__}.{type(out).__qualname__}",
        "is_verl_output": isinstance(out, AgentLoopOutput),
        "prompt_ids": out.prompt_ids,
        "response_ids": out.response_ids,
        "response_mask": out.response_mask,
        "response_logprobs": out.response_logprobs,
        "reward_score": out.reward_score,
        "num_turns": out.num_turns,
        "extra_fields": out.extra_fields,
        "generate_sequences": out.metrics.generate_sequences,
    }


async def batch_classic(config: Any, tok: Any, outputs: list[Any]) -> dict[str, Any]:
    """veRL's classic padding/batching (as tests/export/test_verl_contract.py) + the estimator."""
    worker = object.__new__(AgentLoopWorker)
    worker.rollout_config = config.actor_rollout_ref.rollout
    worker.tokenizer = tok
    worker.processor = None
    worker.reward_loop_worker_handles = None
    worker.distillation_enabled = False
    worker.mm_processor_kwargs = None
    padded = [await worker._agent_loop_postprocess(o, validate=False, raw_prompt=[]) for o in outputs]
    proto = worker._postprocess(padded, input_non_tensor_batch=None)
    rewards = proto.batch["rm_scores"]
    mask = proto.batch["response_mask"]
    index = ["g"] * len(outputs)
    ours, _ = core_algos.get_adv_estimator_fn("openforgerl_grpo")(
        token_level_rewards=rewards, response_mask=mask, index=index, config=None
    )
    theirs, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, index)
    return {
        "responses_shape": list(proto.batch["responses"].shape),
        "mask_sums": mask.sum(-1).tolist(),
        "rm_sums": rewards.sum(-1).tolist(),
        "dropped": proto.non_tensor_batch["dropped"].tolist(),
        "adv_ours": ours.sum(-1).tolist(),
        "adv_verl_grpo": theirs.sum(-1).tolist(),
    }


async def main(
    task_dirs: list[str], overrides_v1: list[str], overrides_classic: list[str], work: str
) -> None:
    runtimes = [load_runtime(d) for d in task_dirs]
    engine = ScriptedEngine(oracle_policy(runtimes), faults=Faults())
    server = await start_scripted_server(engine)
    v1_cfg, classic_cfg = trainer_config(overrides_v1), trainer_config(overrides_classic)
    registry_entry(v1_cfg, work)
    address = f"127.0.0.1:{server.port}"
    client = LLMServerClient(
        v1_cfg, load_balancer_handle=InProcessActor(GlobalRequestLoadBalancer({address: None}))
    )
    tok = tokenizer()
    rows = [build_row(load_task(d), harness="zero", index=i) for i, d in enumerate(task_dirs)]
    sampling = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}
    report: dict[str, Any] = {
        "registered_at_import": REGISTERED_AT_IMPORT,
        "estimator": "openforgerl_grpo" in core_algos.ADV_ESTIMATOR_REGISTRY,
    }
    try:
        v1 = await build_loop(v1_cfg, client, tok).run(sampling, **row_kwargs(rows[0], "u0", v1=True))
        report["v1"] = [describe(o) for o in v1]
        classic_ok = await build_loop(classic_cfg, client, tok).run(
            sampling, **row_kwargs(rows[1], "u1", v1=False)
        )
        report["classic"] = describe(classic_ok)
        engine.faults.http_errors = 1000
        report["v1_fault"] = await build_loop(v1_cfg, client, tok).run(
            sampling, **row_kwargs(rows[0], "u2", v1=True)
        )
        dropped = await build_loop(classic_cfg, client, tok).run(
            sampling, **row_kwargs(rows[1], "u3", v1=False)
        )
        engine.faults.http_errors = 0
        report["classic_fault"] = describe(dropped)
        report["batch"] = await batch_classic(classic_cfg, tok, [classic_ok, dropped, classic_ok])
        rt = worker_runtime._RUNTIME
        report["engine_urls"] = rt.urls if rt else None
        report["engine_calls"] = len(engine.produced)
    finally:
        await worker_runtime.shutdown()
        await server.aclose()
    print(json.dumps(report, default=str))


if __name__ == "__main__":
    spec = json.loads(sys.argv[1])
    torch.set_num_threads(1)
    asyncio.run(main(spec["tasks"], spec["overrides_v1"], spec["overrides_classic"], spec["work"]))
