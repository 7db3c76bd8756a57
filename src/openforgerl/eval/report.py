"""An eval report: metrics per harness and per harness × service (a GUI task's services: its environment kind, then
its web apps), as JSON, Markdown and a PNG chart.

`build_report` is pure; `write_report` does the file I/O (matplotlib with the Agg backend, imported
only there).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from openforgerl.eval.metrics import CONFIG, INFRA, Estimate, Trial, count_tasks, group_metrics
from openforgerl.eval.protocols import PROTOCOLS, protocol_of

__all__ = ["build_report", "to_markdown", "write_report"]


def _ks(k: int) -> list[int]:
    return sorted({1, k})


def build_report(trials: Sequence[Trial], k: int, *, threshold: float | None = None, resamples: int = 1000,
                 seed: int = 0, benchmarks: Mapping[str, str] | None = None) -> dict[str, Any]:
    """{config, harnesses: {h: metrics}, services: {h: {s: metrics}}, tasks: {h: [counts]},
    benchmarks: {benchmark: {h: metrics under its authors' protocol}}}.

    `benchmarks` maps task id → its `source`; tasks of an imported benchmark are also reported under
    that benchmark's protocol (eval/protocols.py), with its own success threshold. `threshold` (default
    1.0) is the success threshold of the overall tables only."""
    ks = _ks(k)
    threshold = 1.0 if threshold is None else threshold
    out: dict[str, Any] = {"config": {"k": k, "threshold": threshold, "bootstrap_resamples": resamples,
                                      "seed": seed, "ci": 0.95},
                           "harnesses": {}, "services": {}, "tasks": {}}
    for harness in sorted({t.harness for t in trials}):
        mine = [t for t in trials if t.harness == harness]
        out["harnesses"][harness] = asdict(group_metrics(mine, ks, threshold=threshold, resamples=resamples, seed=seed))
        services = sorted({s for t in mine for s in t.services})
        out["services"][harness] = {
            s: asdict(group_metrics([t for t in mine if s in t.services], ks, threshold=threshold,
                                    resamples=resamples, seed=seed)) for s in services}
        out["tasks"][harness] = [asdict(tc) for tc in count_tasks(mine, threshold)]
    out["infra_dropped"] = [{**asdict(t), "kind": t.kind} for t in trials if t.kind in (INFRA, CONFIG)]
    out["benchmarks"] = _benchmarks(trials, ks, benchmarks or {}, resamples, seed)
    return out


def _benchmarks(trials: Sequence[Trial], ks: list[int], sources: Mapping[str, str], resamples: int,
                seed: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    by_bench: dict[str, list[Trial]] = {}
    for t in trials:
        bench = protocol_of(sources.get(t.task_id, ""))
        if bench is not None:
            by_bench.setdefault(bench, []).append(t)
    for bench, mine in sorted(by_bench.items()):
        proto = PROTOCOLS[bench]
        out[bench] = {"protocol": asdict(proto), "harnesses": {
            h: asdict(group_metrics([t for t in mine if t.harness == h], ks, threshold=proto.threshold,
                                    resamples=resamples, seed=seed))
            for h in sorted({t.harness for t in mine})}}
    return out


def _cell(e: dict[str, Any]) -> str:
    return f"{e['value']:.3f} [{e['low']:.3f}, {e['high']:.3f}]" if e["tasks"] else "n/a"


def _row(name: str, m: dict[str, Any], k: int) -> str:
    cells = [name, str(m["tasks"]), str(m["trials"]), str(m.get("timeouts", 0)), str(m["infra_dropped"]),
             str(m.get("config_errors", 0)), f"{m['mean_reward']:.3f}",
             _cell(m["pass_at"][1]), _cell(m["pass_at"][k]), _cell(m["pass_hat"][k])]
    return "| " + " | ".join(cells) + " |"


def to_markdown(report: dict[str, Any]) -> str:
    k = report["config"]["k"]
    head = (f"| group | tasks | trials | timeouts | infra dropped | config errors | mean reward | pass@1 | "
            f"pass@{k} | pass^{k} |\n|---|---|---|---|---|---|---|---|---|---|")
    lines = [f"# Eval report (k={k}, success = reward >= {report['config']['threshold']}, 95% bootstrap CI)",
             "", "## Per harness", "", head]
    lines += [_row(h, m, k) for h, m in report["harnesses"].items()]
    lines += ["", "## Per harness and service", "", head]
    for h, per in report["services"].items():
        lines += [_row(f"{h} / {s}", m, k) for s, m in per.items()]
    lines += _benchmark_lines(report, k)
    dropped = report["infra_dropped"]
    lines += ["", "Timeouts count as failed trials (in n, never successes) and have no reward (left out of "
              "the mean reward).", "",
              f"Infrastructure-failed and harness-start (config) attempts, excluded from every metric: {len(dropped)}"]
    lines += [f"- {d['harness']} {d['task_id']}: {d['status']}" for d in dropped[:50]]
    return "\n".join(lines) + "\n"


def _benchmark_lines(report: dict[str, Any], k: int) -> list[str]:
    benches = report.get("benchmarks") or {}
    if not benches:
        return []
    lines = ["", "## Per benchmark (each benchmark's authors' protocol: eval/protocols.py)", "",
             f"| benchmark | harness | success | tasks | trials | score | pass@1 | pass@{k} | pass^{k} | "
             "strict acc. | timeouts | infra dropped | config errors |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for bench in benches.values():
        proto = bench["protocol"]
        for h, m in bench["harnesses"].items():
            strict = f"{m['strict_accuracy']:.3f}" if proto["strict_accuracy"] else "–"
            lines.append("| " + " | ".join([
                proto["name"], h, f">= {proto['threshold']}", str(m["tasks"]), str(m["trials"]),
                f"{m['score']:.3f} ({proto['score']})", _cell(m["pass_at"][1]), _cell(m["pass_at"][k]),
                _cell(m["pass_hat"][k]), strict, str(m["timeouts"]), str(m["infra_dropped"]),
                str(m["config_errors"])]) + " |")
    return lines


def _normalise(report: dict[str, Any]) -> dict[str, Any]:
    """JSON keys must be strings; dataclass dicts keyed by k are ints."""
    return json.loads(json.dumps(report, default=lambda o: asdict(o) if isinstance(o, Estimate) else str(o)))


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = report["config"]["k"]
    names = list(report["harnesses"])
    metrics = [("pass@1", lambda m: m["pass_at"][1]), (f"pass@{k}", lambda m: m["pass_at"][k]),
               (f"pass^{k}", lambda m: m["pass_hat"][k])]
    fig, ax = plt.subplots(figsize=(max(4, 1.8 * len(names) + 2), 3.5))
    width = 0.8 / len(metrics)
    for i, (label, get) in enumerate(metrics):
        est = [get(report["harnesses"][h]) for h in names]
        xs = [j + i * width for j in range(len(names))]
        vals = [e["value"] for e in est]
        err = [[v - e["low"] for v, e in zip(vals, est, strict=True)], [e["high"] - v for v, e in zip(vals, est, strict=True)]]
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
    paths = {"json": out_dir / "report.json", "markdown": out_dir / "report.md", "png": out_dir / "report.png"}
    paths["json"].write_text(json.dumps(_normalise(report), indent=1))
    paths["markdown"].write_text(to_markdown(report))
    plot(report, paths["png"])
    return paths

