"""`openforgerl tasks ...`: list, validate, import and generate task folders."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import typer

__all__ = ["command"]

command = typer.Typer(no_args_is_help=True, add_completion=False,
                      help="Task folders: list, validate (oracle → 1, no-op → 0), import, generate.")


@command.command("list")
def list_tasks(path: Path = typer.Argument(..., help="a task folder or a folder of them")) -> None:
    """One line per task: id, split, difficulty, services, flags."""
    from openforgerl.envs.task import find_tasks, load_task

    for folder in find_tasks(path):
        t = load_task(folder)
        flags = ",".join(t.flags) or "-"
        typer.echo(f"{t.task_id}\t{t.meta.split}\t{t.meta.difficulty}\t{','.join(t.meta.services) or '-'}\t{flags}")


@command.command("validate")
def validate(path: Path = typer.Argument(..., help="a task folder or a folder of them"),
             concurrency: int = typer.Option(8, help="sandboxes at once"),
             json_out: Path | None = typer.Option(None, "--json", help="write results here")) -> None:
    """Run every task's oracle and a no-op in real sandboxes; fail unless oracle = 1 and no-op = 0."""
    from openforgerl.envs.validate import load_runtimes, validate_tasks

    runtimes = [rt for rt in load_runtimes(path) if not rt.task.flags]
    results = asyncio.run(validate_tasks(runtimes, concurrency=concurrency))
    for r in results:
        status = "ok  " if r.ok else "FAIL"
        typer.echo(f"{status} {r.task_id}  noop={r.noop_reward} oracle={r.oracle_reward} {r.seconds:.1f}s {r.error}")
    bad = [r for r in results if not r.ok]
    typer.echo(f"{len(results) - len(bad)}/{len(results)} tasks valid")
    if json_out:
        json_out.write_text(json.dumps([r.__dict__ for r in results], indent=1))
    raise typer.Exit(1 if bad else 0)


@command.command("import")
def import_tasks(source: Path = typer.Argument(..., help="folder or file in a foreign format"),
                 out: Path = typer.Argument(..., help="where to write our task folders"),
                 format: str = typer.Option("auto", help="claw-eval | qwenclawbench | tau2 | auto")) -> None:
    """Convert Claw-Eval / QwenClawBench / tau2 tasks into task folders (flags what cannot run offline)."""
    from openforgerl.envs.importers import import_any

    written = import_any(source, out, format)
    typer.echo(f"wrote {len(written)} task folders to {out}")


@command.command("generate")
def generate(out: Path | None = typer.Argument(None, help="default: the shipped suite folder")) -> None:
    """Regenerate the shipped Claw suite."""
    from openforgerl.envs.suites.generate import generate as gen

    paths = gen(out) if out else gen()
    typer.echo(f"wrote {len(paths)} tasks")
