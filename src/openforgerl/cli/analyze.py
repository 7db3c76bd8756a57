"""`openforgerl analyze RUN [RUN ...]`: behaviour metrics per run/checkpoint × harness × task family.

Writes analytics.json, analytics.md, analytics.png and per-rollout rollouts.jsonl under `--out`.
"""

from __future__ import annotations

from pathlib import Path

import typer

__all__ = ["command"]


def command(
    runs: list[Path] = typer.Argument(..., help="run directories (train --out-dir or eval --out)"),
    out: Path = typer.Option(Path("analytics-out"), help="report folder"),
    tasks: list[Path] = typer.Option(
        [], help="task folders to read gold actions from (default: builtin claw)"
    ),
    kind: str = typer.Option("auto", help="rollouts to use: eval, train, all, or auto (eval if present)"),
    by_version: bool = typer.Option(True, help="split each run by policy version (start vs end checkpoint)"),
    seed: int = typer.Option(0, help="bootstrap seed"),
    resamples: int = typer.Option(1000, help="bootstrap resamples"),
) -> None:
    """Behaviour analytics (self-verification, tool coverage, error recovery...) comparing runs."""
    from openforgerl.analytics.report import analyze, to_markdown, write_report
    from openforgerl.analytics.rundir import RunDir, TaskIndex

    for run in runs:
        if not run.is_dir():
            raise typer.BadParameter(f"{run} is not a folder")
    labels = _labels(runs)
    index = TaskIndex(list(tasks)) if tasks else TaskIndex.default()
    summary, behaviours = analyze(
        [RunDir(r, lab) for r, lab in zip(runs, labels, strict=True)],
        index,
        kind=kind,
        by_version=by_version,
        seed=seed,
        resamples=resamples,
    )
    if not behaviours:
        raise typer.BadParameter("no scored rollouts found in the given runs")
    paths = write_report(summary, behaviours, out)
    typer.echo(to_markdown(summary))
    typer.echo(f"wrote {', '.join(str(p) for p in paths.values())}")


def _labels(runs: list[Path]) -> list[str]:
    names = [r.resolve().name for r in runs]
    return [n if names.count(n) == 1 else f"{n}#{i}" for i, n in enumerate(names)]
