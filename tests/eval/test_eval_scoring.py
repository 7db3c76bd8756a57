"""Each imported benchmark is reported the way its authors compute it (eval/scoring.py), next to the
overall tables, with infra / timeout / config apart; and `eval` opens the embedded default stack."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from openforgerl.eval.metrics import Trial
from openforgerl.eval.report import build_report, to_markdown
from openforgerl.eval.scoring import benchmark_of

SOURCES = {
    "ce/a": "claw-eval",
    "ce/b": "claw-eval",
    "q/a": "qwenclawbench",
    "q/b": "qwenclawbench",
    "t/a": "tau2",
    "own": "openforgerl/claw",
}


def _trials() -> list[Trial]:
    out = []
    for r in (0.8, 0.9, 0.75):  # Claw-Eval: every trial >= 0.75 passes, none is perfect
        out.append(Trial("ce/a", "zero", r))
    out += [
        Trial("ce/b", "zero", 1.0),
        Trial("ce/b", "zero", 0.5),
        Trial("ce/b", "zero", None, status="timeout"),
    ]
    out += [Trial("q/a", "zero", 1.0)] * 3  # QwenClawBench: a pass needs a perfect score
    out += [
        Trial("q/b", "zero", 0.9),
        Trial("q/b", "zero", 1.0),
        Trial("q/b", "zero", None, True, status="infra_error:verifier"),
    ]
    out += [
        Trial("t/a", "zero", 1.0),
        Trial("t/a", "zero", 0.0),
        Trial("t/a", "zero", None, status="config_error:context"),
    ]
    out += [Trial("own", "zero", 1.0)] * 3
    return out


def test_benchmarks_use_their_authors_threshold_and_score() -> None:
    report = build_report(_trials(), 3, resamples=50, benchmarks=SOURCES)
    assert set(report["benchmarks"]) == {"claw-eval", "qwenclawbench", "tau2"}  # not our own suite
    ce = report["benchmarks"]["claw-eval"]["harnesses"]["zero"]
    assert ce["pass_hat"][3]["value"] == 0.5 and ce["pass_at"][3]["value"] == 1.0  # ce/a all pass, ce/b one
    assert ce["score"] == pytest.approx(((0.8 + 0.9 + 0.75) / 3 + (1.0 + 0.5 + 0.0) / 3) / 2)  # timeout = 0
    assert ce["timeouts"] == 1
    q = report["benchmarks"]["qwenclawbench"]["harnesses"]["zero"]
    assert q["pass_hat"][1]["value"] == pytest.approx((1.0 + 0.5) / 2)  # 0.9 is not a pass
    assert q["pass_hat"][3]["tasks"] == 1  # q/b has 2 valid trials: left out of k=3
    assert q["strict_accuracy"] == 0.5 and q["infra_dropped"] == 1
    t = report["benchmarks"]["tau2"]["harnesses"]["zero"]
    assert t["pass_hat"][1]["value"] == 0.5 and t["config_errors"] == 1 and t["trials"] == 2
    # the overall tables use the same per-benchmark threshold: Claw-Eval's 0.8 is a success there too
    assert report["tasks"]["zero"][0]["task_id"] == "ce/a" and report["tasks"]["zero"][0]["c"] == 3
    q_b = next(tc for tc in report["tasks"]["zero"] if tc["task_id"] == "q/b")
    assert q_b["c"] == 1, "QwenClawBench's 0.9 still fails in the overall table"
    md = to_markdown(report)
    assert "| Claw-Eval | zero | >= 0.75 |" in md and "| QwenClawBench | zero | >= 1.0 |" in md
    assert "success = reward >= each benchmark's own (Claw-Eval >= 0.75, QwenClawBench >= 1.0" in md


def test_a_given_threshold_is_the_one_of_every_table() -> None:
    report = build_report(_trials(), 3, threshold=0.85, resamples=50, benchmarks=SOURCES)
    ce_a = report["tasks"]["zero"][0]
    assert ce_a["task_id"] == "ce/a" and ce_a["c"] == 1  # only the 0.9 passes at 0.85
    assert report["benchmarks"]["claw-eval"]["protocol"]["threshold"] == 0.85
    md = to_markdown(report)
    assert "success = reward >= 0.85" in md and "| Claw-Eval | zero | >= 0.85 |" in md


def test_empty_cells_are_na_and_k1_has_no_repeated_column() -> None:
    only_timeouts = [
        Trial("t/a", "zero", None, status="timeout"),
        Trial("t/a", "zero", None, status="timeout"),
    ]
    only_infra = [Trial("own", "codex", None, True, status="infra_error:engine")]
    report = build_report(only_timeouts + only_infra, 1, resamples=10, benchmarks=SOURCES)
    md = to_markdown(report)
    zero_row = next(line for line in md.splitlines() if line.startswith("| zero |"))
    codex_row = next(line for line in md.splitlines() if line.startswith("| codex |"))
    assert zero_row.split(" | ")[6] == "n/a", "timeouts have no reward: the mean is n/a, not 0.000"
    assert codex_row.split(" | ")[6:] == ["n/a", "n/a", "n/a |"], codex_row
    head = next(line for line in md.splitlines() if line.startswith("| group |"))
    assert head.count("pass@1") == 1 and "pass^1" in head
    tau = next(line for line in md.splitlines() if line.startswith("| tau2-bench |"))
    assert "0.000 (avg reward)" in tau, "two timeouts are a score of 0 in the benchmark's own score"
    assert "0.000" not in codex_row


def test_the_benchmark_is_told_by_the_source() -> None:
    assert benchmark_of("claw-eval") == "claw-eval" and benchmark_of("tau2/airline") == "tau2"
    assert benchmark_of("openforgerl/claw") is None and benchmark_of("") is None


def test_an_unknown_engine_model_is_one_user_error(tmp_path: Path) -> None:
    from openforgerl.cli.eval import command as eval_command
    from openforgerl.errors import UserError

    app = typer.Typer()
    app.command()(eval_command)
    suite = Path(__file__).resolve().parents[2] / "src/openforgerl/envs/claw/suite/tasks"
    task = sorted(p for p in suite.iterdir() if p.name.startswith("easy-write-file"))[0]
    res = CliRunner().invoke(
        app, ["--tasks", str(task), "--engine", str(tmp_path / "nope"), "--out", str(tmp_path / "o")]
    )
    assert isinstance(res.exception, UserError) and "has no config.json" in str(res.exception)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
def test_eval_opens_the_embedded_default_stack(tmp_path: Path) -> None:
    """No --gateway, no --scripted-oracle: the local engine serving `tiny` behind an in-process gateway."""
    from openforgerl.cli.eval import command as eval_command

    app = typer.Typer()
    app.command()(eval_command)
    suite = Path(__file__).resolve().parents[2] / "src/openforgerl/envs/claw/suite/tasks"
    task = sorted(p for p in suite.iterdir() if p.name.startswith("easy-write-file"))[0]
    res = CliRunner().invoke(
        app,
        [
            "--tasks",
            str(task),
            "--harness",
            "zero",
            "--trials",
            "1",
            "--budget-s",
            "120",
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert res.exit_code == 0, (res.output, res.exception)
    records = [json.loads(x) for x in (tmp_path / "o" / "rollouts.jsonl").read_text().splitlines()]
    assert records and any(r["metadata"].get("calls", 0) > 0 for r in records)  # the tiny model was called
