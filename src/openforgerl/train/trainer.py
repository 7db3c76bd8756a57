"""The built-in single-node GRPO loop: rollouts -> samples -> update -> weight sync, step after step.

Each step runs one GRPO group per task through the orchestrator (real harness, real sandboxes, the
gateway recording every call), reconstructs samples from the call log, computes group-relative
advantages over the valid rollouts only, takes one optimiser step, and pushes the weights to the engine
while the gateway is paused. Metrics go to JSONL + TensorBoard; a reward curve PNG is written at the end.

A vision-language policy (a model directory with a `vision_config`, e.g. `tiny-vl`) is loaded with its
vision tower; each sample's images come from the call log's blob store through `train/vision.py`, so
the forward pass gets the pixels and grids the engine saw, and the weight push carries both towers.
At the first step the trainer checks its logprobs against the engine's (`step0_logprob_tol`).
"""

from __future__ import annotations

import asyncio
import copy
import random
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import torch
from rich.console import Console
from rich.live import Live

from openforgerl.orchestrator.batch import BatchResult, run_batch
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.orchestrator.results import ResultSink
from openforgerl.records import CallRecord, RolloutRecord, Sample
from openforgerl.train.checkpoint import load_checkpoint, save_checkpoint
from openforgerl.train.grpo import RolloutScore, group_advantages
from openforgerl.train.reporting import MetricsLog, StepProgress, plot_reward_curve, step_table
from openforgerl.train.services import TrainServices, redraw_pool, select_tasks
from openforgerl.train.settings import EvalSettings, TaskSelection, TrainSettings
from openforgerl.train.update import grpo_update, logprob_check
from openforgerl.train.vision import SampleVision
from openforgerl.train.weight_sync import sync_weights
from openforgerl.trajectory.options import ReconstructionOptions
from openforgerl.trajectory.reconstruct import DEFAULT_OPTIONS, reconstruct_samples
from openforgerl.trajectory.trainable import trainable


@dataclass
class StepData:
    samples: list[Sample] = field(default_factory=list)
    scores: list[RolloutScore] = field(default_factory=list)
    dropped: int = 0


@dataclass(frozen=True)
class TrainSummary:
    out_dir: Path
    steps: int
    first_reward: float | None
    """Mean training reward of the first five steps (single steps draw different tasks)."""
    last_reward: float | None
    """... and of the last five."""
    eval_before: float | None
    eval_after: float | None
    curve: Path | None
    train_before: float | None = None
    """pass@1 on the train tasks before training (`eval.train_group_size`; None: not evaluated) ..."""
    train_after: float | None = None
    """... and after."""
    stopped: str = ""
    """Why the loop ended: every step done, or the time budget (with the step it stopped after)."""


class OrchestratorFor(Protocol):
    """The orchestrator's contract for a run, with a group size of its own where evaluation and band
    refreshes need one (`Config.orchestrator`)."""

    def __call__(
        self, *, group_size: int | None = None, artifacts_dir: Path | None = None, **overrides: Any
    ) -> OrchestratorConfig: ...


@dataclass(frozen=True)
class TrainPlan:
    """What the trainer reads of a run's configuration. The layer above builds it (`compose/train.py`,
    from the one schema), so the trainer stands on its own settings and the services it is handed."""

    train: TrainSettings
    eval: EvalSettings
    tasks: TaskSelection | list[TaskSelection]
    """The training selection(s): the bands `refresh_every` re-calibrates and redraws."""
    seed: int
    harness: Callable[[int], Any]
    """step -> the harness adapter that step's rollouts run in."""
    orchestrator: OrchestratorFor
    reconstruction: ReconstructionOptions
    """Trajectory reconstruction; the trainer adds the policy's image token."""


class CallSource(Protocol):
    async def list_calls(self, rollout_id: str) -> list[CallRecord]: ...


async def collect(
    store: CallSource, batch: BatchResult, options: ReconstructionOptions = DEFAULT_OPTIONS
) -> StepData:
    """Samples and scores of the rollouts `trajectory.trainable` accepts; everything else is dropped.

    The same rule export and the veRL loop apply, on the records the gateway stored (`run_batch`
    returns them), so the three select exactly the same rollouts. `options.image_token_id` (the
    policy's `<|image_pad|>`) checks pad counts where a call recorded no processor identity.
    """
    data = StepData()
    for group in batch.groups:
        for record in group.records:
            if not trainable(record):
                data.dropped += 1
                continue
            result = reconstruct_samples(await store.list_calls(record.rollout_id), record, options=options)
            if not result.samples or record.reward is None:
                data.dropped += 1
                continue
            data.samples.extend(result.samples)
            data.scores.append(RolloutScore(record.rollout_id, group.group_id, record.reward))
    return data


