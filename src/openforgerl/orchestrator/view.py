"""Terminal view of a batch: a rich progress bar while it runs, a summary table at the end."""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from pathlib import Path
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from openforgerl.orchestrator.batch import BatchResult
from openforgerl.records import RolloutRecord, RolloutStatus

__all__ = ["ProgressView", "clock", "summary", "write_summary"]


class ProgressView:
    """Counts finished attempts as ok / failed (agent or timeout) / infra (dropped, usually retried).

    On a terminal, a live bar; anywhere else (a log file, a pipe, CI) a line per finished rollout with the
    elapsed time and an ETA, since rich draws a bar off a terminal only once, when it ends."""

    def __init__(self, total: int, console: Console | None = None, *, label: str = "rollouts") -> None:
        self.console = console or Console(stderr=True)
        self.label = label
        self.started = time.monotonic()
        self.counts: Counter[str] = Counter()
        self.progress = Progress(
            TextColumn(label),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )
        self.total = total
        self.task = self.progress.add_task("rollouts", total=total, stats="")

    def __enter__(self) -> ProgressView:
        self.started = time.monotonic()
        if self.console.is_terminal:
            self.progress.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        done = self.progress.tasks[0].completed
        self.progress.update(self.task, total=done)  # retries not needed after all: close the bar
        if self.console.is_terminal:
            self.progress.stop()

    def done(self, record: RolloutRecord) -> None:
        status = record.status or RolloutStatus.INFRA_GATEWAY
        key = "ok" if status is RolloutStatus.OK else "infra" if status.is_infra else "failed"
        self.counts[key] += 1
        stats = f"ok {self.counts['ok']}  failed {self.counts['failed']}  infra {self.counts['infra']}"
        if status.is_infra:  # its slot is usually retried: one more attempt to wait for
            self.total += 1
        self.progress.update(self.task, advance=1, total=self.total, stats=stats)
        if not self.console.is_terminal:
            self.console.print(self.line(record, status), highlight=False, soft_wrap=True)

    def line(self, record: RolloutRecord, status: RolloutStatus) -> str:
        """`rollouts 3/16  ok  easy-write-file-01 (zero) reward 1.00  ok 2  failed 1  infra 0  elapsed 0:42
        eta 2:48`."""
        done = int(self.progress.tasks[0].completed)
        elapsed = time.monotonic() - self.started
        eta = elapsed / done * max(0, self.total - done) if done else 0.0
        reward = "" if record.reward is None else f" reward {record.reward:.2f}"
        counts = f"ok {self.counts['ok']}  failed {self.counts['failed']}  infra {self.counts['infra']}"
        return (
            f"{self.label} {done}/{self.total}  {status}  "
            f"{record.task_id} ({record.harness}){reward}  {counts}"
            f"  elapsed {clock(elapsed)}  eta {clock(eta)}"
        )

    def print_summary(self, result: BatchResult) -> None:
        table = Table(title="rollouts by task")
        for col in ("task", "attempts", "in batch", "mean reward", "group", "statuses"):
            table.add_column(col)
        for g in result.groups:
            kept = g.kept
            mean = sum(r.reward or 0.0 for r in kept) / len(kept) if kept else float("nan")
            statuses = ", ".join(
                f"{k}={v}" for k, v in sorted(Counter(str(r.status) for r in g.records).items())
            )
            table.add_row(
                g.task_id,
                str(len(g.records)),
                str(len(kept)),
                f"{mean:.3f}",
                "valid" if g.valid else "dropped",
                statuses,
            )
        self.console.print(table)
        self.console.print(dict(result.counts()))
        overflow = sum(r.status is RolloutStatus.CONFIG_CONTEXT for g in result.groups for r in g.records)
        if overflow:
            self.console.print(
                f"[yellow]warning[/]: {overflow} rollout(s) sent a prompt longer than the engine's "
                "context (config_error:context, never trained): serve the model with a longer "
                "context (--max-model-len) or cap max_tokens, or use a harness with a shorter prompt"
            )


def clock(seconds: float) -> str:
    """`1:05`, `12:40`, `1:02:03`."""
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def summary(result: BatchResult) -> dict[str, object]:
    per_task: dict[str, dict[str, object]] = defaultdict(dict)
    for g in result.groups:
        rewards = [r.reward or 0.0 for r in g.kept]
        per_task[g.task_id] = {
            "group_id": g.group_id,
            "valid": g.valid,
            "attempts": len(g.records),
            "in_batch": len(rewards),
            "mean_reward": sum(rewards) / len(rewards) if rewards else None,
        }
    return {"counts": dict(result.counts()), "tasks": per_task}


def write_summary(path: Path, result: BatchResult) -> None:
    path.write_text(json.dumps(summary(result), indent=1))
