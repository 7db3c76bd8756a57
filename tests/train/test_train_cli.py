"""`openforgerl train` as a user runs it with its output in a file: a progress line per step while it
runs, and SIGTERM ends it cleanly (the engine's own process with it) with the line that says how to go on."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from openforgerl.train.reporting import StepProgress, fitting_columns, step_table

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")

CLI = str(Path(sys.executable).with_name("openforgerl"))


def _children(pid: int) -> set[int]:
    """Every live process whose parent is `pid` (read from /proc, as `ps` would)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _config(tmp_path: Path) -> Path:
    cfg = {
        "model": "tiny",
        "engine": {"kind": "local", "max_tokens": 32},
        "harness": "zero",
        "harness_options": {"zero": {"builtins": "", "max_turns": 2}},
        "sandbox": {"backend": "local"},
        "tasks": {"dir": "builtin:claw", "split": "train", "tags": ["sft"], "limit": 2},
        "rollout": {"group_size": 2, "budget_s": 60},
        "train": {"steps": 20, "tasks_per_step": 1, "checkpoint_every": 1},
        "eval": {"tasks": None},
        "out_dir": str(tmp_path / "run"),
    }
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.mark.slow
def test_train_to_a_file_shows_progress_and_sigterm_ends_it_cleanly(tmp_path: Path) -> None:
    config = _config(tmp_path)
    log = tmp_path / "train.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [CLI, "train", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "COLUMNS": "80"},
        )
    try:
        deadline = time.monotonic() + 600
        while "step 1/20" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()[-3000:]
            time.sleep(0.5)
        text = log.read_text()
        assert "step 1/20" in text, text[-3000:]
        assert proc.poll() is None, "the line came while the run was going, not with its end"
        line = next(x for x in text.splitlines() if "step 1/20" in x)
        assert "elapsed" in line and "eta" in line and "reward" in line
        children = _children(proc.pid)
        assert children, "the local engine runs in a process of its own"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert "interrupted (SIGTERM) after step" in text and "--resume" in text, text[-2000:]
    assert "Traceback" not in text
    assert "Unclosed" not in text and "never retrieved" not in text, text[-2000:]
    time.sleep(1)
    left = [pid for pid in children if _alive(pid)]
    assert not left, f"processes left running after SIGTERM: {left}"
    state = (tmp_path / "run" / "checkpoint" / "trainer_state.json").read_text()
    assert '"step": ' in state


def test_the_step_table_fits_an_80_column_terminal() -> None:
    from rich.console import Console

    rows = [
        {
            "step": i,
            "reward": 0.41234,
            "pass_rate": 0.375,
            "kept": 32,
            "dropped": 0,
            "trained_tokens": 123456,
            "loss": 0.0123,
            "step_s": 21.37,
            "policy_version": i + 1,
        }
        for i in range(3)
    ]
    console = Console(width=80, record=True, file=open(os.devnull, "w"))
    console.print(step_table(rows, width=80))
    text = console.export_text()
    assert "…" not in text, text
    assert max(len(x) for x in text.splitlines()) <= 80
    assert "reward" in text and "0.412" in text
    assert fitting_columns(200) == fitting_columns(10_000), "a wide terminal shows every column"
    # control: without a width the full table does not fit 80 columns and rich cuts its cells
    console = Console(width=80, record=True, file=open(os.devnull, "w"))
    console.print(step_table(rows))
    assert "…" in console.export_text()


def test_progress_line_says_eta_and_when_the_budget_ends_the_run_first() -> None:
    progress = StepProgress(total=60, first=0, budget_s=100.0, started=time.monotonic() - 50)
    line = progress.line({"step": 0, "reward": 0.5, "step_s": 25.0}, 1)
    assert line.startswith("step 1/60  reward 0.500") and "eta 24:35" in line
    assert "the budget ends the run first" in line
    assert "stopped the run after step 9 of 60" in progress.why_stopped(9, budget_hit=True)
    assert progress.why_stopped(60, budget_hit=False) == "all 60 steps done"
