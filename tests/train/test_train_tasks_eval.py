"""`eval.train_group_size`: the trainer evaluates its train tasks before and after training (the warm-up
policy against the trained one, each on its own rollouts), beside the held-out evaluation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from openforgerl.config import Config, TaskSelection


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
async def test_train_tasks_are_evaluated_before_and_after(tmp_path: Path) -> None:
    from openforgerl.compose.train import train

    out = tmp_path / "run"
    cfg = Config(
        harness="zero",
        harness_options={"zero": {"builtins": "", "max_turns": 2}},
        tasks=[TaskSelection(split="train", tags=["sft"], difficulty=["easy"], limit=2)],
        eval={"tasks": None, "train_group_size": 2},
        rollout={"group_size": 2, "budget_s": 60},
        out_dir=str(out),
        train={"steps": 1, "tasks_per_step": 2, "lr": 1e-3, "checkpoint_every": 0, "step0_logprob_tol": None},
    )
    summary = await train(cfg, out)

    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    evaluated = [(r["step"], r["train_pass1"]) for r in rows if "train_pass1" in r]
    assert [step for step, _ in evaluated] == [0, 1]
    assert (summary.train_before, summary.train_after) == (evaluated[0][1], evaluated[1][1])
    records = [json.loads(line) for line in (out / "eval_train_rollouts.jsonl").read_text().splitlines()]
    assert len(records) == 2 * 2 * 2  # two evaluations of 2 tasks x 2 rollouts, none of them trained on
    assert {r["task_id"] for r in records} == {
        r["task_id"] for r in (json.loads(x) for x in (out / "train_rollouts.jsonl").read_text().splitlines())
    }


def test_train_group_size_is_off_by_default() -> None:
    assert Config().eval.train_group_size == 0
    with pytest.raises(ValueError):
        Config(eval={"train_group_size": -1})
