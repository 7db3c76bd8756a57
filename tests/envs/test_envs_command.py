"""`openforgerl tasks ...` and `openforgerl eval ...` as a user runs them (typer, real sandboxes)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from openforgerl.cli.eval import command as eval_command
from openforgerl.cli.tasks import command as tasks_command

SUITE = Path(__file__).resolve().parents[2] / "src/openforgerl/envs/claw/suite/tasks"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def _two_tasks(tmp_path: Path) -> Path:
    for name in ("easy-write-file-01", "todo-complete-02"):
        shutil.copytree(SUITE / name, tmp_path / "tasks" / name)
    return tmp_path / "tasks"


def test_tasks_list(tmp_path: Path) -> None:
    res = CliRunner().invoke(tasks_command, ["list", str(_two_tasks(tmp_path))])
    assert res.exit_code == 0, res.output
    assert "claw/easy-write-file-01\ttrain\teasy\tfiles\t-" in res.output


@needs_bwrap
def test_tasks_validate_passes_and_fails(tmp_path: Path) -> None:
    tasks = _two_tasks(tmp_path)
    out = tmp_path / "v.json"
    res = CliRunner().invoke(tasks_command, ["validate", str(tasks), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "2/2 tasks valid" in res.output and len(json.loads(out.read_text())) == 2
    solve = tasks / "todo-complete-02" / "solution" / "solve.sh"
    solve.write_text(solve.read_text().replace("--id t2", "--id t3"))  # a wrong oracle must be caught
    res = CliRunner().invoke(tasks_command, ["validate", str(tasks)])
    assert res.exit_code == 1 and "FAIL claw/todo-complete-02" in res.output


@needs_bwrap
def test_eval_command_writes_the_report(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(eval_command)
    tasks = tmp_path / "one"
    shutil.copytree(SUITE / "easy-todo-add-02", tasks / "easy-todo-add-02")
    res = CliRunner().invoke(
        app,
        [
            "--tasks",
            str(tasks),
            "--harness",
            "zero",
            "--trials",
            "2",
            "--scripted-oracle",
            "1.0",
            "--out",
            str(tmp_path / "report"),
        ],
    )
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["harnesses"]["zero"]["pass_hat"]["2"]["value"] == 1.0
    assert (tmp_path / "report" / "report.md").is_file() and (tmp_path / "report" / "report.png").is_file()
