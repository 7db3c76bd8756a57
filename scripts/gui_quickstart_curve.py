"""The GUI quickstart's curve: train `tiny-vl` in `zero-gui` on the browser tasks, then plot it into docs/.

    python scripts/gui_quickstart_curve.py            # runs `openforgerl train examples/gui_quickstart.yaml`
    python scripts/gui_quickstart_curve.py --plot-only runs/gui_quickstart  # re-plot a run, finished or not

Writes `docs/gui_quickstart_reward_curve.png` (train reward per step, its 5-step average, held-out pass@1
before/after) and `docs/gui_quickstart_metrics.jsonl` (the run's metrics.jsonl), and prints the numbers the
README quotes: train reward mean of the first / last five steps, held-out pass@1 before / after, wall time
and the machine's load average over the run (sampled every 30 s; the box is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "gui_quickstart.yaml"
DOCS = ROOT / "docs"


def rows_of(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return (
        [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    )


def summary(rows: list[dict]) -> dict:
    rewards = [r["reward"] for r in rows if "reward" in r]
    evals = [r["eval_pass1"] for r in rows if "eval_pass1" in r]
    trained = [r["train_pass1"] for r in rows if "train_pass1" in r]  # eval.train_group_size
    head, tail = rewards[:5], rewards[-5:]
    return {
        "steps": len(rewards),
        "reward_first5": sum(head) / len(head) if head else None,
        "reward_last5": sum(tail) / len(tail) if tail else None,
        "eval_before": evals[0] if evals else None,
        "eval_after": evals[-1] if len(evals) > 1 else None,
        "train_before": trained[0] if trained else None,
        "train_after": trained[-1] if len(trained) > 1 else None,
    }


def plot(run_dir: Path, note: str = "") -> dict:
    sys.path.insert(0, str(ROOT / "src"))
    from openforgerl.train.reporting import plot_reward_curve

    rows = rows_of(run_dir)
    DOCS.mkdir(exist_ok=True)
    s = summary(rows)
    title = "GUI quickstart: tiny-vl in zero-gui, browser tasks" + (f" ({note})" if note else "")
    plot_reward_curve(rows, DOCS / "gui_quickstart_reward_curve.png", title=title)
    shutil.copyfile(run_dir / "metrics.jsonl", DOCS / "gui_quickstart_metrics.jsonl")
    return s


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plot-only", type=Path, help="a run directory to plot (no training)")
    ap.add_argument("--config", type=Path, default=CONFIG)
    ns = ap.parse_args()
    if ns.plot_only:
        print(json.dumps(plot(ns.plot_only)))
        return 0
    import yaml

    run_dir = ROOT / yaml.safe_load(ns.config.read_text())["out_dir"]
    shutil.rmtree(run_dir, ignore_errors=True)  # a fresh run: metrics.jsonl is appended to, never truncated
    loads: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(30.0):
            loads.append(os.getloadavg()[0])

    threading.Thread(target=sample, daemon=True).start()
    t0 = time.monotonic()
    loads.append(os.getloadavg()[0])
    # this interpreter, not .venv/bin/openforgerl: a console script keeps the venv it was installed from,
    # which in a second git worktree is the other checkout's (it trained the other branch's code)
    cli = "import sys; from openforgerl.cli import main; sys.exit(main())"
    rc = subprocess.call([sys.executable, "-c", cli, "train", str(ns.config)], cwd=ROOT)
    done.set()
    wall = time.monotonic() - t0
    note = f"load {min(loads):.0f}-{max(loads):.0f}"
    s = plot(run_dir, note) | {
        "exit": rc,
        "wall_s": round(wall, 1),
        "load_min": round(min(loads), 1),
        "load_mean": round(sum(loads) / len(loads), 1),
        "load_max": round(max(loads), 1),
    }
    print(json.dumps(s))
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
