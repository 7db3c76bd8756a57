"""`analyze`'s report: per run (or checkpoint) × harness × task family, with CIs, split by pass/fail.

`collect_facts` reads run directories (the only I/O besides `write_report`); `summarize` is pure.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from openforgerl.analytics.bootstrap import Estimate, bootstrap_mean
from openforgerl.analytics.events import rollout_events
from openforgerl.analytics.metrics import GoldAction, RolloutBehaviour, RolloutFacts, behaviour
from openforgerl.analytics.rundir import RunDir, TaskIndex, suite_family
from openforgerl.records import RolloutRecord

__all__ = ["METRICS", "collect_facts", "passed", "summarize", "to_markdown", "write_report"]

METRICS: dict[str, str] = {
    "pass": "pass rate",
    "sv": "self-verification",
    "sv_frac": "verified writes / writes",
    "tc": "distinct tools",
    "tc_norm": "share of offered tools",
    "tc_req": "share of gold tools",
    "er": "error recovery",
    "cfs": "catastrophic first step",
    "pc": "plan completion",
    "iba": "inspect before act",
    "loop": "longest identical-call loop",
    "rep_ratio": "repeated calls",
    "tool_calls": "tool calls",
}
CONDITIONAL = {"p_pass_given_cfs": "cfs", "p_pass_given_error": "errors", "p_pass_given_fault": "faults"}
"""P(pass | the rollout had it): a catastrophic first step, >= 1 error, >= 1 injected fault."""
UNIT_METRICS = ("pass", "sv", "tc_norm", "tc_req", "er", "cfs", "pc", "iba")
"""Metrics in [0, 1], drawn together in the chart."""


def passed(record: RolloutRecord) -> bool:
    if "pass" in record.reward_components:
        return record.reward_components["pass"] >= 1.0
    return (record.reward or 0.0) >= 1.0


def _label(run: RunDir, record: RolloutRecord, by_version: bool) -> str:
    if not by_version:
        return run.label
    return f"{run.label}@v{max(record.policy_versions, default=0)}"


def collect_facts(
    runs: Sequence[RunDir], tasks: TaskIndex, *, kind: str = "auto", by_version: bool = True
) -> list[RolloutFacts]:
    """One `RolloutFacts` per scored rollout (infra failures are left out, timeouts count as fails)."""
    out = []
    for run in runs:
        records = list(run.iter_rollouts())
        kinds = {k for k, _ in records}
        want = ("eval" if "eval" in kinds else None) if kind == "auto" else kind
        conn = run.connect()
        for k, rec in records:
            if (want not in (None, "all") and k != want) or rec.status is None or rec.status.is_infra:
                continue
            calls = run.calls(rec.rollout_id, conn)
            out.append(_facts(run, rec, calls, tasks, by_version))
        if conn is not None:
            conn.close()
    return out


def _facts(
    run: RunDir, rec: RolloutRecord, calls: list[Any], tasks: TaskIndex, by_version: bool
) -> RolloutFacts:
    task = tasks.facts(rec.task_id)
    events = tuple(rollout_events(calls, run.audit(rec.rollout_id)))
    return RolloutFacts(
        rollout_id=rec.rollout_id,
        events=events,
        passed=passed(rec),
        task_id=rec.task_id or "?",
        harness=rec.harness or "?",
        family=suite_family(rec.task_id),
        run=_label(run, rec, by_version),
        reward=rec.reward,
        offered=frozenset(task.offered) if task else frozenset(),
        gold=tuple(GoldAction(t, a) for t, a in task.gold) if task else (),
        forbidden=tuple(GoldAction(t, a) for t, a in task.forbidden) if task else (),
        model_calls=sum(not c.side_call for c in calls),
    )


def _metric_value(b: RolloutBehaviour, name: str) -> float | None:
    if name == "pass":
        return float(b.passed)
    value = getattr(b, name)
    return None if value is None else float(value)


def _estimate(
    rows: Iterable[RolloutBehaviour],
    get: Callable[[RolloutBehaviour], float | None],
    seed: int,
    resamples: int,
) -> Estimate:
    by_task: dict[str, list[float]] = defaultdict(list)
    for b in rows:
        v = get(b)
        if v is not None:
            by_task[b.task_id].append(v)
    return bootstrap_mean(by_task, resamples=resamples, seed=seed)


def _group(rows: list[RolloutBehaviour], seed: int, resamples: int) -> dict[str, Any]:
    out: dict[str, Any] = {"rollouts": len(rows), "tasks": len({b.task_id for b in rows}), "metrics": {}}
    for name in METRICS:

        def get(b: RolloutBehaviour, name: str = name) -> float | None:
            return _metric_value(b, name)

        out["metrics"][name] = {
            "all": asdict(_estimate(rows, get, seed, resamples)),
            "pass": asdict(_estimate([b for b in rows if b.passed], get, seed, resamples)),
            "fail": asdict(_estimate([b for b in rows if not b.passed], get, seed, resamples)),
        }
    for name, cond in CONDITIONAL.items():

        def hit(b: RolloutBehaviour, cond: str = cond) -> bool:
            value = getattr(b, cond)
            return bool(value) if value is not None else False

        sub = [b for b in rows if hit(b)]
        out["metrics"][name] = {"all": asdict(_estimate(sub, lambda b: float(b.passed), seed, resamples))}
    return out


def summarize(
    behaviours: Sequence[RolloutBehaviour], *, seed: int = 0, resamples: int = 1000
) -> dict[str, Any]:
    """{config, runs: [...], groups: {run: {harness: {family: group}}}} with family/harness `all` rows."""
    bases: dict[str, int] = {}
    for b in behaviours:  # runs in the order given, each run's checkpoints by version
        bases.setdefault(b.run.rpartition("@v")[0] or b.run, len(bases))
    runs = sorted({b.run for b in behaviours}, key=lambda r: _run_order(r, bases))
    groups: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        mine = [b for b in behaviours if b.run == run]
        groups[run] = {"all": {"all": _group(mine, seed, resamples)}}
        for harness in sorted({b.harness for b in mine}):
            hs = [b for b in mine if b.harness == harness]
            groups[run][harness] = {"all": _group(hs, seed, resamples)}
            for family in sorted({b.family for b in hs}):
                groups[run][harness][family] = _group([b for b in hs if b.family == family], seed, resamples)
    return {
        "config": {
            "seed": seed,
            "bootstrap_resamples": resamples,
            "ci": 0.95,
            "unit": "task",
            "recovery_window": 4,
        },
        "metric_names": {**METRICS, **{k: f"P(pass given {v})" for k, v in CONDITIONAL.items()}},
        "runs": runs,
        "groups": groups,
    }


def _run_order(label: str, bases: dict[str, int]) -> tuple[int, int]:
    base, _, version = label.rpartition("@v")
    if base and version.isdigit():
        return bases.get(base, 0), int(version)
    return bases.get(label, 0), -1


def _cell(est: dict[str, Any]) -> str:
    if est["value"] is None:
        return "–"
    return f"{est['value']:.2f} [{est['low']:.2f}, {est['high']:.2f}] (n={est['n']})"


def to_markdown(summary: dict[str, Any]) -> str:
    names = summary["metric_names"]
    lines = [
        "# Behaviour analytics",
        "",
        "Value [95 % bootstrap CI over tasks] (n = rollouts where the metric is defined). "
        "Definitions: docs/analytics.md.",
        "",
    ]
    head = ["metric", *summary["runs"]]
    lines += ["## All harnesses and families", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, title in names.items():
        cells = [_cell(summary["groups"][r]["all"]["all"]["metrics"][key]["all"]) for r in summary["runs"]]
        lines.append(f"| {title} (`{key}`) | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Split by outcome (pass / fail)",
        "",
        "| metric | " + " | ".join(f"{r} pass | {r} fail" for r in summary["runs"]) + " |",
        "|" + "---|" * (1 + 2 * len(summary["runs"])),
    ]
    for key in METRICS:
        cells = []
        for r in summary["runs"]:
            m = summary["groups"][r]["all"]["all"]["metrics"][key]
            cells += [_cell(m["pass"]), _cell(m["fail"])]
        lines.append(f"| `{key}` | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Per harness × task family (value, n)",
        "",
        "| run | harness | family | rollouts | " + " | ".join(f"`{k}`" for k in METRICS) + " |",
        "|" + "---|" * (4 + len(METRICS)),
    ]
    for r in summary["runs"]:
        for h, fams in summary["groups"][r].items():
            if h == "all":
                continue
            for fam, g in fams.items():
                vals = [g["metrics"][k]["all"] for k in METRICS]
                cells = ["–" if v["value"] is None else f"{v['value']:.2f} ({v['n']})" for v in vals]
                lines.append(f"| {r} | {h} | {fam} | {g['rollouts']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(summary: dict[str, Any], path: Path) -> Path:
    """Grouped bars per metric, one bar per run (the paper's Fig. 5 form), 95 % CI whiskers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = summary["runs"]
    fig, axes = plt.subplots(
        1,
        2,
        figsize=(min(16.0, 6.0 + 0.9 * len(runs) * 2), 3.8),
        gridspec_kw={"width_ratios": [len(UNIT_METRICS), 3]},
        dpi=110,
    )
    _bars(axes[0], summary, UNIT_METRICS, runs)
    axes[0].set_ylim(0, 1.05)
    axes[0].set_ylabel("rate")
    axes[0].set_title("behaviour rates (95% CI over tasks)")
    _bars(axes[1], summary, ("tc", "loop", "tool_calls"), runs)
    axes[1].set_title("counts per rollout")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=max(1, len(runs)), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(path)
    plt.close(fig)
    return path


def _bars(ax: Any, summary: dict[str, Any], metrics: Sequence[str], runs: Sequence[str]) -> None:
    width = 0.8 / max(1, len(runs))
    for i, run in enumerate(runs):
        ests = [summary["groups"][run]["all"]["all"]["metrics"][m]["all"] for m in metrics]
        vals = [e["value"] if e["value"] is not None else 0.0 for e in ests]
        err = [
            [
                max(0.0, v - (e["low"] if e["low"] is not None else v))
                for v, e in zip(vals, ests, strict=True)
            ],
            [
                max(0.0, (e["high"] if e["high"] is not None else v) - v)
                for v, e in zip(vals, ests, strict=True)
            ],
        ]
        xs = [j + (i - (len(runs) - 1) / 2) * width for j in range(len(metrics))]
        ax.bar(xs, vals, width, yerr=err, capsize=2, label=run)
        for x, e in zip(xs, ests, strict=True):
            if e["value"] is None:  # undefined (e.g. no error to recover from): say so, never draw a 0
                ax.text(x, 0.01, "n/a", ha="center", va="bottom", fontsize=6, rotation=90, color="0.4")
    ax.set_xticks(range(len(metrics)), metrics, rotation=30, fontsize=8)
    ax.grid(axis="y", alpha=0.3)


def write_report(
    summary: dict[str, Any], behaviours: Sequence[RolloutBehaviour], out_dir: Path
) -> dict[str, Path]:
    """analytics.json, analytics.md, analytics.png, rollouts.jsonl (per-rollout values) under out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out_dir / "analytics.json",
        "markdown": out_dir / "analytics.md",
        "png": out_dir / "analytics.png",
        "rollouts": out_dir / "rollouts.jsonl",
    }
    paths["json"].write_text(json.dumps(summary, indent=1))
    paths["markdown"].write_text(to_markdown(summary))
    paths["rollouts"].write_text("".join(json.dumps(b.as_dict()) + "\n" for b in behaviours))
    try:
        plot(summary, paths["png"])
    except ImportError:  # matplotlib is in the `train`/`dev` extras: without it, no chart
        del paths["png"]
    return paths


def analyze(
    runs: Sequence[RunDir],
    tasks: TaskIndex,
    *,
    kind: str = "auto",
    by_version: bool = True,
    seed: int = 0,
    resamples: int = 1000,
) -> tuple[dict[str, Any], list[RolloutBehaviour]]:
    behaviours = [behaviour(f) for f in collect_facts(runs, tasks, kind=kind, by_version=by_version)]
    return summarize(behaviours, seed=seed, resamples=resamples), behaviours
