"""`openforgerl rollout`: run a group of rollouts per task with one harness, show progress, write results.

Settings come from the one config schema (`openforgerl.config`): `--config FILE` (a YAML document, e.g.
a training config) with the flags given on top; every flag names a key of it (`--group-size` is
`rollout.group_size`, `--backend` is `sandbox.backend`, ...).

Outputs under `--out`: `results.jsonl` (one `RolloutRecord` per attempt as the gateway stored it;
`in_batch` says whether it counts), `calls.db` (the call log, when the gateway is embedded), `summary.json`
and `artifacts/<rollout_id>/` (harness stdout/stderr and the adapter's output files).
Without `--gateway`, a gateway is started in-process on 127.0.0.1 in front of `--engine`: a model
(`tiny`, the default, `smollm2`, `smollm2-tools` or a model folder) served by the embedded local engine, as
`train` does; engine URLs; or `scripted` (the envs oracle policy, a test double for the model's decisions).
All of it is opened by the composition root, `openforgerl.stack.open_services`.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import typer

__all__ = ["command"]


def command(
    tasks: Path = typer.Option(..., "--tasks", help="a task folder or a folder of task folders"),
    config: Path | None = typer.Option(
        None, "--config", help="a config YAML (openforgerl.config); flags win"
    ),
    harness: str | None = typer.Option(
        None, "--harness", help="harness name (see `openforgerl harness list`; default zero)"
    ),
    harness_command: str = typer.Option("", "--command", help="argv for `--harness command`"),
    group_size: int | None = typer.Option(
        None, "--group-size", "--n", help="rollouts per task: one GRPO group (default 8)"
    ),
    backend: str | None = typer.Option(None, "--backend", help="local (default) | podman | kubernetes"),
    engine: list[str] | None = typer.Option(
        None,
        "--engine",
        help="`scripted`, engine URL(s), or a model "
        "(tiny, the default, smollm2, smollm2-tools, a model folder)",
    ),
    gateway: str = typer.Option(
        "", "--gateway", help="a running gateway's admin URL (token: $OPENFORGERL_ADMIN_TOKEN)"
    ),
    out: Path = typer.Option(Path("runs/rollout"), "--out", help="results folder"),
    model_name: str | None = typer.Option(
        None, "--model-name", help="model name given to the harness (policy)"
    ),
    max_running: int | None = typer.Option(None, "--max-running", help="rollouts in flight (32)"),
    max_booting: int | None = typer.Option(None, "--max-booting", help="sandbox boots in flight (16)"),
    min_group_size: int | None = typer.Option(
        None, "--min-group-size", help="drop groups with fewer kept rollouts (2)"
    ),
    retries: int | None = typer.Option(
        None, "--retries", help="infra retries per group (default: the group size)"
    ),
    timeout_policy: str | None = typer.Option(None, "--timeout-policy", help="drop (default) | zero"),
    budget_s: float | None = typer.Option(None, "--budget-s", help="override each task's budget (s)"),
    image: str | None = typer.Option(None, "--image", help="image for podman/kubernetes tasks without one"),
    limit: int = typer.Option(0, "--limit", help="only the first N tasks (0: all)"),
    success_rate: float = typer.Option(
        1.0, "--success-rate", help="scripted engine: share of rollouts that try"
    ),
    tools_dir: Path | None = typer.Option(
        None, "--tools-dir", help="harness CLIs (default $OPENFORGERL_TOOLS)"
    ),
) -> None:
    """Run rollouts of tasks in sandboxes through the gateway; progress, summary, results on disk."""
    from openforgerl.config import from_flags
    from openforgerl.stack import engine_from_flag

    scripted = engine == ["scripted"]
    flags: dict[str, object] = {
        "harness": harness,
        "rollout.group_size": group_size,
        "sandbox.backend": backend,
        "rollout.model_name": model_name,
        "rollout.max_running": max_running,
        "rollout.max_booting": max_booting,
        "rollout.min_group_size": min_group_size,
        "rollout.retries": retries,
        "rollout.timeout_policy": timeout_policy,
        "rollout.budget_s": budget_s,
        "sandbox.image": image,
        "sandbox.tools_dir": tools_dir and str(tools_dir),
        "out_dir": str(out),
        **(engine_from_flag(engine) if engine and not scripted else {}),
    }
    cfg = from_flags(config, flags)
    opts = {
        "tasks": tasks,
        "harness_command": harness_command,
        "gateway": gateway,
        "limit": limit,
        "success_rate": success_rate,
        "scripted": scripted,
    }
    from openforgerl.sandbox.local import raise_nofile_limit

    raise_nofile_limit()
    Path(cfg.out_dir).mkdir(parents=True, exist_ok=True)
    counts = asyncio.run(_main(cfg, opts))
    raise typer.Exit(0 if counts.get("in_batch", 0) else 1)


async def _main(cfg: Any, opts: dict[str, Any]) -> Counter[str]:
    from openforgerl.orchestrator.batch import run_batch
    from openforgerl.orchestrator.results import ResultSink
    from openforgerl.orchestrator.view import ProgressView, write_summary
    from openforgerl.sandbox.podman import in_image_paths

    out = Path(cfg.out_dir)
    python, tools = in_image_paths(cfg.sandbox.backend, cfg.sandbox.tools_dir)
    config = cfg.orchestrator(artifacts_dir=out / "artifacts", **({"harness_cache": tools} if tools else {}))
    runtimes = _load_tasks(opts["tasks"], opts["limit"], cfg.sandbox.image or "", python)
    harness = _harness(cfg.harness, opts["harness_command"], python)
    view = ProgressView(len(runtimes) * config.group_size)
    async with _stack(cfg, opts, runtimes) as (gateway, sbx):
        sink = ResultSink(out / "results.jsonl")
        with view:
            result = await run_batch(
                runtimes, harness, gateway=gateway, backend=sbx, config=config, sink=sink, on_done=view.done
            )
    view.print_summary(result)
    write_summary(out / "summary.json", result)
    return result.counts()


def _load_tasks(path: Path, limit: int, image: str, python: str | None = None) -> list[Any]:
    from openforgerl.tasks.flags import summarize_flags, unmet
    from openforgerl.tasks.loader import load_runtimes

    every = load_runtimes(path, **({"python": python} if python else {}))
    left = [unmet(list(getattr(getattr(rt, "task", None), "flags", []))) for rt in every]
    runtimes = [rt for rt, flags in zip(every, left, strict=True) if not flags]  # a flagged task never runs
    summary = summarize_flags(left)
    if every and summary.runnable < summary.total:
        typer.echo(summary.line())
    if limit:
        runtimes = runtimes[:limit]
    if not runtimes:
        raise typer.BadParameter(
            f"no runnable tasks under {path}" + (f" ({summary.line()})" if every else "")
        )
    return [_with_image(rt, image) if image and rt.image is None else rt for rt in runtimes]


def _with_image(rt: Any, image: str) -> Any:
    """`rt` run in `image` (a frozen `TaskSpec` is copied; a runtime class takes the attribute)."""
    from dataclasses import replace

    from openforgerl.env.contract import TaskSpec

    if isinstance(rt, TaskSpec):
        return replace(rt, image=image)
    rt.image = image
    return rt


def _harness(name: str | dict[str, float], argv: str, python: str | None = None) -> Any:
    from openforgerl.harness.generic import CommandHarness
    from openforgerl.harness.registry import get_harness

    if not isinstance(name, str):
        raise typer.BadParameter("rollout runs one harness: give `harness` a name, not a mix")
    if name == "command":
        if not argv:
            raise typer.BadParameter("--harness command needs --command 'ARGV'")
        return CommandHarness(shlex.split(argv))
    if python and name == "zero":
        return get_harness(name, python=python)
    return get_harness(name)


@contextlib.asynccontextmanager
async def _stack(cfg: Any, opts: dict[str, Any], runtimes: list[Any]) -> AsyncIterator[tuple[Any, Any]]:
    """(gateway access, sandbox backend) from the composition root (`openforgerl.stack`): a running
    gateway (`--gateway`), else an in-process one before the configured engine (or the scripted oracle)."""
    from openforgerl.stack import open_services, scripted_engine

    engine = scripted_engine(runtimes, success_rate=opts["success_rate"]) if opts["scripted"] else None
    async with open_services(
        Path(cfg.out_dir), cfg, engine=engine, gateway_url=opts["gateway"] or None
    ) as opened:
        yield opened.access, opened.backend
