"""End-to-end driver for the harness tests: real CLI -> real gateway -> scripted engine, on the host.

`run_rollout` opens a rollout on the gateway, writes the adapter's config, runs the CLI under a wall-clock
budget, then reads the recorded calls back and reconstructs training samples from them.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from openforgerl.engines.scripted import MODEL_NAME, Completion, ScriptedEngine
from openforgerl.gateway.server import RunningGateway
from openforgerl.harness.base import HarnessAdapter, HarnessContext
from openforgerl.harness.host import HostRun, run_on_host
from openforgerl.harness.install import is_installed, tools_dir
from openforgerl.harness.registry import get_harness
from openforgerl.records import CallRecord, RolloutRecord, RolloutStatus
from openforgerl.trajectory.reconstruct import ReconstructionResult, reconstruct_samples

INSTRUCTION = "Create the file proof.txt in the current directory containing exactly: {content}"


def proof_content() -> str:
    return f"proof-{secrets.token_hex(6)}"


@dataclass
class Outcome:
    run: HostRun
    calls: list[CallRecord]
    rollout: RolloutRecord
    result: ReconstructionResult
    workdir: Path
    first_call_s: float | None  # launch -> first model call reaching the gateway

    def file_text(self, name: str = "proof.txt") -> str | None:
        path = self.workdir / name
        return path.read_text() if path.is_file() else None

    def describe(self) -> str:
        return (
            f"rc={self.run.returncode} timed_out={self.run.timed_out} calls={len(self.calls)} "
            f"errors={[c.error for c in self.calls if c.error]}\nstdout={self.run.stdout[-3000:]}\n"
            f"stderr={self.run.stderr[-3000:]}"
        )


def context(opened: dict[str, str], root: Path, content: str, **extra: Any) -> HarnessContext:
    workdir, home = root / "work", root / "home"
    workdir.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    return HarnessContext(
        instruction=INSTRUCTION.format(content=content),
        openai_base_url=opened["openai_base_url"],
        anthropic_base_url=opened["anthropic_base_url"],
        api_key=opened["api_key"],
        model=MODEL_NAME,
        workdir=str(workdir),
        home=str(home),
        **extra,
    )


def _status(record: RolloutRecord, run: HostRun, ok: bool) -> RolloutStatus:
    """The orchestrator's rule: the gateway's infra status wins, then timeout, then the verifier."""
    if record.status is not None and record.status.is_infra:
        return record.status
    if run.timed_out:
        return RolloutStatus.TIMEOUT
    return RolloutStatus.OK if ok else RolloutStatus.AGENT_FAILED


async def run_rollout(
    gw: RunningGateway,
    adapter: HarnessAdapter,
    tools_dir: Path,
    root: Path,
    content: str,
    budget_s: float,
    **ctx_extra: Any,
) -> Outcome:
    opened = await gw.open_rollout(harness=adapter.name, task_id="proof-file")
    ctx = context(opened, root, content, **ctx_extra)
    launch = adapter.launch(ctx, tools_dir)
    started = time.time()
    run = await run_on_host(launch, Path(ctx.workdir), budget_s)
    calls = await gw.gateway.store.list_calls(opened["rollout_id"])
    workdir = Path(ctx.workdir)
    proof = workdir / "proof.txt"
    ok = proof.is_file() and proof.read_text() == content
    record = await gw.gateway.store.get_rollout(opened["rollout_id"])
    assert record is not None
    status = _status(record, run, ok)
    # the orchestrator's verdict for a group of one: in the batch unless infra (trajectory.trainable)
    record = record.model_copy(
        update={
            "status": status,
            "reward": 1.0 if ok else 0.0,
            "harness": adapter.name,
            "in_batch": not status.is_infra,
            "group_valid": True,
        }
    )
    first = min((c.started_at for c in calls), default=None)
    return Outcome(
        run,
        calls,
        record,
        reconstruct_samples(calls, record),
        workdir,
        None if first is None else first - started,
    )


def masked_runs(sample: Any) -> list[list[int]]:
    """The maximal runs of mask-1 response tokens of one sample."""
    runs: list[list[int]] = []
    current: list[int] = []
    for tok, mask in zip(sample.response_ids, sample.response_mask, strict=True):
        if mask:
            current.append(tok)
        elif current:
            runs.append(current)
            current = []
    return [*runs, current] if current else runs


def contains(haystack: list[int], needle: list[int]) -> bool:
    n = len(needle)
    return any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def sampled_in_samples(done: Completion, outcome: Outcome) -> bool:
    """Whether this engine completion's ids appear as mask-1 tokens in some reconstructed sample."""
    return any(contains(run, done.ids) for s in outcome.result.samples for run in masked_runs(s))


def tool_call_completions(engine: ScriptedEngine) -> list[Completion]:
    return [c for c in engine.produced if c.parsed.tool_calls]


def require_installed(name: str) -> Path:
    """The tools dir holding `name`; skip locally (fail in CI) when
    scripts/install_harnesses.sh was not run."""
    tools = tools_dir()
    pkg = getattr(__import__(type(get_harness(name)).__module__, fromlist=["PACKAGE"]), "PACKAGE", None)
    if pkg is None or is_installed(pkg.root(tools), pkg.spec):
        return tools
    reason = f"{name} not installed under {tools}: run scripts/install_harnesses.sh {name}"
    if os.environ.get("CI") or os.environ.get("OPENFORGERL_REQUIRE_HARNESSES"):
        pytest.fail(reason)
    pytest.skip(reason)


# -- per-harness figures for the README table (printed at the end of the run) -------------------------
HARNESS_FIGURES: list[dict[str, object]] = []


def record_figures(name: str, adapter: object, outcome: Outcome) -> None:
    metrics = outcome.result.metrics
    HARNESS_FIGURES.append(
        {
            "harness": name,
            "version": getattr(adapter, "version", "?"),
            "protocol": getattr(getattr(adapter, "protocol", None), "value", "?"),
            "calls": len(outcome.calls),
            "side_calls": sum(c.side_call for c in outcome.calls),
            "merge_rate": metrics.merge_rate,
            "chains": metrics.chains,
            "first_call_s": outcome.first_call_s,
            "run_s": outcome.run.duration_s,
        }
    )
