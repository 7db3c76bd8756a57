"""`openforgerl eval --tasks DIR --harness NAME --trials k`: pass@1, pass@k, pass^k per harness/service.

Runs through the orchestrator (real sandboxes, real harness CLIs) against a gateway: either a running
one (`--gateway URL`), or, with `--scripted-oracle RATE`, an in-process gateway over the scripted
engine replaying each task's gold actions (a demo/CI mode: it tests the plumbing, not a model).
Writes report.json, report.md and report.png under `--out`, and what `openforgerl analyze` / `view` read:
the rollout records (`rollouts.jsonl`), each rollout's artifacts and service audit log (`rollouts/<id>/`)
and, with the in-process gateway, its call log (`calls.db`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import typer

__all__ = ["command"]


def command(
    tasks: Path = typer.Option(..., help="task folder or a folder of task folders"),
    harness: list[str] = typer.Option(["zero"], help="harness name (repeatable)"),
    trials: int = typer.Option(3, help="k: rollouts per task and harness"),
    gateway: str | None = typer.Option(None, help="admin URL of a running gateway (token: $OPENFORGERL_ADMIN_TOKEN)"),
    out: Path = typer.Option(Path("eval-out"), help="report folder"),
    split: str | None = typer.Option(None, help="only tasks of this split (train/test)"),
    threshold: float = typer.Option(1.0, help="success = reward >= threshold (Claw-Eval uses 0.75)"),
    model: str = typer.Option("policy", help="model name given to the harness"),
    budget_s: float | None = typer.Option(None, help="override every task's budget"),
    scripted_oracle: float | None = typer.Option(None, help="demo: in-process scripted oracle, success rate"),
    seed: int = typer.Option(0, help="bootstrap / scripted-policy seed"),
) -> None:
    """Evaluate harnesses on a task suite and write the report."""
    from openforgerl.eval.report import build_report, to_markdown, write_report

    runtimes = _load(tasks, split)
    if not runtimes:
        from openforgerl.envs.flags import summarize_flags
        from openforgerl.envs.validate import load_runtimes

        why = summarize_flags(rt.task.flags for rt in load_runtimes(tasks)).line()
        raise typer.BadParameter(f"no runnable tasks under {tasks} ({why})")
    if gateway is None and scripted_oracle is None:
        raise typer.BadParameter("give --gateway URL or --scripted-oracle RATE")
    opts: dict[str, Any] = {"model": model, "budget_s": budget_s}
    _fresh_run_dir(out)
    opts["artifacts_dir"] = out / "rollouts"
    trial_list = asyncio.run(_run(runtimes, harness, trials, gateway, scripted_oracle, seed, opts, out))
    report = build_report(trial_list, trials, threshold=threshold, seed=seed)
    paths = write_report(report, out)
    typer.echo(to_markdown(report))
    typer.echo(f"wrote {', '.join(str(p) for p in paths.values())}")


def _fresh_run_dir(out: Path) -> None:
    """A re-run into the same folder starts a fresh record: the call log (and its WAL/journal files) and
    the rollout records would otherwise mix two runs."""
    import shutil

    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("calls.db*"), out / "rollouts.jsonl"]:
        old.unlink(missing_ok=True)
    shutil.rmtree(out / "rollouts", ignore_errors=True)


def _load(tasks: Path, split: str | None) -> list[Any]:
    from openforgerl.envs.validate import load_runtimes

    return [rt for rt in load_runtimes(tasks) if not rt.task.flags and (split is None or rt.task.meta.split == split)]


async def _run(runtimes: list[Any], harnesses: list[str], trials: int, gateway: str | None,
               scripted: float | None, seed: int, opts: dict[str, Any], out: Path) -> list[Any]:
    from openforgerl.eval.runner import run_eval
    from openforgerl.orchestrator.results import ResultSink
    from openforgerl.sandbox.local import LocalBackend

    backend = LocalBackend()
    closers: list[Any] = [backend]
    try:
        if gateway is None:
            access = (await _scripted_gateway(runtimes, scripted or 1.0, seed, closers, out)).access
        else:  # an admin URL; the token from $OPENFORGERL_ADMIN_TOKEN
            from openforgerl.gateway.access import GatewayAccess

            access = GatewayAccess.from_env(gateway)
        sink = ResultSink(out / "rollouts.jsonl")
        return await run_eval(runtimes, harnesses, gateway=access, backend=backend, trials=trials, sink=sink,
                              **opts)
    finally:
        for c in reversed(closers):
            await c.aclose()


async def _scripted_gateway(runtimes: list[Any], rate: float, seed: int, closers: list[Any], out: Path) -> Any:
    from openforgerl.engines.scripted import ScriptedEngine
    from openforgerl.envs.oracle_policy import oracle_policy
    from openforgerl.gateway.server import start_gateway
    from openforgerl.store.sqlite import SQLiteCallStore

    store = SQLiteCallStore(out / "calls.db")
    gw = await start_gateway(ScriptedEngine(oracle_policy(runtimes, success_rate=rate, seed=seed)), store)
    closers.extend([store, gw])
    return gw
