"""Terminal view of a batch: a rich progress bar while it runs, a summary table at the end."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from openforgerl.orchestrator.batch import BatchResult
from openforgerl.records import RolloutRecord, RolloutStatus

__all__ = ["ProgressView", "summary", "write_summary"]


class ProgressView:
    """Counts finished attempts as ok / failed (agent or timeout) / infra (dropped, usually retried)."""

    def __init__(self, total: int, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.counts: Counter[str] = Counter()
        self.progress = Progress(TextColumn("rollouts"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[stats]}"), TimeElapsedColumn(),
                                 console=self.console, transient=False)
        self.total = total
        self.task = self.progress.add_task("rollouts", total=total, stats="")

    def __enter__(self) -> ProgressView:
        self.progress.start()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        done = self.progress.tasks[0].completed
        self.progress.update(self.task, total=done)  # retries not needed after all: close the bar
        self.progress.stop()

    def done(self, record: RolloutRecord) -> None:
        status = record.status or RolloutStatus.INFRA_GATEWAY
        key = "ok" if status is RolloutStatus.OK else "infra" if status.is_infra else "failed"
        self.counts[key] += 1
        stats = f"ok {self.counts['ok']}  failed {self.counts['failed']}  infra {self.counts['infra']}"
        if status.is_infra:  # its slot is usually retried: one more attempt to wait for
            self.total += 1
        self.progress.update(self.task, advance=1, total=self.total, stats=stats)

    def print_summary(self, result: BatchResult) -> None:
        table = Table(title="rollouts by task")
        for col in ("task", "attempts", "in batch", "mean reward", "group", "statuses"):
            table.add_column(col)
        for g in result.groups:
            kept = g.kept
            mean = sum(r.reward or 0.0 for r in kept) / len(kept) if kept else float("nan")
            statuses = ", ".join(f"{k}={v}" for k, v in sorted(Counter(str(r.status) for r in g.records).items()))
            table.add_row(g.task_id, str(len(g.records)), str(len(kept)), f"{mean:.3f}",
                          "valid" if g.valid else "dropped", statuses)
        self.console.print(table)
        self.console.print(dict(result.counts()))
        overflow = sum(r.status is RolloutStatus.CONFIG_CONTEXT for g in result.groups for r in g.records)
        if overflow:
            self.console.print(f"[yellow]warning[/]: {overflow} rollout(s) sent a prompt longer than the engine's "
                               "context (config_error:context, never trained): serve the model with a longer "
                               "context (--max-model-len) or cap max_tokens, or use a harness with a shorter prompt")


def summary(result: BatchResult) -> dict[str, object]:
    per_task: dict[str, dict[str, object]] = defaultdict(dict)
    for g in result.groups:
        rewards = [r.reward or 0.0 for r in g.kept]
        per_task[g.task_id] = {"group_id": g.group_id, "valid": g.valid, "attempts": len(g.records),
                               "in_batch": len(rewards),
                               "mean_reward": sum(rewards) / len(rewards) if rewards else None}
    return {"counts": dict(result.counts()), "tasks": per_task}


def write_summary(path: Path, result: BatchResult) -> None:
    path.write_text(json.dumps(summary(result), indent=1))
