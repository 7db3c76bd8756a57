"""The built-in trainer end to end on the embedded default: local engine, `zero` in bubblewrap
sandboxes, Claw tasks, the gateway's call log, GRPO update, in-process weight push, checkpoint, resume."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from openforgerl.compose.train import train
from openforgerl.config import Config, TaskSelection

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")]


def _config(out: Path, steps: int) -> Config:
    return Config(
        harness="zero",
        harness_options={"zero": {"builtins": "", "max_turns": 2}},
        tasks=TaskSelection(split="train", tags=["sft"], limit=2),
        eval={"tasks": None},
        train={"steps": steps, "tasks_per_step": 2, "lr": 1e-3, "checkpoint_every": 1},
        rollout={"group_size": 3, "budget_s": 60},
        out_dir=str(out),
    )


async def test_train_steps_update_weights_sync_and_resume(tmp_path: Path) -> None:
    out = tmp_path / "run"
    summary = await train(_config(out, 1), out)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    step0 = rows[0]
    assert step0["step"] == 0 and step0["policy_version"] == 1
    assert step0["kept"] + step0["dropped"] == 6 and step0["kept"] > 0
    assert step0["trained_tokens"] > 0 and step0["samples"] >= step0["kept"]
    assert summary.curve is not None and summary.curve.stat().st_size > 1000
    state = json.loads((out / "checkpoint" / "trainer_state.json").read_text())
    assert state == {"step": 1, "policy_version": 1}
    before = load_file(str(out / "checkpoint" / "model.safetensors"))

    # resume continues at step 1 with the checkpoint's weights and version
    resumed = await train(_config(out, 2), out, resume=True)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "reward" in r] == [0, 1]
    assert rows[-1]["policy_version"] == 2 and resumed.steps == 2
    after = load_file(str(out / "checkpoint" / "model.safetensors"))
    moved = [k for k in before if not torch.equal(before[k], after[k])]
    if rows[-1]["grad_norm"] > 0:
        assert moved, "a step with a gradient must change the weights"
