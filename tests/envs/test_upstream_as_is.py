"""Importers fed upstream's files as they are (fixtures shaped exactly like the Claw-Eval, QwenClawBench and
tau2-bench repositories' files), and the scoring rules that must hold when a judge fails."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from judge_helpers import free_port

from openforgerl.envs.importers import import_any
from openforgerl.orchestrator.task_protocol import Verdict, VerifierError
from openforgerl.tasks.format import load_task
from openforgerl.tasks.harbor import HarborTaskRuntime
from openforgerl.tasks.host_side import HostSide
from openforgerl.tasks.judge import JudgeClient

DATA = Path(__file__).parent / "data"


# ------------------------------------------------------------------ QwenClawBench hybrid, judge down


def _hybrid_runtime(tmp_path: Path) -> tuple[HarborTaskRuntime, dict]:
    [folder] = import_any(DATA / "qwenclawbench/tasks/task_902_transcript.md", tmp_path / "tasks")
    rt = HarborTaskRuntime(load_task(folder))
    # a judge engine nobody listens on: every call is a real connection refused
    rt.host = HostSide(judge=JudgeClient(f"http://127.0.0.1:{free_port()}/v1", attempts=1, timeout_s=5))
    return rt, json.loads((folder / "tests/judge.json").read_text())


def test_a_hybrid_whose_automated_part_decides_the_score_is_scored_when_the_judge_fails(tmp_path: Path) -> None:
    rt, spec = _hybrid_runtime(tmp_path)
    assert spec["weights"] == {"automated": 0.6, "llm_judge": 0.4}
    # automated 0.5 < upstream's 0.75 threshold: the judge's share is zeroed whatever it says
    verdict = asyncio.run(rt._hybrid(Verdict(0.5, {"mentions_time": 0.5}, ""), spec, []))
    assert verdict.reward == pytest.approx(0.6 * 0.5) and "llm_judge" not in verdict.components
    assert "the judge failed" in verdict.log
    zero = asyncio.run(rt._hybrid(Verdict(0.0, {}, ""), spec, []))
    assert zero.reward == 0.0
    # control: at or above the threshold the judge's answer moves the score, so the trial is infra
    with pytest.raises(VerifierError, match="llm judge"):
        asyncio.run(rt._hybrid(Verdict(1.0, {}, ""), spec, []))


def test_a_hybrid_with_no_judge_weight_never_waits_on_the_judge_and_llm_judge_tasks_always_do(
        tmp_path: Path) -> None:
    rt, spec = _hybrid_runtime(tmp_path)
    verdict = asyncio.run(rt._hybrid(Verdict(1.0, {}, ""), {**spec, "weights": {"automated": 1, "llm_judge": 0}}, []))
    assert verdict.reward == 1.0
    with pytest.raises(VerifierError):  # a pure llm_judge task is nothing but the judge's answer
        asyncio.run(rt._hybrid(Verdict(0.0, {}, ""), {**spec, "grading_type": "llm_judge"}, []))
