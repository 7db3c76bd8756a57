"""An eval report: metrics per harness and per harness × service (a GUI task's services: its environment kind,
then its web apps), as JSON, Markdown and a PNG chart.

`build_report` is pure; `write_report` does the file I/O (matplotlib with the Agg backend, imported
only there).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from openforgerl.eval.metrics import CONFIG, INFRA, Estimate, Trial, count_tasks, group_metrics
from openforgerl.eval.scoring import SCORING, benchmark_of

__all__ = ["build_report", "to_markdown", "write_report"]


def _ks(k: int) -> list[int]:
    return sorted({1, k})


def thresholds(
    task_ids: Sequence[str], sources: Mapping[str, str], threshold: float | None
) -> dict[str, float]:
    """The success threshold of each task: the one given, else its benchmark's
    own (eval/scoring.py), else 1.0.

    Every table of a report uses this one map, so a trial passes or fails the same way in the overall
    tables and in its benchmark's table (a Claw-Eval 0.8 passes in both)."""

    def own(task_id: str) -> float:
        bench = benchmark_of(sources.get(task_id, ""))
        return SCORING[bench].threshold if bench is not None else 1.0

    return {t: threshold if threshold is not None else own(t) for t in task_ids}


def threshold_label(threshold: float | None, sources: Mapping[str, str]) -> str:
    """The header's words for the thresholds in use."""
    if threshold is not None:
        return f"success = reward >= {threshold}"
    benches = sorted({b for s in sources.values() if (b := benchmark_of(s)) is not None})
    own = ", ".join(f"{SCORING[b].name} >= {SCORING[b].threshold}" for b in benches)
    return "success = reward >= " + (f"each benchmark's own ({own}; other tasks 1.0)" if own else "1.0")


