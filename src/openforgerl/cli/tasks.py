"""`openforgerl tasks ...`: list, validate, import and generate task folders."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer

__all__ = ["command"]

command = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Task folders: list, validate (oracle → 1, no-op → 0), import, generate, synthesize.",
)


@command.command("list")
def list_tasks(path: Path = typer.Argument(..., help="a task folder or a folder of them")) -> None:
    """One line per task: id, split, difficulty, services, flags."""
    from openforgerl.tasks.format import find_tasks, load_task
    from openforgerl.tasks.suites import resolve_task_root

    for folder in find_tasks(resolve_task_root(path)):
        t = load_task(folder)
        flags = ",".join(t.flags) or "-"
        typer.echo(
            f"{t.task_id}\t{t.meta.split}\t{t.meta.difficulty}\t{','.join(t.meta.services) or '-'}\t{flags}"
        )


@command.command("validate")
def validate(
    path: Path = typer.Argument(..., help="a task folder or a folder of them"),
    concurrency: int = typer.Option(8, help="sandboxes at once"),
    json_out: Path | None = typer.Option(None, "--json", help="write results here"),
) -> None:
    """Run every task's oracle and a no-op in real sandboxes; fail unless oracle = 1 and no-op = 0.

    Flagged tasks (and runnable ones without an oracle) are not run; their reasons are counted, and
    the command fails when nothing could be validated."""
    from openforgerl.tasks.flags import summarize_flags
    from openforgerl.tasks.loader import load_runtimes
    from openforgerl.tasks.validate import validate_tasks

    every = load_runtimes(path)
    summary = summarize_flags(rt.task.flags for rt in every)
    runnable = [rt for rt in every if not rt.task.flags]
    runtimes = [rt for rt in runnable if not rt.task.meta.no_oracle]
    results = asyncio.run(validate_tasks(runtimes, concurrency=concurrency)) if runtimes else []
    for r in results:
        status = "ok  " if r.ok else "FAIL"
        typer.echo(
            f"{status} {r.task_id}  noop={r.noop_reward} oracle={r.oracle_reward} {r.seconds:.1f}s {r.error}"
        )
    bad = [r for r in results if not r.ok]
    typer.echo(
        f"{len(results) - len(bad)}/{len(results)} tasks valid" if results else "no task could be validated"
    )
    if summary.runnable < summary.total:
        typer.echo(summary.line())
    for rt in runnable:
        if rt.task.meta.no_oracle:
            typer.echo(f"skipped {rt.task_id}: no oracle ({rt.task.meta.no_oracle})")
    if json_out:
        json_out.write_text(json.dumps([r.__dict__ for r in results], indent=1))
    raise typer.Exit(1 if bad or not results else 0)


@command.command("import")
def import_tasks(
    source: Path = typer.Argument(..., help="folder or file in a foreign format"),
    out: Path = typer.Argument(..., help="where to write our task folders"),
    format: str = typer.Option(
        "auto", help="claw-eval | qwenclawbench | tau2 | webvoyager | online-mind2web | osworld | auto"
    ),
    user_engine: str | None = typer.Option(
        None, help="URL of the engine that plays the simulated user of multi-turn tasks"
    ),
) -> None:
    """Convert Claw-Eval / QwenClawBench / tau2 tasks into task folders (flags what cannot run offline)."""
    from openforgerl.tasks.flags import summarize_flags
    from openforgerl.tasks.format import load_task
    from openforgerl.tasks.importing import importer_for

    importer = importer_for(source, format)
    written = importer.run(source, out, user_engine)
    typer.echo(f"wrote {len(written)} task folders to {out}")
    tasks = [load_task(w) for w in written]
    extra = importer.summary([t.meta.tags for t in tasks])
    typer.echo(summarize_flags(t.flags for t in tasks).line("imported") + (f"; {extra}" if extra else ""))


@command.command("generate")
def generate(out: Path | None = typer.Argument(None, help="default: the shipped suite folder")) -> None:
    """Regenerate the shipped Claw suite."""
    from openforgerl.env.plugins import GENERATORS

    gen = GENERATORS.get("claw")

    paths = gen(out) if out else gen()
    typer.echo(f"wrote {len(paths)} tasks")


@command.command("synthesize")
def synthesize(
    env: str = typer.Option(
        "claw",
        help=(
            "claw, claw-family (the sft family's phrasing), or a "
            "file: .py (ENV), .toml, MCP tools/list .json, OpenAPI"
        ),
    ),
    n: int = typer.Option(100, help="how many validated tasks to keep"),
    out: Path = typer.Option(..., help="where to write the task folders (+ synth_report.json)"),
    seed: int = typer.Option(0),
    paraphrase_engine: str | None = typer.Option(
        None, help="OpenAI-compatible URL that rewords instructions"
    ),
    paraphrase_model: str = typer.Option("", help="model name sent to the paraphrase engine"),
    sandbox: int = typer.Option(0, help="also run this many kept tasks through the sandboxed validate"),
    calibrate: bool = typer.Option(
        False,
        help="then run the current policy k times per kept task and record each pass rate in its task.toml",
    ),
    k: int | None = typer.Option(
        None,
        "--group-size",
        "--k",
        help="--calibrate: rollouts per task (default 4; the config's group_size)",
    ),
    gateway: str | None = typer.Option(
        None,
        help="--calibrate: admin URL of a running gateway (token: "
        "$OPENFORGERL_ADMIN_TOKEN); default: open the embedded stack",
    ),
    model: str | None = typer.Option(
        None, help="--calibrate without --gateway: tiny (default) or a model dir"
    ),
    config: Path | None = typer.Option(
        None,
        help="--calibrate: a training config whose model, engine and harness settings the policy runs with",
    ),
) -> None:
    """Compose tasks from an environment's tools, validate each in-process, dedup, write and report."""
    from openforgerl.cli.synth import CalibrateOptions, run_synthesize

    raise typer.Exit(
        run_synthesize(
            env,
            n,
            out,
            seed,
            paraphrase_engine,
            paraphrase_model,
            sandbox,
            typer.echo,
            CalibrateOptions(calibrate, k, gateway, model, config),
        )
    )


