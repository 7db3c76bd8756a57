"""`openforgerl tasks synthesize` end to end (in-process CLI runner)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openforgerl.cli.tasks import command


def test_the_synthesize_command_writes_tasks_and_a_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        command, ["synthesize", "--env", "claw", "--n", "30", "--out", str(out), "--seed", "4"]
    )
    assert result.exit_code == 0, result.output
    assert "rejected: noop" in result.output and "kept" in result.output
    report = json.loads((out / "synth_report.json").read_text())
    assert report["kept"] == 30 and report["generated"] == 30 + sum(report["rejected"].values())
    assert len([p for p in out.iterdir() if p.is_dir()]) == 30


def test_an_unknown_env_is_an_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(command, ["synthesize", "--env", "nope", "--out", str(tmp_path)])
    assert result.exit_code != 0


ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None):
    import os
    import subprocess
    import sys

    environ = {
        k: v for k, v in os.environ.items() if k not in ("OPENFORGERL_DEBUG", "OPENFORGERL_ADMIN_TOKEN")
    }
    return subprocess.run(
        [str(Path(sys.executable).with_name("openforgerl")), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=str(cwd),
        env=environ | (env or {}),
    )


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["--k", "2"], "--group-size: only meaningful with --calibrate"),
        (["--model", "tiny", "--gateway", "http://127.0.0.1:9"], "only meaningful with --calibrate"),
        (
            ["--calibrate", "--model", "tiny", "--gateway", "http://127.0.0.1:9"],
            "with --gateway the policy is the one",
        ),
        (["--calibrate", "--group-size", "0"], "--group-size 0: need at least 1"),
        (["--calibrate", "--model", "no/such/model"], "--model no/such/model has no config.json"),
        (["--calibrate", "--config", "nope.yaml"], "--config nope.yaml: no such training config"),
        (["--calibrate", "--gateway", "http://127.0.0.1:9"], "no admin token for http://127.0.0.1:9"),
    ],
    ids=["k-alone", "model-alone", "model-and-gateway", "k-zero", "bad-model", "bad-config", "no-token"],
)
def test_calibrate_flag_mistakes_are_one_error_line(tmp_path: Path, args: list[str], hint: str) -> None:
    out = _cli(
        "tasks",
        "synthesize",
        "--env",
        "claw-family",
        "--n",
        "2",
        "--out",
        str(tmp_path / "o"),
        *args,
        cwd=tmp_path,
    )
    text = out.stdout + out.stderr
    assert out.returncode == 2 and "Traceback" not in text, text[-3000:]
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and hint in errors[0], text[-2000:]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_synthesize_calibrate_opens_the_embedded_stack(tmp_path: Path) -> None:
    """No --gateway: the tiny policy on a local engine, k real rollouts per kept task in sandboxes."""
    import tomllib

    out = tmp_path / "o"
    result = _cli(
        "tasks",
        "synthesize",
        "--env",
        "claw-family",
        "--n",
        "3",
        "--seed",
        "5",
        "--out",
        str(out),
        "--calibrate",
        "--k",
        "2",
        "--config",
        str(ROOT / "examples" / "quickstart.yaml"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert "calibrated 3 tasks on the embedded stack (k=2)" in result.stdout
    report = json.loads((out / "synth_report.json").read_text())["calibration"]
    rates = []
    for task in (p for p in out.iterdir() if p.is_dir()):
        cal = tomllib.loads((task / "task.toml").read_text())["metadata"]["calibration"]
        assert (
            cal["k"] == 2 and cal["scored"] == 2 and cal["policy"] == "tiny@embedded"
        )  # real rollouts, no infra
        rates.append(cal["pass_rate"])
    assert report["scored"] == 3 and report["in_band"] == sum(1 for r in rates if 0 < r < 1)
    assert report["mean_pass_rate"] == round(sum(rates) / 3, 4)
