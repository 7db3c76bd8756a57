"""`openforgerl tasks synthesize` end to end (in-process CLI runner)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from openforgerl.envs.command import command


def test_the_synthesize_command_writes_tasks_and_a_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(command, ["synthesize", "--env", "claw", "--n", "30", "--out", str(out),
                                          "--seed", "4"])
    assert result.exit_code == 0, result.output
    assert "rejected: noop" in result.output and "kept" in result.output
    report = json.loads((out / "synth_report.json").read_text())
    assert report["kept"] == 30 and report["generated"] == 30 + sum(report["rejected"].values())
    assert len([p for p in out.iterdir() if p.is_dir()]) == 30


def test_an_unknown_env_is_an_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(command, ["synthesize", "--env", "nope", "--out", str(tmp_path)])
    assert result.exit_code != 0
