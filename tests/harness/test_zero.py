"""`zero` end to end: the real `python -m openforgerl.harness.zero` process through the real gateway."""

from __future__ import annotations

from pathlib import Path

from harness_e2e import proof_content, record_figures, run_rollout, sampled_in_samples, tool_call_completions

from openforgerl.harness.scripted_policy import proof_policy
from openforgerl.harness.zero.adapter import ZeroHarness


async def test_zero_writes_proof_and_merges_into_one_chain(make_gateway, tmp_path: Path) -> None:
    content = proof_content()
    gw, engine = await make_gateway(proof_policy(content))
    out = await run_rollout(gw, ZeroHarness(wall_clock_s=60), tmp_path, tmp_path, content, budget_s=90)
    record_figures("zero", ZeroHarness(), out)
    assert out.file_text() == content, out.describe()
    assert out.run.returncode == 0 and len(out.calls) == 2
    assert out.result.metrics.merge_rate == 1.0 and len(out.result.samples) == 1
    assert out.result.samples[0].reward_score == 1.0
    calls = tool_call_completions(engine)
    assert calls and all(sampled_in_samples(c, out) for c in calls)
