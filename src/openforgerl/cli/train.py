"""`openforgerl train CONFIG`: the built-in GRPO loop on one machine."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Annotated, Any

import typer


def command(
    config: Annotated[Path, typer.Argument(help="Training config YAML (see examples/quickstart.yaml).")],
    out_dir: Annotated[Path | None, typer.Option(help="Override the config's out_dir.")] = None,
    steps: Annotated[int | None, typer.Option(help="Override the number of steps.")] = None,
    engine: Annotated[
        list[str] | None, typer.Option(help="Use these vLLM/SGLang URLs instead of the local engine.")
    ] = None,
    resume: Annotated[bool, typer.Option(help="Continue from out_dir/checkpoint.")] = False,
) -> None:
    """Train a policy with GRPO inside a real harness (rollouts, reconstruction, update, weight sync)."""
    from openforgerl.extras import require_extra

    require_extra("train", "openforgerl train")
    from rich.console import Console
    from transformers.utils import logging as hf_logging

    from openforgerl.compose.train import open_train_services, trainer_for
    from openforgerl.config import Config

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # the step table is the progress display; no per-push bars
    flags = {
        "out_dir": None if out_dir is None else str(out_dir),
        "train.steps": steps,
        "engine.kind": "remote" if engine else None,
        "engine.urls": engine or None,
    }
    cfg = Config.from_yaml(
        config, {k: v for k, v in flags.items() if v is not None}
    )  # a ConfigError: one line
    console = Console()
    out = Path(cfg.out_dir)
    trainer = trainer_for(cfg, out, console)
    terminated: list[int] = []
    try:
        summary = asyncio.run(
            _until_signalled(trainer.run(open_train_services(cfg, out), resume=resume), terminated)
        )
    except (KeyboardInterrupt, asyncio.CancelledError):
        again = f"openforgerl train {config}" + (f" --out-dir {out_dir}" if out_dir is not None else "")
        console.print(
            _interrupted(trainer, again, "SIGTERM" if terminated else "Ctrl-C"),
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(143 if terminated else 130) from None
    console.print(f"stopped: {summary.stopped}", highlight=False, soft_wrap=True)
    console.print(
        f"[bold]done[/]: {summary.steps} steps, train reward (mean of first / last five steps) "
        f"{_fmt(summary.first_reward)} -> {_fmt(summary.last_reward)}, "
        f"held-out pass@1 {_fmt(summary.eval_before)} -> {_fmt(summary.eval_after)}"
        + (
            f", train tasks pass@1 {_fmt(summary.train_before)} -> {_fmt(summary.train_after)}"
            if summary.train_before is not None
            else ""
        ),
        soft_wrap=True,
    )
    console.print(
        f"metrics: {out / 'metrics.jsonl'}  curve: {summary.curve}  tensorboard: {out / 'tensorboard'}",
        soft_wrap=True,
    )  # whole lines in a log file, where rich would wrap at 80 columns


async def _until_signalled(run: Any, terminated: list[int]) -> Any:
    """Run the trainer; SIGTERM cancels it like Ctrl-C does, so every service it opened (the engine's own
    process among them) is closed on the way out instead of left running."""
    task = asyncio.ensure_future(run)

    def on_term() -> None:
        terminated.append(signal.SIGTERM)
        task.cancel()

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, on_term)
    loop.set_exception_handler(_quiet_cancellations)
    return await task


def _quiet_cancellations(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Report what the loop reports, except a CancelledError nobody read: that is the stop the user asked
    for, reaching work the run had in flight (a gather cancelled through `wait_for` keeps its
    CancelledError as an exception, and the loop's shutdown prints it as a traceback into the run's log)."""
    if isinstance(context.get("exception"), asyncio.CancelledError):
        return
    loop.default_exception_handler(context)


def _interrupted(trainer: Any, again: str, how: str) -> str:
    done, total = trainer.done, trainer.plan.train.steps
    if trainer.saved_step:
        return (
            f"interrupted ({how}) after step {done} of {total}; the checkpoint continues at step "
            f"{trainer.saved_step}: resume with `{again} --resume`"
        )
    return (
        f"interrupted ({how}) after step {done} of {total}; no "
        f"checkpoint was written yet: start again with `{again}`"
    )


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"
