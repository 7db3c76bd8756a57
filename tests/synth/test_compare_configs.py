"""The README's synthesis comparison: its two configs differ only in their training tasks (and out_dir)."""

from __future__ import annotations

from pathlib import Path

from openforgerl.config import Config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_two_arms_share_budget_seed_and_held_out_set() -> None:
    a = Config.from_yaml(EXAMPLES / "synth_compare_quickstart.yaml").model_dump()
    b = Config.from_yaml(EXAMPLES / "synth_compare_mixed.yaml").model_dump()
    assert {k for k in a if a[k] != b[k]} == {"tasks", "out_dir"}
    assert a["train"]["time_budget_s"] is None  # a fixed number of steps in both arms
    assert (
        isinstance(b["tasks"], list) and b["tasks"][0] == a["tasks"]
    )  # B = A's tasks + the synthesised band
    assert b["tasks"][1]["pass_rate"] == (0.0, 1.0) and b["tasks"][1]["dir"] == "runs/synth-family"
