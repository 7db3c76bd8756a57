"""Weighted, deterministic harness assignment for mixed runs."""

from __future__ import annotations

from collections import Counter

import pytest

from openforgerl.harness.harness_mix import HarnessMix, adapter_for, split_by_harness


def test_assignment_is_deterministic_and_follows_weights() -> None:
    mix = HarnessMix.parse("codex:3,zero:1", seed=7)
    keys = [f"group{g}/{i}" for g in range(500) for i in range(4)]
    first = [mix.assign(k) for k in keys]
    assert first == [HarnessMix({"codex": 3, "zero": 1}, seed=7).assign(k) for k in keys]
    share = Counter(first)["codex"] / len(keys)
    assert 0.70 < share < 0.80


def test_zero_weight_is_never_assigned_and_seed_changes_the_draw() -> None:
    mix = HarnessMix({"codex": 1, "claude_code": 0, "zero": 1})
    names = {mix.assign(str(i)) for i in range(300)}
    assert names == {"codex", "zero"}
    other = HarnessMix({"codex": 1, "zero": 1}, seed=1)
    assert [mix.assign(str(i)) for i in range(50)] != [other.assign(str(i)) for i in range(50)]


@pytest.mark.parametrize("bad", [{}, {"codex": -1}, {"codex": 0}])
def test_invalid_weights_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        HarnessMix(bad)


def test_parse_forms_and_split() -> None:
    assert HarnessMix.parse(["codex", "zero"]).weights == {"codex": 1.0, "zero": 1.0}
    assert HarnessMix.parse({"zero": 2}).weights == {"zero": 2}
    groups = split_by_harness([("a", "codex"), ("b", None), ("c", "codex")], lambda x: x[1])
    assert groups == {"codex": [("a", "codex"), ("c", "codex")], "unknown": [("b", None)]}


def test_adapter_for_records_the_assigned_harness() -> None:
    mix = HarnessMix.parse("codex:1,openclaw-messages:1,zero:1")
    names = {adapter_for(mix, "g", i).name for i in range(60)}
    assert names == {"codex", "openclaw-messages", "zero"}
    assert adapter_for(mix, "g", 3).name == adapter_for(mix, "g", 3).name
