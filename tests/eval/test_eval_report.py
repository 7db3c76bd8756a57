"""Report files: JSON (parsable, string keys), Markdown table, a real PNG."""

from __future__ import annotations

import json
from pathlib import Path

from openforgerl.eval.metrics import Trial
from openforgerl.eval.report import build_report, to_markdown, write_report
from openforgerl.eval.runner import records_to_trials
from openforgerl.records import RolloutRecord, RolloutStatus


def _trials() -> list[Trial]:
    out = []
    for h, rewards in {"zero": [1, 1, 0, 0, 0, 0], "codex": [1, 1, 1, 0, 0, 1]}.items():
        for i, r in enumerate(rewards):
            out.append(Trial(f"t{i // 3}", h, float(r), services=("mail",) if i < 3 else ("todo", "mail")))
    out.append(Trial("t0", "zero", None, infra=True, status="infra_error:sandbox"))
    return out


def test_report_per_harness_and_service(tmp_path: Path) -> None:
    report = build_report(_trials(), 3, resamples=100)
    zero = report["harnesses"]["zero"]
    assert zero["tasks"] == 2 and zero["trials"] == 6 and zero["infra_dropped"] == 1
    assert zero["pass_at"][3]["value"] == 0.5  # t0 has 2/3, t1 has 0/3
    assert report["harnesses"]["codex"]["pass_hat"][3]["value"] == 0.5
    assert set(report["services"]["zero"]) == {"mail", "todo"}
    assert report["services"]["zero"]["todo"]["tasks"] == 1
    md = to_markdown(report)
    assert "| zero | 2 | 6 | 0 | 1 | 0 |" in md and "pass^3" in md and "zero / todo" in md
    paths = write_report(report, tmp_path / "out")
    loaded = json.loads(paths["json"].read_text())
    assert loaded["harnesses"]["zero"]["pass_at"]["1"]["value"] == zero["pass_at"][1]["value"]
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_records_to_trials_flags_infra() -> None:
    recs = [
        RolloutRecord(rollout_id="a", task_id="t", harness="zero", status=RolloutStatus.OK, reward=1.0),
        RolloutRecord(rollout_id="b", task_id="t", harness="zero", status=RolloutStatus.TIMEOUT, reward=None),
        RolloutRecord(rollout_id="c", task_id="t", harness="zero", status=RolloutStatus.INFRA_ENGINE),
    ]
    trials = records_to_trials(recs, {"t": ["mail"]})
    assert [(t.reward, t.infra, t.kind) for t in trials] == [
        (1.0, False, "scored"),
        (None, False, "timeout"),
        (None, True, "infra"),
    ]
    assert trials[0].services == ("mail",)


def test_timeouts_infra_and_config_are_separate_columns() -> None:
    recs = [
        RolloutRecord(rollout_id="a", task_id="t", harness="zero", status=RolloutStatus.OK, reward=1.0),
        RolloutRecord(rollout_id="b", task_id="t", harness="zero", status=RolloutStatus.TIMEOUT, reward=0.0),
        RolloutRecord(rollout_id="c", task_id="t", harness="zero", status=RolloutStatus.INFRA_ENGINE),
        RolloutRecord(rollout_id="d", task_id="t", harness="zero", status=RolloutStatus.INFRA_HARNESS_START),
        RolloutRecord(
            rollout_id="e",
            task_id="t",
            harness="zero",
            status=RolloutStatus.OK,
            reward=1.0,
            infra_tainted=True,
        ),
    ]
    report = build_report(records_to_trials(recs), 1, resamples=10)
    zero = report["harnesses"]["zero"]
    assert (zero["trials"], zero["timeouts"], zero["infra_dropped"], zero["config_errors"]) == (2, 1, 2, 1)
    assert zero["mean_reward"] == 1.0, "a timeout has no reward: not folded in as 0"
    assert zero["pass_at"][1]["value"] == 0.5, "but it is a trial that did not succeed"
    assert "| zero | 1 | 2 | 1 | 2 | 1 | 1.000 |" in to_markdown(report)
