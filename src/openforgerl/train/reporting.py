"""Where training metrics go: a JSONL file (source of truth), TensorBoard, a rich table, a PNG curve."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

COLUMNS = ("step", "reward", "pass_rate", "eval_pass1", "train_pass1", "kept", "dropped", "trained_tokens", "loss", "step_s", "policy_version")


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


def step_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title="openforgerl train", show_lines=False)
    for col in COLUMNS:
        table.add_column(col, justify="right")
    for row in rows[-15:]:
        table.add_row(*(_fmt(row.get(col)) for col in COLUMNS))
    return table


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
        avg = [sum(rewards[max(0, i - 4): i + 1]) / len(rewards[max(0, i - 4): i + 1]) for i in range(len(rewards))]
        ax.plot(steps, avg, color="C0", linewidth=2, label="train reward (5-step average)")
    evals = [r for r in rows if "eval_pass1" in r]
    if evals:
        ax.plot([r["step"] for r in evals], [r["eval_pass1"] for r in evals], marker="s",
                linestyle="--", label="held-out pass@1")
    trained_on = [r for r in rows if "train_pass1" in r]
    if trained_on:  # `eval.train_group_size`: the warm-up and the trained policy, each evaluated on the train tasks
        ax.plot([r["step"] for r in trained_on], [r["train_pass1"] for r in trained_on], marker="D",
                linestyle=":", color="C3", label="train tasks pass@1 (evaluated)")
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
