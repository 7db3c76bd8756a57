"""The built-in GRPO pieces train the tiny VLM end to end on recorded screenshot traffic.

Real parts: the local engine serving `tiny-vl` (background thread), the gateway recording every call
(images as blobs, processor identity, the engine's grids), the call log, reconstruction (one chain per
rollout holding both screenshots), `grpo_update` with pixels from the blob store (`SampleVision`),
the weight push into the engine (`sync_weights` + `InProcessPusher`), and a second step on the new
weights. Checked: the step-0 logprob check passes, both the vision tower and the language model get a
non-zero gradient and move, and after the push the engine samples from exactly the trainer's weights.
"""

from __future__ import annotations

import base64
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import torch
from PIL import Image, ImageDraw

from openforgerl.engines.local.model import resolve_model_path
from openforgerl.records import Sample
from openforgerl.stack import InProcessPusher
from openforgerl.store.sqlite import SQLiteCallStore
from openforgerl.train.grpo import RolloutScore, group_advantages
from openforgerl.train.policy import vision_response_logprobs
from openforgerl.train.trainer import GatewayAdmin, load_policy, policy_vision
from openforgerl.train.update import UpdateSettings, grpo_update, logprob_check
from openforgerl.train.vision import SampleVision, VisionInputError
from openforgerl.train.weight_sync import sync_weights
from openforgerl.trajectory import reconstruct_samples

TOL = 1e-3
REWARDS = [1.0, 0.0, 1.0, 0.0]


def screenshot(seed: int, size: tuple[int, int] = (96, 64)) -> bytes:
    img = Image.new("RGB", size, (230, 230, 230))
    d = ImageDraw.Draw(img)
    x = 6 + (seed * 17) % (size[0] - 30)
    d.rectangle((x, 20, x + 24, 34), fill=((seed * 60) % 256, 120, 200))
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def _part(data: bytes) -> dict[str, Any]:
    return {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(data).decode()},
    }


@dataclass
class Env:
    server: Any
    gateway: Any
    store: SQLiteCallStore

    async def rollout(self, index: int, reward: float, *, turns: int = 2) -> tuple[list[Any], Any]:
        """One GUI-style rollout: a screenshot per turn, the model answers; then its verdict."""
        spec = await self.gateway.open_rollout(
            task_id="click", harness="gui-test", group_id="g0", sample_index=index
        )
        messages: list[dict[str, Any]] = [{"role": "system", "content": "Click the blue box."}]
        headers = {"Authorization": f"Bearer {spec['api_key']}"}
        async with aiohttp.ClientSession(headers=headers) as http:
            for turn in range(turns):
                messages.append(
                    {
                        "role": "user",
                        "content": [
                            _part(screenshot(index * 10 + turn)),
                            {"type": "text", "text": f"step {turn}"},
                        ],
                    }
                )
                body = {
                    "model": "tiny-vl",
                    "messages": messages,
                    "max_tokens": 6,
                    "temperature": 1.0,
                    "seed": index * 7 + turn,
                }
                async with http.post(spec["openai_base_url"] + "/chat/completions", json=body) as resp:
                    assert resp.status == 200, await resp.text()
                    reply = await resp.json()
                messages.append(
                    {"role": "assistant", "content": reply["choices"][0]["message"]["content"] or ""}
                )
        outcome = {"status": "ok", "reward": reward, "in_batch": True, "group_valid": True}
        async with aiohttp.ClientSession(headers=self.gateway.admin_headers()) as http:
            async with http.post(
                f"{self.gateway.admin_url}/rollouts/{spec['rollout_id']}/outcome", json=outcome
            ) as r:
                assert r.status == 200, await r.text()
        record = await self.store.get_rollout(spec["rollout_id"])
        return await self.store.list_calls(spec["rollout_id"]), record


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    from openforgerl.engines.local.background import BackgroundServer
    from openforgerl.engines.openai_compat import OpenAICompatEngine
    from openforgerl.gateway.server import start_gateway

    server = BackgroundServer.start(str(resolve_model_path("tiny-vl")))
    store = SQLiteCallStore(tmp_path / "calls.db")
    gateway = await start_gateway(OpenAICompatEngine([server.url]), store, owns_engine=True)
    try:
        yield Env(server, gateway, store)
    finally:
        await gateway.aclose()
        await store.aclose()
        server.close()


