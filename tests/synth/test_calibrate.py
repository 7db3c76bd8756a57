"""Calibration with a scripted policy: pass rates land in task.toml, the band and pools follow them."""

from __future__ import annotations

import hashlib
from pathlib import Path

from openforgerl.synth import calibrate, inprocess_runner, pools, refresh, select_band, synthesize
from openforgerl.synth.calibrate import pass_rate
from openforgerl.tasks.format import load_task


def _skill(name: str) -> float:
    return int(hashlib.sha256(name.encode()).hexdigest(), 16) % 4 / 4  # 0, .25, .5 or .75 per task


def scripted(level: float):
    """Solves task t on attempt i iff i/k-ish < skill(t) + level: the gold, else nothing."""

    def policy(cand, attempt: int):
        return cand.actions if attempt / 4 < _skill(cand.name) + level else []

    return policy


def test_pass_rates_are_recorded_and_the_band_follows_them(tmp_path: Path) -> None:
    _, paths, _ = synthesize("claw", 24, tmp_path, seed=9)
    results = calibrate(paths, inprocess_runner("claw", scripted(0.0)), k=4, policy="scripted-0")
    by_path = {r.path: r for r in results}
    for p in paths:
        expected = _skill(load_task(p).task_id)
        assert by_path[p].pass_rate == expected == pass_rate(p)
        assert load_task(p).config.metadata["calibration"]["policy"] == "scripted-0"  # still a valid task
    band = select_band(paths, 0.0, 1.0)
    assert set(band) == {p for p in paths if 0 < _skill(load_task(p).task_id) < 1}
    assert set(select_band(paths, 0.0, 0.0, inclusive=True)) == {p for p in paths if pass_rate(p) == 0}
    split = pools(paths)
    assert sum(len(v) for v in split.values()) == len(paths) and not split["uncalibrated"]

    better = refresh(paths, inprocess_runner("claw", scripted(0.5)), k=4, policy="scripted-1")
    assert all((pass_rate(p) or 0) >= by_path[p].pass_rate for p in paths)
    assert set(better) == {p for p in paths if 0 < (pass_rate(p) or 0) < 1}
    assert all(pass_rate(p) == 1.0 for p in paths if _skill(load_task(p).task_id) >= 0.5)


def test_infra_failures_are_not_counted(tmp_path: Path) -> None:
    _, paths, _ = synthesize("claw", 2, tmp_path, seed=1)
    ids = [load_task(p).task_id for p in paths]

    def run(tasks, k):
        return {ids[0]: [1.0, None, 0.0, None], ids[1]: [None] * k}

    calibrate(paths, run, k=4)
    assert pass_rate(paths[0]) == 0.5 and pass_rate(paths[1]) is None
    assert select_band(paths) == [paths[0]]