def build_report(
    trials: Sequence[Trial],
    k: int,
    *,
    threshold: float | None = None,
    resamples: int = 1000,
    seed: int = 0,
    benchmarks: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """{config, harnesses: {h: metrics}, services: {h: {s: metrics}}, tasks: {h: [counts]},
    benchmarks: {benchmark: {h: metrics under its authors' scoring}}}.

    `benchmarks` maps task id → its `source`; tasks of an imported benchmark are also reported under
    that benchmark's scoring (eval/scoring.py). `threshold` None (the default) gives each task its
    benchmark's own success threshold (1.0 for other tasks) in every table; a number applies to all."""
    ks = _ks(k)
    sources = benchmarks or {}
    per_task = thresholds(sorted({t.task_id for t in trials}), sources, threshold)
    out: dict[str, Any] = {
        "config": {
            "k": k,
            "threshold": threshold,
            "success": threshold_label(threshold, sources),
            "bootstrap_resamples": resamples,
            "seed": seed,
            "ci": 0.95,
        },
        "harnesses": {},
        "services": {},
        "tasks": {},
    }
    for harness in sorted({t.harness for t in trials}):
        mine = [t for t in trials if t.harness == harness]
        out["harnesses"][harness] = asdict(
            group_metrics(mine, ks, threshold=per_task, resamples=resamples, seed=seed)
        )
        services = sorted({s for t in mine for s in t.services})
        out["services"][harness] = {
            s: asdict(
                group_metrics(
                    [t for t in mine if s in t.services],
                    ks,
                    threshold=per_task,
                    resamples=resamples,
                    seed=seed,
                )
            )
            for s in services
        }
        out["tasks"][harness] = [asdict(tc) for tc in count_tasks(mine, per_task)]
    out["infra_dropped"] = [{**asdict(t), "kind": t.kind} for t in trials if t.kind in (INFRA, CONFIG)]
    out["benchmarks"] = _benchmarks(trials, ks, sources, per_task, resamples, seed)
    return out


def _benchmarks(
    trials: Sequence[Trial],
    ks: list[int],
    sources: Mapping[str, str],
    per_task: Mapping[str, float],
    resamples: int,
    seed: int,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    by_bench: dict[str, list[Trial]] = {}
    for t in trials:
        bench = benchmark_of(sources.get(t.task_id, ""))
        if bench is not None:
            by_bench.setdefault(bench, []).append(t)
    for bench, mine in sorted(by_bench.items()):
        rule = asdict(SCORING[bench])
        rule["threshold"] = per_task[mine[0].task_id]  # the one threshold every table of this report uses
        out[bench] = {
            "protocol": rule,  # the report's key, as users read it
            "harnesses": {
                h: asdict(
                    group_metrics(
                        [t for t in mine if t.harness == h],
                        ks,
                        threshold=per_task,
                        resamples=resamples,
                        seed=seed,
                    )
                )
                for h in sorted({t.harness for t in mine})
            },
        }
    return out


def _cell(e: dict[str, Any]) -> str:
    return f"{e['value']:.3f} [{e['low']:.3f}, {e['high']:.3f}]" if e["tasks"] else "n/a"


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _pass_heads(k: int) -> list[str]:
    """pass@1, then pass@k and pass^k; at k=1 pass@1 is not repeated (pass^1 is the same number, kept
    under its own name for tau2 readers)."""
    return ["pass@1", f"pass^{k}"] if k == 1 else ["pass@1", f"pass@{k}", f"pass^{k}"]


def _pass_cells(m: dict[str, Any], k: int) -> list[str]:
    cells = [_cell(m["pass_at"][1])] + ([] if k == 1 else [_cell(m["pass_at"][k])])
    return [*cells, _cell(m["pass_hat"][k])]


def _table_head(names: list[str]) -> str:
    return "| " + " | ".join(names) + " |\n|" + "---|" * len(names)


def _row(name: str, m: dict[str, Any], k: int) -> str:
    cells = [
        name,
        str(m["tasks"]),
        str(m["trials"]),
        str(m.get("timeouts", 0)),
        str(m["infra_dropped"]),
        str(m.get("config_errors", 0)),
        _num(m["mean_reward"]),
        *_pass_cells(m, k),
    ]
    return "| " + " | ".join(cells) + " |"


def to_markdown(report: dict[str, Any]) -> str:
    k = report["config"]["k"]
    success = report["config"].get("success") or f"success = reward >= {report['config']['threshold']}"
    head = _table_head(
        [
            "group",
            "tasks",
            "trials",
            "timeouts",
            "infra dropped",
            "config errors",
            "mean reward",
            *_pass_heads(k),
        ]
    )
    lines = [f"# Eval report (k={k}, {success}, 95% bootstrap CI)", "", "## Per harness", "", head]
    lines += [_row(h, m, k) for h, m in report["harnesses"].items()]
    lines += ["", "## Per harness and service", "", head]
    for h, per in report["services"].items():
        lines += [_row(f"{h} / {s}", m, k) for s, m in per.items()]
    lines += _benchmark_lines(report, k)
    dropped = report["infra_dropped"]
    lines += [
        "",
        "Timeouts count as failed trials (in n, never successes) and have no reward (left out of "
        "the mean reward). n/a: no trial to measure.",
        "",
        "Infrastructure-failed and harness-start (config) "
        f"attempts, excluded from every metric: {len(dropped)}",
    ]
    lines += [f"- {d['harness']} {d['task_id']}: {d['status']}" for d in dropped[:50]]
    return "\n".join(lines) + "\n"


def _benchmark_lines(report: dict[str, Any], k: int) -> list[str]:
    benches = report.get("benchmarks") or {}
    if not benches:
        return []
    lines = [
        "",
        "## Per benchmark (each benchmark's authors' scoring: eval/scoring.py)",
        "",
        _table_head(
            [
                "benchmark",
                "harness",
                "success",
                "tasks",
                "trials",
                "score",
                *_pass_heads(k),
                "strict acc.",
                "timeouts",
                "infra dropped",
                "config errors",
            ]
        ),
    ]
    for bench in benches.values():
        rule = bench["protocol"]
        for h, m in bench["harnesses"].items():
            strict = _num(m["strict_accuracy"]) if rule["strict_accuracy"] else "–"
            lines.append(
                "| "
                + " | ".join(
                    [
                        rule["name"],
                        h,
                        f">= {rule['threshold']}",
                        str(m["tasks"]),
                        str(m["trials"]),
                        f"{_num(m['score'])} ({rule['score']})",
                        *_pass_cells(m, k),
                        strict,
                        str(m["timeouts"]),
                        str(m["infra_dropped"]),
                        str(m["config_errors"]),
                    ]
                )
                + " |"
            )
    return lines


def _normalise(report: dict[str, Any]) -> dict[str, Any]:
    """JSON keys must be strings; dataclass dicts keyed by k are ints."""
    out: dict[str, Any] = json.loads(
        json.dumps(report, default=lambda o: asdict(o) if isinstance(o, Estimate) else str(o))
    )
    return out


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = report["config"]["k"]
    names = list(report["harnesses"])
    every: list[tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = [
        ("pass@1", lambda m: m["pass_at"][1]),
        (f"pass@{k}", lambda m: m["pass_at"][k]),
        (f"pass^{k}", lambda m: m["pass_hat"][k]),
    ]
    metrics = every[1:] if k == 1 else every  # at k=1, pass@k is pass@1: drawn once
    fig, ax = plt.subplots(figsize=(max(4, 1.8 * len(names) + 2), 3.5))
    width = 0.8 / len(metrics)
    for i, (label, get) in enumerate(metrics):
        est = [get(report["harnesses"][h]) for h in names]
        xs = [j + i * width for j in range(len(names))]
        vals = [e["value"] for e in est]
        err = [
            [v - e["low"] for v, e in zip(vals, est, strict=True)],
            [e["high"] - v for v, e in zip(vals, est, strict=True)],
        ]
        ax.bar(xs, vals, width, yerr=err, capsize=3, label=label)
    ax.set_xticks([j + width for j in range(len(names))], names)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success")
    ax.legend(fontsize=8)
    ax.set_title("pass@k / pass^k per harness (95% CI)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_report(report: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """report.json, report.md, report.png under out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out_dir / "report.json",
        "markdown": out_dir / "report.md",
        "png": out_dir / "report.png",
    }
    paths["json"].write_text(json.dumps(_normalise(report), indent=1))
    paths["markdown"].write_text(to_markdown(report))
    plot(report, paths["png"])
    return paths