async def _step(env: Env, first: int) -> tuple[list[Sample], dict[str, float]]:
    samples, scores = [], []
    for i, reward in enumerate(REWARDS):
        calls, record = await env.rollout(first + i, reward)
        result = reconstruct_samples(calls, record)
        assert result.dropped_reason is None, result.dropped_reason
        samples += result.samples
        scores.append(RolloutScore(record.rollout_id, "g0", reward))
    return samples, group_advantages(scores)


def _grad_norms(model: torch.nn.Module) -> dict[str, float]:
    norms = {"vision": 0.0, "language": 0.0}
    for name, p in model.named_parameters():
        if p.grad is not None:
            norms["vision" if ".visual." in f".{name}" else "language"] += float(p.grad.norm()) ** 2
    return {k: v**0.5 for k, v in norms.items()}


@pytest.mark.slow
async def test_grpo_on_tiny_vl_trains_both_towers_and_syncs_weights(env: Env) -> None:
    path = resolve_model_path("tiny-vl")
    model = load_policy(path)
    vision = policy_vision(path, env.store)
    assert isinstance(vision, SampleVision)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    settings = UpdateSettings(micro_batch=2, max_grad_norm=1e9)

    samples, adv = await _step(env, 0)
    assert len(samples) == len(REWARDS)  # one chain per rollout: both screenshots merged
    assert all(len(s.multi_modal_data["images"]) == 2 for s in samples)
    assert all(s.num_turns == 2 for s in samples)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    stats = grpo_update(model, opt, samples, adv, settings, vision=vision)
    check = logprob_check(stats, TOL)
    grads = _grad_norms(model)
    print(
        f"\nstep 0: logprob max diff {stats.logprob_diff_max:.2e} mean {stats.logprob_diff_mean:.2e}; "
        f"grad norms {grads}; loss {stats.loss:.4f}"
    )
    assert check.passed, check
    assert grads["vision"] > 0 and grads["language"] > 0
    moved = {k for k, v in model.state_dict().items() if not torch.equal(v, before[k])}
    assert any(".visual." in f".{k}" for k in moved) and any("language_model" in k for k in moved)

    version = await sync_weights(GatewayAdmin(env.gateway), InProcessPusher(env.server), model, 1)
    assert version == 1

    # step 1 on the pushed weights: the engine's logprobs are the trainer's (both towers were pushed)
    samples, adv = await _step(env, 100)
    assert {s.policy_version_min for s in samples} == {1}
    with torch.no_grad():
        width = max(len(s.response_ids) for s in samples)
        trainer = vision_response_logprobs(model, samples, vision, width)
    for row, s in zip(trainer, samples, strict=True):
        mask = torch.tensor(s.response_mask, dtype=torch.bool)
        recorded = torch.tensor(s.response_logprobs)
        assert (row[: len(s.response_ids)][mask] - recorded[mask]).abs().max() < TOL
    stats = grpo_update(model, opt, samples, adv, settings, vision=vision)
    print(f"step 1: logprob max diff {stats.logprob_diff_max:.2e}; grad norms {_grad_norms(model)}")
    assert stats.logprob_diff_max < TOL and stats.grad_norm > 0