def pass_rate(records: Sequence[RolloutRecord]) -> float | None:
    kept = [r for r in records if r.in_batch]
    return sum((r.reward or 0.0) >= 1.0 for r in kept) / len(kept) if kept else None


class GatewayAdmin:
    """The running gateway's pause/resume, as `sync_weights` expects them."""

    def __init__(self, gateway: Any) -> None:
        self.gateway = gateway

    async def pause(self) -> None:
        await self.gateway.pause()

    async def resume(self) -> int:
        return int(self.gateway.resume())


def load_policy(path: Path) -> Any:
    """The trainable policy: a causal LM, or the full image-text model (vision tower included)."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    from openforgerl.engines.chat_format import is_multimodal_dir

    auto = AutoModelForImageTextToText if is_multimodal_dir(path) else AutoModelForCausalLM
    return auto.from_pretrained(path, dtype=torch.float32).eval()  # type: ignore[no-untyped-call]


def policy_vision(path: Path, store: Any) -> SampleVision | None:
    """Pixels for a vision-language policy's samples, read from the call log's blobs (None: text)."""
    from openforgerl.engines.chat_format import is_multimodal_dir

    return SampleVision.for_model_dir(path, store.read_blob) if is_multimodal_dir(path) else None


class Trainer:
    def __init__(self, plan: TrainPlan, out_dir: Path, console: Console | None = None) -> None:
        self.plan = plan
        self.out_dir = out_dir
        self.console = console or Console()
        self.log = MetricsLog(out_dir)
        self.settings = plan.train.update_settings()
        self.vision: SampleVision | None = None
        self.check_logprobs = plan.train.step0_logprob_tol is not None
        self.version = 0  # the policy version the engine serves
        self.done = 0  # steps finished (an interrupted run says where it stopped)
        self.saved_step: int | None = None  # the step the checkpoint on disk continues at
        self.updating = False  # inside the optimiser step: the weights in memory are half-updated
        self.progress = StepProgress(plan.train.steps, 0, plan.train.time_budget_s)

    def say(self, text: str) -> None:
        """A progress line, on a terminal and off it (a log file sees it when it happens)."""
        self.console.print(
            f"[dim]{self.progress.status(self.done)}[/]  {text}", highlight=False, soft_wrap=True
        )

    async def evaluate(self, services: TrainServices, step: int) -> float | None:
        """Held-out pass@1 (`eval.tasks`, `eval.group_size` rollouts a task)."""
        if not services.eval_tasks:
            return None
        return await self._pass_rate(services, services.eval_tasks, self.plan.eval.group_size, step, "eval")

    async def evaluate_train(self, services: TrainServices, step: int) -> float | None:
        """pass@1 on the train tasks (`eval.train_group_size` rollouts a task; None when 0)."""
        if not self.plan.eval.train_group_size or not services.train_tasks:
            return None
        return await self._pass_rate(
            services, services.train_tasks, self.plan.eval.train_group_size, step, "eval_train"
        )

    async def _pass_rate(
        self, services: TrainServices, tasks: list[Any], group_size: int, step: int, kind: str
    ) -> float | None:
        what = "held-out tasks" if kind == "eval" else "train tasks"
        self.say(f"evaluating pass@1 on {len(tasks)} {what} x {group_size} rollouts (after step {step})")
        ocfg = self.plan.orchestrator(
            group_size=group_size, artifacts_dir=self.out_dir / "rollouts", min_group_size=1
        )
        batch = await run_batch(
            tasks,
            self.plan.harness(step),
            gateway=services.gateway.access,
            backend=services.backend,
            config=ocfg,
            sink=self.sink(services, kind),
        )
        return pass_rate(batch.records)

    def sink(self, services: TrainServices, kind: str) -> ResultSink:
        """Every rollout attempt, with its status, into the call log and `<kind>_rollouts.jsonl`."""
        return ResultSink(self.out_dir / f"{kind}_rollouts.jsonl")

    def tasks_for(self, services: TrainServices, step: int) -> list[Any]:
        rng = random.Random(self.plan.seed * 100_003 + step)
        k = min(self.plan.train.tasks_per_step, len(services.train_tasks))
        return rng.sample(services.train_tasks, k)

    async def step(
        self, services: TrainServices, model: Any, opt: Any, ref: Any, step: int, version: int
    ) -> dict[str, Any]:
        t0 = time.monotonic()
        batch = await run_batch(
            self.tasks_for(services, step),
            self.plan.harness(step),
            gateway=services.gateway.access,
            backend=services.backend,
            config=self.plan.orchestrator(artifacts_dir=self.out_dir / "rollouts"),
            sink=self.sink(services, "train"),
        )
        t_roll = time.monotonic() - t0
        options = replace(
            self.plan.reconstruction, image_token_id=self.vision.image_token_id if self.vision else None
        )
        data = await collect(services.store, batch, options)
        adv = group_advantages(data.scores)
        self.updating = True
        stats = await asyncio.to_thread(
            grpo_update, model, opt, data.samples, adv, self.settings, ref_model=ref, vision=self.vision
        )
        self.updating = False
        new_version = await sync_weights(GatewayAdmin(services.gateway), services.pusher, model, version + 1)
        rewards = [s.reward for s in data.scores]
        return {
            **self.step0_check(stats),
            "step": step,
            "reward": sum(rewards) / len(rewards) if rewards else 0.0,
            "pass_rate": pass_rate(batch.records) or 0.0,
            "kept": len(data.scores),
            "dropped": data.dropped,
            "samples": stats.samples,
            "trained_tokens": stats.trained_tokens,
            "loss": stats.loss,
            "grad_norm": stats.grad_norm,
            "clip_frac": stats.clip_frac,
            "kl": stats.kl,
            "logprob_diff_max": stats.logprob_diff_max,
            "rollout_s": t_roll,
            "step_s": time.monotonic() - t0,
            "policy_version": new_version,
        }

    def refresh_due(self, done: int) -> list[TaskSelection]:
        """The band selections whose `refresh_every` falls on this step (none after the last step)."""
        sels = self.plan.tasks if isinstance(self.plan.tasks, list) else [self.plan.tasks]
        return [
            s
            for s in sels
            if s.refresh_every and done % s.refresh_every == 0 and done < self.plan.train.steps
        ]

    async def refresh_bands(
        self, services: TrainServices, sels: list[TaskSelection], step: int, version: int
    ) -> dict[str, Any]:
        """Re-calibrate each selection's whole pool with the weights the engine serves now (pushed at the
        end of the step), rewrite the pass rates and redraw the training pool from the new bands."""
        from openforgerl.synth.calibrate import calibrate, measure, recorded

        t0 = time.monotonic()
        pool, band, rates = 0, 0, []
        for sel in sels:
            runtimes = select_tasks(sel.model_copy(update={"pass_rate": None, "limit": None}), self.plan.seed)
            measured = await measure(
                runtimes,
                sel.refresh_k,
                self.plan.harness(step),
                gateway=services.gateway.access,
                backend=services.backend,
                config=self.plan.orchestrator(group_size=sel.refresh_k),
                sink=self.sink(services, "refresh"),
            )
            done = calibrate(
                [rt.task.root for rt in runtimes],
                recorded(measured),
                sel.refresh_k,
                policy=f"train@v{version}",
            )
            pool += len(runtimes)
            rates += [c.pass_rate for c in done if c.pass_rate is not None]
            band += len(select_tasks(sel, self.plan.seed))
        redrawn = redraw_pool(self.plan.tasks, self.plan.seed, services.train_tasks)
        if redrawn is services.train_tasks:
            self.console.print(
                f"[yellow]step {step}: the refreshed bands are empty; keeping the previous pool[/]"
            )
        services.train_tasks = redrawn
        return {
            "refresh_pool": pool,
            "refresh_band": band,
            "refresh_train_tasks": len(services.train_tasks),
            "refresh_pass_mean": sum(rates) / len(rates) if rates else None,
            "refresh_policy_version": version,
            "refresh_s": time.monotonic() - t0,
        }

    def step0_check(self, stats: Any) -> dict[str, Any]:
        """The first step with trained tokens: trainer vs engine logprobs on the same weights."""
        if not self.check_logprobs or not stats.trained_tokens or self.plan.train.step0_logprob_tol is None:
            return {}
        self.check_logprobs = False
        check = logprob_check(stats, self.plan.train.step0_logprob_tol)
        if not check.passed:
            self.console.print(
                f"[red]step-0 logprob check failed: max |trainer - engine| = {check.max_diff:.3g} "
                f"> {check.tolerance:g} (engine and trainer disagree on the same weights)[/red]"
            )
        return check.as_row()

    async def run(
        self, opening: AbstractAsyncContextManager[TrainServices], *, resume: bool = False
    ) -> TrainSummary:
        """The whole run on the services `opening` opens (`compose.train.open_train_services`): entered
        here, after the seed is set and the clock has started (the time budget counts the start-up), and
        closed before the summary is written."""
        torch.manual_seed(self.plan.seed)
        started = time.monotonic()
        self.say(f"starting: engine, gateway and sandboxes for {self.plan.train.steps} steps")
        async with opening as services:
            model = load_policy(services.policy_path)
            self.vision = policy_vision(services.policy_path, services.store)
            opt = torch.optim.AdamW(
                model.parameters(), lr=self.plan.train.lr, weight_decay=self.plan.train.weight_decay
            )
            ref = copy.deepcopy(model).eval() if self.plan.train.kl_coef > 0 else None
            first, version = 0, 0
            if resume:
                first, version = load_checkpoint(self.out_dir / "checkpoint", model, opt)
                self.saved_step = first
                await sync_weights(GatewayAdmin(services.gateway), services.pusher, model, version)
            self.done, self.progress.first = first, first
            before = await self.evaluate(services, first) if first == 0 else None
            if before is not None:
                self.log.write({"step": first, "eval_pass1": before})
            train_before = await self.evaluate_train(services, first) if first == 0 else None
            if train_before is not None:
                self.log.write({"step": first, "train_pass1": train_before})
            try:
                budget_hit = await self.loop(services, model, opt, ref, first, version, started)
            except asyncio.CancelledError:
                self.checkpoint_on_interrupt(model, opt)
                raise
            version = self.version
            save_checkpoint(self.out_dir / "checkpoint", model, opt, self.done, version)
            self.saved_step = self.done
            after = await self.evaluate(services, self.done)
            if after is not None:
                self.log.write({"step": self.done, "eval_pass1": after})
            train_after = await self.evaluate_train(services, self.done)
            if train_after is not None:
                self.log.write({"step": self.done, "train_pass1": train_after})
        summary = self.summary(before, after, train_before, train_after)
        return replace(summary, stopped=self.progress.why_stopped(self.done, budget_hit=budget_hit))

    async def loop(
        self,
        services: TrainServices,
        model: Any,
        opt: Any,
        ref: Any,
        first: int,
        version: int,
        started: float,
    ) -> bool:
        """The steps; True when the time budget ended them early. A terminal gets a live table, anything
        else a line per step."""
        self.version = version
        live = (
            Live(self.table(), console=self.console, refresh_per_second=2)
            if self.console.is_terminal
            else None
        )
        with live if live is not None else nullcontext():
            for step in range(first, self.plan.train.steps):
                if (
                    self.plan.train.time_budget_s
                    and time.monotonic() - started > self.plan.train.time_budget_s
                ):
                    return True
                row = await self.step(services, model, opt, ref, step, self.version)
                self.version = row["policy_version"]
                self.done = step + 1
                if (
                    self.plan.eval.every
                    and self.done % self.plan.eval.every == 0
                    and self.done < self.plan.train.steps
                ):
                    row["eval_pass1"] = await self.evaluate(services, self.done)
                if due := self.refresh_due(self.done):
                    row |= await self.refresh_bands(services, due, self.done, self.version)
                self.log.write(row)
                line = self.progress.line(row, self.done)
                if live is not None:
                    live.update(self.table())
                else:
                    self.console.print(line, highlight=False, soft_wrap=True)
                if self.plan.train.checkpoint_every and self.done % self.plan.train.checkpoint_every == 0:
                    save_checkpoint(self.out_dir / "checkpoint", model, opt, self.done, self.version)
                    self.saved_step = self.done
        return False

    def table(self) -> Any:
        return step_table(self.log.rows(), width=self.console.width, caption=self.progress.status(self.done))

    def checkpoint_on_interrupt(self, model: Any, opt: Any) -> None:
        """Save the finished steps when the weights in memory are whole (not mid-update), so `--resume`
        loses no finished step."""
        if not self.updating and self.done > (self.saved_step or 0):
            save_checkpoint(self.out_dir / "checkpoint", model, opt, self.done, self.version)
            self.saved_step = self.done

    def summary(
        self,
        before: float | None,
        after: float | None,
        train_before: float | None = None,
        train_after: float | None = None,
    ) -> TrainSummary:
        rows = self.log.rows()
        rewards = [r["reward"] for r in rows if "reward" in r]
        curve = plot_reward_curve(rows, self.out_dir / "reward_curve.png") if rewards else None
        self.log.close()
        head, tail = rewards[:5], rewards[-5:]
        return TrainSummary(
            self.out_dir,
            len(rewards),
            sum(head) / len(head) if head else None,
            sum(tail) / len(tail) if tail else None,
            before,
            after,
            curve,
            train_before,
            train_after,
        )
