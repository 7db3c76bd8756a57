"""`train` draws tasks from a calibrated pass-rate band, pooled with other selections."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from openforgerl.config import Config, TaskSelection
from openforgerl.envs.claw.suite import CLAW_SUITE
from openforgerl.synth.calibrate import calibrate
from openforgerl.train.services import select_tasks


def test_band_selection_pools_with_other_selections(tmp_path: Path) -> None:
    names = ["easy-todo-add-01", "easy-todo-add-02", "easy-mail-send-01", "easy-mail-send-02"]
    for name in names:
        shutil.copytree(CLAW_SUITE / name, tmp_path / name)
    rates = {names[0]: [1.0, 0.0], names[1]: [1.0, 1.0], names[2]: [0.0, 0.0]}  # names[3]: never calibrated
    calibrate([tmp_path / n for n in names[:3]], lambda _t, _k: {f"claw/{n}": r for n, r in rates.items()}, 2)
    band = TaskSelection(dir=str(tmp_path), split=None, pass_rate=(0.0, 1.0))
    assert [rt.task.root.name for rt in select_tasks(band, seed=0)] == [names[0]]
    pooled = [band, TaskSelection(dir="builtin:claw", split=None, tags=["sft"], limit=3)]
    chosen = select_tasks(pooled, seed=0)
    assert len(chosen) == 4 and names[0] in [rt.task.root.name for rt in chosen]
    cfg = Config.model_validate({"tasks": [{"dir": str(tmp_path), "pass_rate": [0, 1]}, {"tags": ["sft"]}]})
    assert isinstance(cfg.tasks, list) and cfg.tasks[0].pass_rate == (0.0, 1.0)


def test_a_band_that_every_task_left_keeps_the_previous_pool(tmp_path: Path) -> None:
    from openforgerl.train.services import redraw_pool

    names = ["easy-todo-add-01", "easy-todo-add-02"]
    for name in names:
        shutil.copytree(CLAW_SUITE / name, tmp_path / name)
    band = TaskSelection(dir=str(tmp_path), split=None, pass_rate=(0.0, 1.0))
    calibrate([tmp_path / n for n in names], lambda _t, _k: {"claw/easy-todo-add-01": [1.0, 0.0]}, 2)
    previous = select_tasks(band, seed=0)
    assert [rt.task.root.name for rt in previous] == [names[0]]
    # re-calibrated: both solved every time, so the band is empty and the pool stays what it was
    calibrate([tmp_path / n for n in names], lambda _t, _k: {f"claw/{n}": [1.0, 1.0] for n in names}, 2)
    assert redraw_pool(band, 0, previous) is previous
    # beside a selection that still has tasks, the empty band just adds none
    other = TaskSelection(dir="builtin:claw", split=None, tags=["sft"], limit=2)
    assert len(redraw_pool([band, other], 0, previous)) == 2
    # back in the band: redrawn from it
    calibrate([tmp_path / n for n in names], lambda _t, _k: {f"claw/{n}": [1.0, 0.0] for n in names}, 2)
    assert sorted(rt.task.root.name for rt in redraw_pool(band, 0, previous)) == names


def test_refresh_needs_a_band_of_its_own_folder() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="give the selection a pass_rate"):
        TaskSelection(dir="x", refresh_every=2)
    with pytest.raises(ValidationError, match="copy builtin:claw"):
        TaskSelection(pass_rate=(0, 1), refresh_every=2)
    with pytest.raises(ValidationError):
        TaskSelection(dir="x", pass_rate=(0, 1), refresh_every=0)


def _rates_of(records: list[dict]) -> dict[str, float]:
    by_task: dict[str, list[float]] = {}
    for r in records:
        by_task.setdefault(r["task_id"], []).append(1.0 if (r["reward"] or 0.0) >= 1.0 else 0.0)
    return {t: sum(v) / len(v) for t, v in by_task.items()}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
async def test_training_refreshes_the_band_with_the_current_weights(tmp_path: Path) -> None:
    import json
    import tomllib

    from openforgerl.compose.train import train

    pool = tmp_path / "pool"
    names = ["easy-todo-add-03", "easy-todo-add-04", "easy-write-file-03", "easy-mail-send-03"]
    for name in names:
        shutil.copytree(CLAW_SUITE / name, pool / name)
    # a made-up calibration: every task in the band, by a policy that never existed
    calibrate(
        [pool / n for n in names], lambda _t, _k: {f"claw/{n}": [1.0, 0.0] for n in names}, 2, policy="fake"
    )
    k, out = 3, tmp_path / "run"
    cfg = Config(
        harness="zero",
        harness_options={"zero": {"builtins": "", "max_turns": 2}},
        tasks=[
            TaskSelection(split="train", tags=["sft"], difficulty=["easy"], limit=2),
            TaskSelection(dir=str(pool), split=None, pass_rate=(0.0, 1.0), refresh_every=1, refresh_k=k),
        ],
        eval={"tasks": None},
        rollout={"group_size": 3, "budget_s": 60},
        out_dir=str(out),
        train={"steps": 3, "tasks_per_step": 2, "lr": 1e-3, "checkpoint_every": 0, "step0_logprob_tol": None},
    )
    await train(cfg, out)

    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    refreshed = [r for r in rows if "refresh_pool" in r]
    # after steps 1 and 2 (not after the last), each with the version that step pushed
    assert [(r["step"], r["refresh_policy_version"]) for r in refreshed] == [(0, 1), (1, 2)]
    records = [json.loads(line) for line in (out / "refresh_rollouts.jsonl").read_text().splitlines()]
    assert len(records) == 2 * len(names) * k
    for round_, version in ((records[: len(names) * k], 1), (records[len(names) * k :], 2)):
        served = {v for r in round_ for v in r["policy_versions"]}
        assert served == {version}, f"refresh round at v{version} was served by {served}"
    last = _rates_of(records[len(names) * k :])
    for name in names:
        cal = tomllib.loads((pool / name / "task.toml").read_text())["metadata"]["calibration"]
        assert cal["policy"] == "train@v2" and cal["k"] == k and cal["scored"] == k
        assert cal.get("pass_rate") == last[f"claw/{name}"]
    in_band = sum(1 for p in last.values() if 0 < p < 1)
    assert refreshed[-1]["refresh_band"] == in_band and refreshed[-1]["refresh_pool"] == len(names)
    # the pool is redrawn from the new band beside the other selection's 2 tasks (an empty band leaves
    # those 2: only a pool empty everywhere keeps the previous one, see the test below)
    assert refreshed[-1]["refresh_train_tasks"] == 2 + in_band
