"""pass@k / pass^k against hand-computed values and tau-bench's definition; bootstrap; infra exclusion."""

from __future__ import annotations

from math import comb

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openforgerl.eval.metrics import Trial, bootstrap, count_tasks, group_metrics, pass_at_k, pass_hat_k


def test_pass_at_k_hand_computed() -> None:
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(3, 0, 3) == 0.0
    assert pass_at_k(3, 1, 3) == 1.0  # n = k: at least one success
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - 21 / 252)


def test_pass_hat_k_hand_computed() -> None:
    # n=5, c=3, k=2: C(3,2)/C(5,2) = 3/10
    assert pass_hat_k(5, 3, 2) == pytest.approx(0.3)
    assert pass_hat_k(3, 3, 3) == 1.0
    assert pass_hat_k(3, 2, 3) == 0.0  # Claw-Eval pass^3 with 3 trials = all three passed
    assert pass_hat_k(4, 2, 1) == pytest.approx(0.5)


def _tau_bench_pass_hat_k(rewards: list[float], k: int) -> float:
    """tau_bench/run.py: success = reward == 1 (within 1e-6), comb(c, k) / comb(num_trials, k)."""
    c = sum(1 for r in rewards if abs(r - 1.0) <= 1e-6)
    return comb(c, k) / comb(len(rewards), k)


@given(st.lists(st.sampled_from([0.0, 1.0, 0.5]), min_size=1, max_size=8), st.integers(1, 8))
def test_pass_hat_k_matches_tau_bench(rewards: list[float], k: int) -> None:
    if k > len(rewards):
        return
    c = sum(1 for r in rewards if r >= 1.0)
    assert pass_hat_k(len(rewards), c, k) == pytest.approx(_tau_bench_pass_hat_k(rewards, k))


@given(st.integers(1, 12), st.data())
def test_estimators_are_ordered_and_bounded(n: int, data: st.DataObject) -> None:
    c = data.draw(st.integers(0, n))
    k = data.draw(st.integers(1, n))
    hat, at = pass_hat_k(n, c, k), pass_at_k(n, c, k)
    assert 0.0 <= hat <= c / n + 1e-9
    assert c / n <= at + 1e-9 <= 1.0 + 2e-9
    assert pass_at_k(n, c, 1) == pytest.approx(c / n) == pytest.approx(pass_hat_k(n, c, 1))


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError):
        pass_hat_k(3, 4, 1)


def _trials(task: str, rewards: list[float | None], harness: str = "h", infra: int = 0) -> list[Trial]:
    out = [Trial(task, harness, r, services=("mail",)) for r in rewards]
    return out + [Trial(task, harness, None, infra=True, status="infra_error:engine")] * infra


def test_infra_trials_are_excluded_not_failed() -> None:
    trials = _trials("a", [1.0, 1.0, 1.0], infra=2) + _trials("b", [0.0, 1.0, 0.0])
    counts = {tc.task_id: tc for tc in count_tasks(trials)}
    assert (counts["a"].n, counts["a"].c, counts["a"].infra) == (3, 3, 2)
    m = group_metrics(trials, [1, 3], resamples=200)
    assert m.trials == 6 and m.infra_dropped == 2 and m.tasks == 2
    assert m.pass_at[1].value == pytest.approx((1.0 + 1 / 3) / 2)
    assert m.pass_at[3].value == pytest.approx(1.0)
    assert m.pass_hat[3].value == pytest.approx(0.5)


def test_tasks_with_too_few_trials_are_left_out_of_that_k() -> None:
    trials = _trials("a", [1.0, 1.0, 1.0]) + _trials("b", [0.0], infra=2)
    m = group_metrics(trials, [1, 3], resamples=100)
    assert m.pass_hat[3].tasks == 1 and m.pass_hat[3].value == 1.0
    assert m.pass_at[1].tasks == 2 and m.pass_at[1].value == pytest.approx(0.5)


def test_threshold_defines_success() -> None:
    trials = _trials("a", [0.8, 0.7, 1.0])
    assert count_tasks(trials, threshold=0.75)[0].c == 2
    assert count_tasks(trials, threshold=1.0)[0].c == 1


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    values = [0.0, 1.0, 1.0, 0.0, 1.0, 0.5, 1.0, 0.0]
    lo, hi = bootstrap(values, resamples=500, seed=3)
    assert (lo, hi) == bootstrap(values, resamples=500, seed=3)
    assert lo < sum(values) / len(values) < hi
    assert 0.0 <= lo and hi <= 1.0
    assert bootstrap([0.4], resamples=10) == (0.4, 0.4)
