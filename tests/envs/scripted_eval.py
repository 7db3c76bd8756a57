"""`openforgerl eval` in process, the scripted engine playing a given policy (the model's decisions are the
only double): what the imported-benchmark tests run their tasks through."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from openforgerl.engines.chat_format import format_tool_call

Policy = Callable[[Any], str]


def bash_steps(steps: list[str], seen: list[str] | None = None, final: str = "Done.") -> Policy:
    """A policy that runs `steps` as `bash` calls, one per turn, then answers `final`; `seen` gets the
    tool results (what reached the agent)."""

    def policy(turn: Any) -> str:
        if not turn.tools:
            return "title"
        done = [m for m in turn.messages if m.get("role") == "tool"]
        if seen is not None:
            seen.extend(str(m.get("content")) for m in done)
        return format_tool_call("bash", {"command": steps[len(done)]}) if len(done) < len(steps) else final

    return policy


def run_eval(
    tasks: Path,
    out: Path,
    monkeypatch: pytest.MonkeyPatch,
    policy: Policy,
    *extra: str,
    harness: str = "zero",
) -> list[dict[str, Any]]:
    """One trial of every task under `tasks` with `harness`; the rollout records (`out/rollouts.jsonl`)."""
    import openforgerl.envs.claw.oracle_policy as op
    from openforgerl.cli.eval import command as eval_command

    monkeypatch.setattr(op, "oracle_policy", lambda runtimes, **kw: policy)
    app = typer.Typer()
    app.command()(eval_command)
    res = CliRunner().invoke(
        app,
        [
            "--tasks",
            str(tasks),
            "--harness",
            harness,
            "--trials",
            "1",
            "--scripted-oracle",
            "1.0",
            "--out",
            str(out),
            *extra,
        ],
    )
    assert res.exit_code == 0, (res.output, res.exception)
    return [json.loads(x) for x in (out / "rollouts.jsonl").read_text().splitlines()]
