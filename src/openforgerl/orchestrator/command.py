"""`openforgerl rollout`: run n rollouts per task with one harness, show progress, write results.

Outputs under `--out`: `results.jsonl` (one `RolloutRecord` per attempt as the gateway stored it;
`in_batch` says whether it counts), `calls.db` (the call log, when the gateway is embedded), `summary.json` and
`artifacts/<rollout_id>/` (harness stdout/stderr and the adapter's output files).
Without `--gateway`, a gateway is started in-process on 127.0.0.1 in front of `--engine`: a model
(`tiny`, the default, `smollm2` or a model folder) served by the embedded local engine, as `train`
does; engine URLs; or `scripted` (the envs oracle policy, a test double for the model's decisions).
All of it is opened by the composition root, `openforgerl.stack.open_services`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shlex
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import typer

__all__ = ["command"]


def command(
    tasks: Path = typer.Option(..., "--tasks", help="a task folder or a folder of task folders"),
    harness: str = typer.Option("zero", "--harness", help="harness name (see `openforgerl harness list`)"),
    harness_command: str = typer.Option("", "--command", help="argv for `--harness command`"),
    n: int = typer.Option(8, "--n", help="rollouts per task (one GRPO group)"),
    backend: str = typer.Option("local", "--backend", help="local | podman | kubernetes"),
    engine: list[str] = typer.Option(["tiny"], "--engine",
                                     help="`scripted`, engine URL(s), or a model (tiny, smollm2, a model folder)"),
    gateway: str = typer.Option("", "--gateway", help="a running gateway's admin URL (token: $OPENFORGERL_ADMIN_TOKEN)"),
    out: Path = typer.Option(Path("runs/rollout"), "--out", help="results folder"),
    model: str = typer.Option("policy", "--model", help="model name given to the harness"),
    max_running: int = typer.Option(32, "--max-running", help="rollouts in flight"),
    max_booting: int = typer.Option(8, "--max-booting", help="sandbox boots in flight"),
    min_group: int = typer.Option(2, "--min-group", help="drop groups with fewer kept rollouts"),
    retries: int = typer.Option(-1, "--retries", help="infra retries per group (-1: n)"),
    timeout_policy: str = typer.Option("drop", "--timeout-policy", help="drop | zero"),
    budget: float = typer.Option(0.0, "--budget", help="override each task's budget (s); 0: task's own"),
    image: str = typer.Option("", "--image", help="image for podman/kubernetes tasks without one"),
    limit: int = typer.Option(0, "--limit", help="only the first N tasks (0: all)"),
    success_rate: float = typer.Option(1.0, "--success-rate", help="scripted engine: share of rollouts that try"),
    tools_dir: Path | None = typer.Option(None, "--tools-dir", help="harness CLIs (default $OPENFORGERL_TOOLS)"),
) -> None:
    """Run rollouts of tasks in sandboxes through the gateway; progress, summary, results on disk."""
    from openforgerl.orchestrator.config import OrchestratorConfig

    config = OrchestratorConfig(
        n=n, min_group_size=min_group, max_retries=None if retries < 0 else retries,
        timeout_policy=timeout_policy,  # type: ignore[arg-type]
        max_running=max_running, max_booting=max_booting, budget_s=budget or None, model=model,
        artifacts_dir=out / "artifacts")
    if tools_dir:
        config = dataclasses.replace(config, harness_cache=tools_dir)
    opts = {"tasks": tasks, "harness": harness, "harness_command": harness_command, "backend": backend,
            "engine": engine, "gateway": gateway, "out": out, "image": image, "limit": limit,
            "success_rate": success_rate}
    from openforgerl.sandbox.local import raise_nofile_limit

    raise_nofile_limit()
    out.mkdir(parents=True, exist_ok=True)
    counts = asyncio.run(_main(config, opts))
    raise typer.Exit(0 if counts.get("in_batch", 0) else 1)


async def _main(config: Any, opts: dict[str, Any]) -> Counter[str]:
    from openforgerl.orchestrator.batch import run_batch
    from openforgerl.orchestrator.results import ResultSink
    from openforgerl.orchestrator.view import ProgressView, write_summary

    out: Path = opts["out"]
    runtimes = _load_tasks(opts["tasks"], opts["limit"], opts["image"])
    harness = _harness(opts["harness"], opts["harness_command"])
    view = ProgressView(len(runtimes) * config.n)
    async with _stack(opts, runtimes, out) as (gateway, sbx):
        sink = ResultSink(out / "results.jsonl")
        with view:
            result = await run_batch(runtimes, harness, gateway=gateway, backend=sbx,
                                     config=config, sink=sink, on_done=view.done)
    view.print_summary(result)
    write_summary(out / "summary.json", result)
    return result.counts()


def _load_tasks(path: Path, limit: int, image: str) -> list[Any]:
    from openforgerl.tasks.flags import summarize_flags, unmet
    from openforgerl.tasks.loader import load_runtimes

    every = load_runtimes(path)
    left = [unmet(list(getattr(getattr(rt, "task", None), "flags", []))) for rt in every]
    runtimes = [rt for rt, flags in zip(every, left, strict=True) if not flags]  # a flagged task never runs
    summary = summarize_flags(left)
    if every and summary.runnable < summary.total:
        typer.echo(summary.line())
    if limit:
        runtimes = runtimes[:limit]
    if not runtimes:
        raise typer.BadParameter(f"no runnable tasks under {path}" + (f" ({summary.line()})" if every else ""))
    return [_with_image(rt, image) if image and rt.image is None else rt for rt in runtimes]


def _with_image(rt: Any, image: str) -> Any:
    """`rt` run in `image` (a frozen `TaskSpec` is copied; a runtime class takes the attribute)."""
    from dataclasses import replace

    from openforgerl.orchestrator.task_protocol import TaskSpec

    if isinstance(rt, TaskSpec):
        return replace(rt, image=image)
    rt.image = image
    return rt


def _harness(name: str, argv: str) -> Any:
    from openforgerl.harness.generic import CommandHarness
    from openforgerl.harness.registry import get_harness

    if name == "command":
        if not argv:
            raise typer.BadParameter("--harness command needs --command 'ARGV'")
        return CommandHarness(shlex.split(argv))
    return get_harness(name)


@contextlib.asynccontextmanager
async def _stack(opts: dict[str, Any], runtimes: list[Any], out: Path) -> AsyncIterator[tuple[Any, Any]]:
    """(gateway access, sandbox backend) from the composition root (`openforgerl.stack`): a running
    gateway (`--gateway`), else an in-process one before the `--engine` (model, URLs or `scripted`)."""
    from openforgerl.sandbox.registry import UnknownBackend
    from openforgerl.stack import engine_from_flag, open_services

    engine = None if opts["gateway"] else engine_from_flag(opts["engine"], runtimes,
                                                           success_rate=opts["success_rate"])
    try:
        services = open_services(out, engine, gateway_url=opts["gateway"] or None, backend=opts["backend"])
        async with services as opened:
            yield opened.access, opened.backend
    except UnknownBackend as exc:
        raise typer.BadParameter(str(exc)) from None
