"""`openforgerl rollout` end to end: shipped task, `zero` harness, scripted oracle engine, bwrap."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from openforgerl.cli.rollout import command

SUITE = Path(__file__).resolve().parents[2] / "src" / "openforgerl" / "envs" / "claw" / "suite" / "tasks"


def test_rollout_cli_writes_results_summary_and_call_log(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(command)
    out = tmp_path / "run"
    task = sorted(p for p in SUITE.iterdir() if p.name.startswith("easy-write-file"))[0]
    res = CliRunner().invoke(
        app,
        [
            "--tasks",
            str(task),
            "--harness",
            "zero",
            "--n",
            "2",
            "--out",
            str(out),
            "--max-running",
            "2",
            "--engine",
            "scripted",
        ],
    )
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 2 and {x["status"] for x in lines} == {"ok"}
    assert all(x["reward"] == 1.0 and x["in_batch"] for x in lines)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["in_batch"] == 2
    assert (out / "calls.db").exists()
    rid = lines[0]["rollout_id"]
    assert (out / "artifacts" / rid / "harness.stdout").exists()
