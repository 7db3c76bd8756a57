"""Run an eval through the orchestrator and turn its rollout records into `Trial`s.

Every task gets `trials` rollouts per harness (one GRPO-style group, min size 1); infrastructure
failures are retried by the orchestrator and, when they persist, kept as infra attempts so the report
can show them without counting them. Timeouts are reported as their own column (metrics.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from openforgerl.eval.metrics import Trial
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.records import RolloutRecord, RolloutStatus
from openforgerl.trajectory import infra_reason

__all__ = ["records_to_trials", "run_eval"]


def records_to_trials(
    records: Iterable[RolloutRecord], services: Mapping[str, Sequence[str]] | None = None
) -> list[Trial]:
    """One Trial per attempt. Infra (`trajectory.infra_reason`, the rule training uses) is flagged and
    not scored; a timeout keeps its status and has no reward (it is its own column, not a 0)."""
    services = services or {}
    out = []
    for r in records:
        infra = r.status is None or infra_reason(r) is not None
        scored = not infra and r.status is not RolloutStatus.TIMEOUT
        reward = (r.reward if r.reward is not None else 0.0) if scored else None
        task = r.task_id or "?"
        out.append(
            Trial(
                task,
                r.harness or "?",
                reward,
                infra,
                tuple(services.get(task, ())),
                str(r.status) if r.status else "unknown",
            )
        )
    return out


async def run_eval(
    runtimes: Sequence[Any],
    harnesses: Sequence[str],
    *,
    gateway: Any,
    backend: Any,
    config: OrchestratorConfig | None = None,
    sink: Any = None,
    on_done: Callable[[RolloutRecord], None] | None = None,
    **fields: Any,
) -> list[Trial]:
    """`group_size` rollouts (k trials) of every task with every harness, through `run_batch`. `config`:
    the orchestrator's settings (`openforgerl.config.Config.eval_orchestrator()`); without it, built from
    `fields` (`OrchestratorConfig`'s, e.g. `group_size=k`), with min group size 1 and timeouts scored 0."""
    from openforgerl.harness.registry import get_harness
    from openforgerl.orchestrator.batch import run_batch

    cfg = config or OrchestratorConfig(**{"min_group_size": 1, "timeout_policy": "zero", **fields})
    services = {rt.task_id: list(rt.metadata.get("services", [])) for rt in runtimes}
    out: list[Trial] = []
    for name in harnesses:
        batch = await run_batch(
            runtimes,
            get_harness(name),
            gateway=gateway,
            backend=backend,
            config=cfg,
            sink=sink,
            on_done=on_done,
        )
        out += [_named(t, name) for t in records_to_trials(batch.records, services)]
    return out


def _named(trial: Trial, harness: str) -> Trial:
    return (
        trial
        if trial.harness != "?"
        else Trial(trial.task_id, harness, trial.reward, trial.infra, trial.services, trial.status)
    )
