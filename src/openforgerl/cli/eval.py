"""`openforgerl eval --tasks DIR --harness NAME --group-size k`: pass@1, pass@k, pass^k per harness/service.

Settings come from the one config schema (`openforgerl.config`): `--config FILE` with the flags given on
top (`--group-size`, alias `--trials`, is `eval.group_size`; `--budget-s` is `rollout.budget_s`).

Runs through the orchestrator (real sandboxes, real harness CLIs) against a gateway: a running one
(`--gateway URL`); with `--scripted-oracle RATE`, an in-process gateway over the scripted engine
replaying each task's gold actions (a demo/CI mode: it tests the plumbing, not a model); else the
embedded default stack, the local engine serving `--engine` (default `tiny`) behind an in-process
gateway. All three are opened by the composition root, `openforgerl.stack.open_services`.

Host side (tasks/host_side.py): every runtime's verifier gets the rollout's transcript, built from the
call log; `--judge-engine URL` scores LLM-judged parts, `--user-engine URL` plays the simulated user of
multi-turn tasks (env/user_sim.py). Both are off by default; tasks that need them stay flagged, and the
counts by reason are printed. The report follows each benchmark's scoring rule (eval/scoring.py).
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
    config: Path | None = typer.Option(None, help="a config YAML (openforgerl.config); flags win"),
    harness: list[str] | None = typer.Option(
        None, help="harness name (repeatable; default: the config's, zero)"
    ),
    group_size: int | None = typer.Option(
        None, "--group-size", "--trials", help="k: rollouts per task and harness (eval.group_size, default 3)"
    ),
    gateway: str | None = typer.Option(
        None, help="admin URL of a running gateway (token: $OPENFORGERL_ADMIN_TOKEN)"
    ),
    engine: str | None = typer.Option(
        None,
        help="without --gateway / --scripted-oracle: the local engine's model "
        "(tiny, the default, smollm2 or a model folder) behind an in-process gateway, "
        "or an engine URL",
    ),
    out: Path = typer.Option(Path("eval-out"), help="report folder"),
    split: str | None = typer.Option(None, help="only tasks of this split (train/test)"),
    threshold: float | None = typer.Option(
        None,
        help="success = reward >= threshold (default: each "
        "benchmark's own: Claw-Eval 0.75, QwenClawBench and tau2 1.0)",
    ),
    model_name: str | None = typer.Option(None, help="model name given to the harness (policy)"),
    budget_s: float | None = typer.Option(None, help="override every task's budget"),
    scripted_oracle: float | None = typer.Option(None, help="demo: in-process scripted oracle, success rate"),
    judge_engine: str | None = typer.Option(
        None,
        help="OpenAI-compatible base URL of the LLM judge (Claw-Eval "
        "llm_judge components, QwenClawBench hybrid/llm_judge); off by default",
    ),
    judge_model: str = typer.Option("judge", help="model name sent to the judge engine"),
    user_engine: str | None = typer.Option(
        None,
        help="OpenAI-compatible base URL of the simulated user "
        "(multi-turn tasks, through the ask_user tool); off by default",
    ),
    user_model: str = typer.Option("user", help="model name sent to the user engine"),
    seed: int | None = typer.Option(None, help="bootstrap / scripted-policy seed (0)"),
) -> None:
    """Evaluate harnesses on a task suite and write the report."""
    from openforgerl.config import from_flags
    from openforgerl.eval.report import build_report, to_markdown, write_report
    from openforgerl.stack import engine_from_flag

    cfg = from_flags(
        config,
        {
            "eval.group_size": group_size,
            "eval.threshold": threshold,
            "out_dir": str(out),
            "rollout.model_name": model_name,
            "rollout.budget_s": budget_s,
            "seed": seed,
            **(engine_from_flag([engine]) if engine else {}),
        },
    )
    provided = (
        {"transcript"}
        | ({"judge"} if judge_engine else set())
        | ({"user_simulator"} if user_engine else set())
    )
    runtimes, summary = _load(tasks, split, provided)
    if summary.runnable < summary.total:
        typer.echo(summary.line())
    if not runtimes:
        from openforgerl.errors import UserError

        raise UserError(f"no runnable tasks under {tasks} ({summary.line()})")
    _fresh_run_dir(out)
    harnesses = harness or ([cfg.harness] if isinstance(cfg.harness, str) else list(cfg.harness))
    engines = {"judge": (judge_engine, judge_model), "user": (user_engine, user_model)}
    trial_list = asyncio.run(_run(cfg, runtimes, harnesses, gateway, scripted_oracle, engines))
    report = build_report(
        trial_list,
        cfg.eval.group_size,
        threshold=cfg.eval.threshold,
        seed=cfg.seed,
        benchmarks=_benchmarks(runtimes),
    )
    paths = write_report(report, out)
    typer.echo(to_markdown(report))
    typer.echo(f"wrote {', '.join(str(p) for p in paths.values())}")


def _benchmarks(runtimes: list[Any]) -> dict[str, str]:
    """task id -> the benchmark it was imported from (`[metadata] source`), which picks its scoring rule."""
    return {
        rt.task_id: str(getattr(getattr(getattr(rt, "task", None), "meta", None), "source", "") or "")
        for rt in runtimes
    }


def _fresh_run_dir(out: Path) -> None:
    """A re-run into the same folder starts a fresh record: the call log (and its WAL/journal files) and
    the rollout records would otherwise mix two runs."""
    import shutil

    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("calls.db*"), out / "rollouts.jsonl"]:
        old.unlink(missing_ok=True)
    shutil.rmtree(out / "rollouts", ignore_errors=True)


def _split(rt: Any) -> str | None:
    """The runtime's task split; a runtime that keeps no task folder (a `TaskSpec`) has none."""
    split = getattr(getattr(getattr(rt, "task", None), "meta", None), "split", None)
    return None if split is None else str(split)