def test_missing_blob_or_other_processor_settings_refuse_to_guess(tmp_path: Path) -> None:
    path = resolve_model_path("tiny-vl")
    png = screenshot(1)
    import hashlib

    sha = hashlib.sha256(png).hexdigest()
    ref = {
        "sha256": sha,
        "media_type": "image/png",
        "width": 96,
        "height": 64,
        "grid_thw": [1, 4, 6],
        "tokens": 6,
    }
    sample = Sample(
        prompt_ids=[1],
        response_ids=[2],
        response_mask=[1],
        response_logprobs=[0.0],
        multi_modal_data={"images": [ref]},
        rollout_id="r",
    )
    ok = SampleVision.for_model_dir(path, {sha: png}.get)
    assert ok(sample).tokens == (6,)
    with pytest.raises(VisionInputError, match="not in the blob store"):
        SampleVision.for_model_dir(path, {}.get)(sample)
    wrong = sample.model_copy(
        update={"multi_modal_data": {"images": [{**ref, "tokens": 880, "grid_thw": None}]}}
    )
    with pytest.raises(VisionInputError, match="engine used 880"):
        ok(wrong)


@pytest.mark.slow
async def test_trainer_steps_on_tiny_vl_check_logprobs_and_push_both_towers(
    env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Trainer.step` itself (collect, vision inputs from the blobs, update, step-0 check, weight push),
    with the orchestrator's `run_batch` replaced by screenshot rollouts through the real gateway."""
    from openforgerl.compose.train import trainer_for
    from openforgerl.config import Config
    from openforgerl.orchestrator.batch import BatchResult
    from openforgerl.orchestrator.groups import GroupResult
    from openforgerl.train.services import TrainServices

    counter = iter(range(1000))

    async def gui_batch(tasks: list[Any], harness: Any, **kw: Any) -> BatchResult:
        records = []
        for reward in REWARDS:
            _, record = await env.rollout(next(counter), reward)
            records.append(record)
        return BatchResult([GroupResult("click", "g0", records, True)])

    monkeypatch.setattr("openforgerl.train.trainer.run_batch", gui_batch)
    path = resolve_model_path("tiny-vl")
    cfg = Config(
        model="tiny-vl",
        eval={"tasks": None},
        out_dir=str(tmp_path),
        train={"steps": 2, "lr": 1e-3, "micro_batch": 2, "max_grad_norm": 1e9, "step0_logprob_tol": TOL},
    )
    trainer = trainer_for(cfg, tmp_path)
    services = TrainServices(
        env.server.url, InProcessPusher(env.server), env.store, env.gateway, None, ["click"], [], path
    )
    model = load_policy(path)
    trainer.vision = policy_vision(path, env.store)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr)
    first = await trainer.step(services, model, opt, None, 0, 0)
    second = await trainer.step(services, model, opt, None, 1, first["policy_version"])
    print(f"\ntrainer step 0: {first}\ntrainer step 1: {second}")
    assert first["step0_logprob_check"] is True and first["step0_logprob_max_diff"] < TOL
    assert "step0_logprob_check" not in second, "checked once, at the first step"
    assert first["samples"] == 4 and first["grad_norm"] > 0 and second["policy_version"] == 2
    assert second["logprob_diff_max"] < TOL, "step 1 sampled from the pushed weights"
    engine_state = env.server.engine.loaded.model.state_dict()
    for name, value in model.state_dict().items():
        assert torch.equal(engine_state[name], value), name
    trainer.log.close()


def test_step0_check_fails_loudly_and_runs_once() -> None:
    from openforgerl.compose.train import train_plan
    from openforgerl.config import Config
    from openforgerl.train.trainer import Trainer
    from openforgerl.train.update import UpdateStats

    trainer = Trainer.__new__(Trainer)
    trainer.plan = train_plan(Config(train={"step0_logprob_tol": 1e-3}))
    trainer.check_logprobs = True
    trainer.console = __import__("rich.console").console.Console(record=True)
    assert trainer.step0_check(UpdateStats(0, 0, 0, 0, 0, 0)) == {}, "no trained tokens: not yet"
    row = trainer.step0_check(UpdateStats(0, 0, 0, 0, 5, 1, logprob_diff_max=0.5, logprob_diff_mean=0.1))
    assert row == {
        "step0_logprob_max_diff": 0.5,
        "step0_logprob_mean_diff": 0.1,
        "step0_logprob_check": False,
    }
    assert "step-0 logprob check failed" in trainer.console.export_text()
    assert trainer.step0_check(UpdateStats(0, 0, 0, 0, 5, 1)) == {}
