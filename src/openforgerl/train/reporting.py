"""Where training metrics go: a JSONL file (source of truth), TensorBoard, a rich table, a PNG curve."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from openforgerl.orchestrator.view import clock

COLUMNS = (
    "step",
    "reward",
    "pass_rate",
    "eval_pass1",
    "train_pass1",
    "kept",
    "dropped",
    "trained_tokens",
    "loss",
    "step_s",
    "policy_version",
)
"""The step table's columns, most important first: a narrow terminal drops them from the right."""


class MetricsLog:
    """Appends one JSON object per step to `metrics.jsonl` and mirrors scalars to TensorBoard."""

    def __init__(self, out_dir: Path, *, tensorboard: bool = True) -> None:
        self.out_dir = out_dir
        out_dir.mkdir(parents=True, exist_ok=True)
        self.path = out_dir / "metrics.jsonl"
        self._tb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(out_dir / "tensorboard"))
            except ImportError:  # tensorboard is an optional extra
                self._tb = None

    def write(self, row: Mapping[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(dict(row)) + "\n")
        if self._tb is not None:
            step = int(row.get("step", 0))
            for key, value in row.items():
                if isinstance(value, int | float) and key != "step":
                    self._tb.add_scalar(key, value, step)
            self._tb.flush()

    def rows(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


_CELL_WIDTH = 9  # "0.123" or "1234567" plus rich's padding and border: measured on the quickstart's rows


def fitting_columns(width: int) -> tuple[str, ...]:
    """The leading columns whose headers and cells fit `width` characters (at least step and reward)."""
    used, cols = 1, list[str]()
    for col in COLUMNS:
        need = max(len(col), _CELL_WIDTH - 3) + 3
        if used + need > width and len(cols) >= 2:
            break
        used += need
        cols.append(col)
    return tuple(cols)


def step_table(
    rows: Sequence[Mapping[str, Any]], *, width: int | None = None, caption: str | None = None
) -> Table:
    """The last 15 steps; with `width`, only the columns that fit it (rich would cut every cell to `rew…`)."""
    cols = COLUMNS if width is None else fitting_columns(width)
    table = Table(title="openforgerl train", show_lines=False, caption=caption)
    for col in cols:
        table.add_column(col, justify="right", no_wrap=True)
    for row in rows[-15:]:
        table.add_row(*(_fmt(row.get(col)) for col in cols))
    return table


@dataclass
class StepProgress:
    """Elapsed time, ETA and the time budget of a training run, in one line per finished step.

    A run whose output goes to a file or a pipe gets these lines as they happen (a live table is only
    drawn on a terminal, and rich draws it once, at the end, anywhere else)."""

    total: int  # steps the run is configured for
    first: int  # the step it started at (after --resume)
    budget_s: float | None  # train.time_budget_s
    started: float = field(default_factory=time.monotonic)
    step_times: list[float] = field(default_factory=list)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def eta(self, done: int) -> float | None:
        """Seconds until the last step at the mean step time so far (None before the first step)."""
        if not self.step_times:
            return None
        return sum(self.step_times) / len(self.step_times) * (self.total - done)

    def status(self, done: int) -> str:
        parts = [f"elapsed {clock(self.elapsed())}"]
        eta = self.eta(done)
        if eta is not None and done < self.total:
            parts.append(f"eta {clock(eta)}")
        if self.budget_s:
            left = self.budget_s - self.elapsed()
            parts.append(f"budget {clock(left)} left" if left > 0 else "budget spent")
            if eta is not None and done < self.total and eta > left:
                parts.append("the budget ends the run first")
        return "  ".join(parts)

    def line(self, row: Mapping[str, Any], done: int) -> str:
        """One line per step, e.g.
        `step 3/60  reward 0.412  pass 0.375  kept 32  dropped 0  loss 0.0123  21.4 s/step  elapsed ...`."""
        if "step_s" in row:
            self.step_times.append(float(row["step_s"]))
        cells = [f"step {done}/{self.total}"]
        for key, name in (
            ("reward", "reward"),
            ("pass_rate", "pass"),
            ("kept", "kept"),
            ("dropped", "dropped"),
            ("loss", "loss"),
            ("eval_pass1", "held-out pass@1"),
        ):
            if row.get(key) is not None:
                cells.append(f"{name} {_fmt(row[key])}")
        if "step_s" in row:
            cells.append(f"{float(row['step_s']):.1f} s/step")
        return "  ".join([*cells, self.status(done)])

    def why_stopped(self, done: int, *, budget_hit: bool) -> str:
        if budget_hit:
            return (
                f"the time budget (train.time_budget_s = {self.budget_s:g} s) stopped the run after step "
                f"{done} of {self.total}"
            )
        return (
            f"all {self.total} steps done" if self.first == 0 else f"steps {self.first + 1}-{self.total} done"
        )


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return "" if value is None else str(value)


def plot_reward_curve(rows: Sequence[Mapping[str, Any]], path: Path, *, title: str = "") -> Path:
    """Mean training reward per step (and held-out pass@1 where evaluated) as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=120)
    steps = [r["step"] for r in rows if "reward" in r]
    rewards = [r["reward"] for r in rows if "reward" in r]
    ax.plot(steps, rewards, marker="o", markersize=3, alpha=0.5, label="train reward (mean per step)")
    if len(rewards) >= 5:  # each step draws a different task subset; the trend is in the average
        avg = [
            sum(rewards[max(0, i - 4) : i + 1]) / len(rewards[max(0, i - 4) : i + 1])
            for i in range(len(rewards))
        ]
        ax.plot(steps, avg, color="C0", linewidth=2, label="train reward (5-step average)")
    evals = [r for r in rows if "eval_pass1" in r]
    if evals:
        ax.plot(
            [r["step"] for r in evals],
            [r["eval_pass1"] for r in evals],
            marker="s",
            linestyle="--",
            label="held-out pass@1",
        )
    trained_on = [r for r in rows if "train_pass1" in r]
    if (
        trained_on
    ):  # `eval.train_group_size`: the warm-up and the trained policy, each evaluated on the train tasks
        ax.plot(
            [r["step"] for r in trained_on],
            [r["train_pass1"] for r in trained_on],
            marker="D",
            linestyle=":",
            color="C3",
            label="train tasks pass@1 (evaluated)",
        )
    ax.set_xlabel("step")
    ax.set_ylabel("reward / pass rate")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title(title or "openforgerl quickstart")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def print_table(console: Console, rows: Sequence[Mapping[str, Any]]) -> None:
    console.print(step_table(rows))