def _load(tasks: Path, split: str | None, provided: set[str]) -> tuple[list[Any], Any]:
    """The runnable runtimes (flags not lifted by what is `provided`) and the counts by reason."""
    from openforgerl.tasks.flags import summarize_flags, unmet
    from openforgerl.tasks.loader import load_runtimes

    every = [rt for rt in load_runtimes(tasks) if split is None or _split(rt) == split]
    left = [unmet(list(getattr(getattr(rt, "task", None), "flags", [])), provided) for rt in every]
    return [rt for rt, f in zip(every, left, strict=True) if not f], summarize_flags(left)


async def _run(
    cfg: Any,
    runtimes: list[Any],
    harnesses: list[str],
    gateway: str | None,
    scripted: float | None,
    engines: dict[str, tuple[str | None, str]],
) -> list[Any]:
    from contextlib import AsyncExitStack

    from openforgerl.eval.runner import run_eval
    from openforgerl.orchestrator.results import ResultSink

    out = Path(cfg.out_dir)
    async with AsyncExitStack() as stack:
        from openforgerl.stack import open_services, scripted_engine

        # a running gateway; the scripted oracle (a demo/CI mode); else the configured engine (default: tiny)
        oracle = None if scripted is None else scripted_engine(runtimes, success_rate=scripted, seed=cfg.seed)
        services = await stack.enter_async_context(
            open_services(out, cfg, engine=oracle, gateway_url=gateway)
        )
        backend = await _host_side(runtimes, services.access, services.backend, engines, stack)
        sink = ResultSink(out / "rollouts.jsonl")
        config = cfg.eval_orchestrator(artifacts_dir=out / "rollouts")
        from openforgerl.orchestrator.view import ProgressView

        with ProgressView(len(runtimes) * len(harnesses) * config.group_size, label="trials") as view:
            return await run_eval(
                runtimes,
                harnesses,
                gateway=services.access,
                backend=backend,
                sink=sink,
                config=config,
                on_done=view.done,
            )
    raise AssertionError("unreachable")


async def _host_side(
    runtimes: list[Any], access: Any, backend: Any, engines: dict[str, tuple[str | None, str]], stack: Any
) -> Any:
    """The call log, judge and user relay every runtime's `verify` may use on the host (tasks/host_side.py);
    with a user engine, the backend that starts the relay next to each sandbox."""
    from openforgerl.env.judge import JudgeClient
    from openforgerl.orchestrator.gateway_client import GatewayClient
    from openforgerl.tasks.host_side import HostSide, attach

    client = GatewayClient(access)
    stack.push_async_callback(client.aclose)
    judge_url, judge_model = engines["judge"]
    user_url, user_model = engines["user"]
    host = HostSide(calls=client.list_calls, judge=JudgeClient(judge_url, judge_model) if judge_url else None)
    if user_url:
        from openforgerl.env.user_sim import UserRelay, UserSimBackend

        async def task_of(rollout_id: str) -> str | None:
            info = await client.get_rollout(rollout_id)
            return str(info.get("task_id")) if isinstance(info, dict) and info.get("task_id") else None

        relay = UserRelay(
            JudgeClient(user_url, user_model, max_tokens=128, temperature=0.7, timeout_s=300.0),
            {rt.task_id: rt for rt in runtimes},
            task_of,
        )
        host.users = relay
        backend = UserSimBackend(backend, relay)
    attach(runtimes, host)
    return backend
