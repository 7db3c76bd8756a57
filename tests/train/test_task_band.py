"""`train` draws tasks from a calibrated pass-rate band, pooled with other selections."""

from __future__ import annotations

import shutil
from pathlib import Path

from openforgerl.envs.suites import CLAW_SUITE
from openforgerl.synth.calibrate import calibrate
from openforgerl.train.config import TaskSelection, TrainConfig
from openforgerl.train.stack import select_tasks


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
    cfg = TrainConfig.model_validate({"tasks": [{"dir": str(tmp_path), "pass_rate": [0, 1]}, {"tags": ["sft"]}]})
    assert isinstance(cfg.tasks, list) and cfg.tasks[0].pass_rate == (0.0, 1.0)
