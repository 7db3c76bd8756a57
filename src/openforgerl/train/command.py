"""`openforgerl train CONFIG`: the built-in GRPO loop on one machine."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer


def command(
    config: Annotated[Path, typer.Argument(help="Training config YAML (see examples/quickstart.yaml).")],
    out_dir: Annotated[Path | None, typer.Option(help="Override the config's out_dir.")] = None,
    steps: Annotated[int | None, typer.Option(help="Override the number of steps.")] = None,
    engine: Annotated[list[str] | None, typer.Option(help="Use these vLLM/SGLang URLs instead of the local engine.")] = None,
    resume: Annotated[bool, typer.Option(help="Continue from out_dir/checkpoint.")] = False,
) -> None:
    """Train a policy with GRPO inside a real harness (rollouts, reconstruction, update, weight sync)."""
    from openforgerl.extras import require_extra

    require_extra("train", "openforgerl train")
    from rich.console import Console
    from transformers.utils import logging as hf_logging

    from openforgerl.config import Config, ConfigError
    from openforgerl.train.trainer import Trainer

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # the step table is the progress display; no per-push bars
    flags = {"out_dir": None if out_dir is None else str(out_dir), "train.steps": steps,
             "engine.kind": "remote" if engine else None, "engine.urls": engine or None}
    try:
        cfg = Config.from_yaml(config, {k: v for k, v in flags.items() if v is not None})
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="CONFIG") from None
    console = Console()
    out = Path(cfg.out_dir)
    summary = asyncio.run(Trainer(cfg, out, console).run(resume=resume))
    console.print(f"[bold]done[/]: {summary.steps} steps, train reward (mean of first / last five steps) "
                  f"{_fmt(summary.first_reward)} -> {_fmt(summary.last_reward)}, "
                  f"held-out pass@1 {_fmt(summary.eval_before)} -> {_fmt(summary.eval_after)}"
                  + (f", train tasks pass@1 {_fmt(summary.train_before)} -> {_fmt(summary.train_after)}"
                     if summary.train_before is not None else ""))
    console.print(f"metrics: {out / 'metrics.jsonl'}  curve: {summary.curve}  tensorboard: {out / 'tensorboard'}")


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"