@command.command("calibrate")
def calibrate(
    path: Path = typer.Argument(..., help="a task folder or a folder of them"),
    gateway: str = typer.Option(..., help="admin URL of a running gateway (token: $OPENFORGERL_ADMIN_TOKEN)"),
    harness: str = typer.Option("zero", help="harness the policy runs in"),
    k: int = typer.Option(
        4, "--group-size", "--k", help="rollouts per task (the config's group_size; --k kept)"
    ),
    model: str = typer.Option("policy", help="model name given to the harness"),
) -> None:
    """Run the policy behind GATEWAY k times per task; write each pass rate into its task.toml."""
    from openforgerl.config import load_config
    from openforgerl.errors import UserError
    from openforgerl.gateway.access import GatewayAccess
    from openforgerl.synth.calibrate import run_calibration

    try:
        access = GatewayAccess.from_env(gateway)
    except ValueError as exc:  # no admin token: the user's to fix
        raise UserError(str(exc)) from None
    config = load_config(  # the one schema's settings: k is eval.group_size, model is rollout.model_name
        {"harness": harness, "rollout": {"model_name": model}, "eval": {"group_size": k}},
        source="tasks calibrate",
    )
    results = run_calibration(path, access, config.eval_orchestrator(), harness=harness)
    rates = [c.pass_rate for c in results if c.pass_rate is not None]
    inside = sum(1 for r in rates if 0.0 < r < 1.0)
    typer.echo(
        f"calibrated {len(results)} tasks with {harness} (k={k}): {inside} with 0 < pass rate < 1, "
        f"{sum(r == 0.0 for r in rates)} never solved, {sum(r == 1.0 for r in rates)} always solved"
    )
