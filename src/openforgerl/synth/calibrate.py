"""Difficulty calibration: run a policy k times per task, record the pass rate, draw tasks from a band.

GRPO learns only from groups whose rewards differ, so training wants tasks the current policy solves
sometimes (0 < p < 1). `calibrate` takes any `RunPolicy` — the orchestrator through `eval.runner`
(`orchestrator_runner`), or an in-process scripted policy (`inprocess_runner`, for tests and dry
runs) — and writes `[metadata.calibration]` into each task.toml (`pass_rate`, `k`, `passes`,
`scored`, `policy`, `at`). `select_band` reads it back; `refresh` re-measures and re-selects as the
policy improves; `pools` splits by pass rate the way prime-rl's `DifficultyPoolSampler` does.
`measure` runs a live policy through `run_batch` with the harness `train` builds; the trainer's
`refresh_every` hook calls it with the weights it has just pushed, and `cli/live_calibration.py`
(`tasks synthesize --calibrate`) with train's own stack or a running gateway. Nothing here imports `train`
(which imports this). (`[metadata.openforgerl]` is strict in `tasks/format.py`, so the numbers live in
their own table.)
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openforgerl.tasks import _toml
from openforgerl.tasks.draft import Action

if TYPE_CHECKING:
    from openforgerl.gateway.access import GatewayAccess
    from openforgerl.orchestrator.config import OrchestratorConfig

__all__ = [
    "Calibration",
    "RunPolicy",
    "calibrate",
    "candidate_from_folder",
    "inprocess_runner",
    "measure",
    "orchestrator_runner",
    "pass_rate",
    "pools",
    "recorded",
    "refresh",
    "select_band",
]

RunPolicy = Callable[[Sequence[Path], int], Mapping[str, Sequence[float | None]]]
"""(task folders, k) → {task_id: k rewards}; None = an infrastructure failure, not counted."""


@dataclass(frozen=True)
class Calibration:
    task_id: str
    path: Path
    pass_rate: float | None
    passes: int
    scored: int


def _task_id(path: Path) -> str:
    data = tomllib.loads((path / "task.toml").read_text())
    return str(data.get("task", {}).get("name") or path.name)


def _record(path: Path, section: dict[str, Any]) -> None:
    toml_path = path / "task.toml"
    data = tomllib.loads(toml_path.read_text())
    data.setdefault("metadata", {})["calibration"] = section
    toml_path.write_text(_toml.dumps(data))


def calibrate(
    tasks: Sequence[Path], run: RunPolicy, k: int = 8, *, policy: str = "", threshold: float = 1.0
) -> list[Calibration]:
    """Run `run` once over all tasks (k attempts each) and write each task's pass rate."""
    rewards = run(list(tasks), k)
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    out = []
    for path in tasks:
        task_id = _task_id(path)
        scored = [r for r in rewards.get(task_id, ()) if r is not None]
        passes = sum(1 for r in scored if r >= threshold - 1e-9)
        rate = passes / len(scored) if scored else None
        section: dict[str, Any] = {
            "k": k,
            "passes": passes,
            "scored": len(scored),
            "policy": policy,
            "at": now,
        }
        _record(path, section | ({"pass_rate": rate} if rate is not None else {}))
        out.append(Calibration(task_id, path, rate, passes, len(scored)))
    return out


def recorded(rewards: Mapping[str, Sequence[float | None]]) -> RunPolicy:
    """A `RunPolicy` that returns rewards already measured (by `measure`, inside a running event loop)."""

    def run(_tasks: Sequence[Path], _k: int) -> Mapping[str, Sequence[float | None]]:
        return rewards

    return run


def pass_rate(path: Path) -> float | None:
    """The recorded pass rate of a task folder (None if never calibrated or nothing was scored)."""
    data = tomllib.loads((path / "task.toml").read_text())
    value = data.get("metadata", {}).get("calibration", {}).get("pass_rate")
    return float(value) if isinstance(value, int | float) else None


def select_band(
    tasks: Sequence[Path], low: float = 0.0, high: float = 1.0, *, inclusive: bool = False
) -> list[Path]:
    """Tasks whose pass rate lies in (low, high) — [low, high] with `inclusive`; uncalibrated ones never."""
    out = []
    for path in tasks:
        p = pass_rate(path)
        if p is not None and ((low <= p <= high) if inclusive else (low < p < high)):
            out.append(path)
    return out


def refresh(
    tasks: Sequence[Path],
    run: RunPolicy,
    k: int = 8,
    low: float = 0.0,
    high: float = 1.0,
    *,
    policy: str = "",
) -> list[Path]:
    """Re-measure every task with the current policy and return the new band."""
    calibrate(tasks, run, k, policy=policy)
    return select_band(tasks, low, high)


def pools(tasks: Sequence[Path], edges: tuple[float, float] = (0.25, 0.75)) -> dict[str, list[Path]]:
    """prime-rl style pools by pass rate: hard ≤ edges[0] < normal ≤ edges[1] < easy."""
    out: dict[str, list[Path]] = {"hard": [], "normal": [], "easy": [], "uncalibrated": []}
    for path in tasks:
        p = pass_rate(path)
        name = (
            "uncalibrated"
            if p is None
            else "hard"
            if p <= edges[0]
            else "normal"
            if p <= edges[1]
            else "easy"
        )
        out[name].append(path)
    return out


# --- runners --------------------------------------------------------------------------------------


def candidate_from_folder(path: Path) -> Any:
    """A written task folder back as a `compose.Candidate` (fixtures, workspace, faults, checks, gold)."""
    from openforgerl.synth.compose import Candidate

    data = tomllib.loads((path / "task.toml").read_text())
    meta, synth = data["metadata"].get("openforgerl", {}), data["metadata"].get("synth", {})
    env_dir = path / "environment"
    fixtures = {p.stem: json.loads(p.read_text()) for p in sorted((env_dir / "fixtures").glob("*.json"))}
    ws = env_dir / "workspace"
    workspace = (
        {str(p.relative_to(ws)): p.read_text() for p in ws.rglob("*") if p.is_file()} if ws.is_dir() else {}
    )
    checks = tomllib.loads((path / "tests" / "checks.toml").read_text())["checks"]
    actions = [
        Action(a["tool"], a["args"]) for a in json.loads((path / "solution" / "actions.json").read_text())
    ]
    faults = list(meta.get("faults") or synth.get("faults") or [])
    return Candidate(
        str(synth.get("env", "claw")),
        _task_id(path),
        (path / "instruction.md").read_text(),
        actions,
        checks,
        fixtures,
        list(meta.get("services", [])),
        str(synth.get("family", "")),
        str(synth.get("variant", "")),
        int(synth.get("n_atoms", 1)),
        faults=faults,
        workspace=workspace,
    )


Policy = Callable[[Any, int], Sequence[Action]]
"""(task as a Candidate, attempt number) → the tool calls it makes."""


def inprocess_runner(env: Any, policy: Policy) -> RunPolicy:
    """Run a scripted policy's calls on the task's world in-process and judge them as the verifier does."""
    from openforgerl.synth.filters import replay, spec_of
    from openforgerl.synth.loading import load_env

    tool_env = load_env(env)

    def run(tasks: Sequence[Path], k: int) -> dict[str, list[float | None]]:
        out: dict[str, list[float | None]] = {}
        for path in tasks:
            cand = candidate_from_folder(path)
            spec = spec_of(cand.checks)
            out[cand.name] = [
                replay(tool_env, cand, spec, list(policy(cand, i))).outcome.reward for i in range(k)
            ]
        return out

    return run


def orchestrator_runner(harness: str, *, gateway: Any, backend: Any, **config: Any) -> RunPolicy:
    """k rollouts per task through the orchestrator (`eval.runner.run_eval`); infra → None, timeout → 0."""
    from openforgerl.eval.runner import run_eval
    from openforgerl.tasks.loader import load_runtime

    def run(tasks: Sequence[Path], k: int) -> dict[str, list[float | None]]:
        runtimes = [load_runtime(p) for p in tasks]
        trials = asyncio.run(
            run_eval(runtimes, [harness], gateway=gateway, backend=backend, group_size=k, **config)
        )
        out: dict[str, list[float | None]] = {}
        for t in trials:
            out.setdefault(t.task_id, []).append(
                None if t.infra else (t.reward if t.reward is not None else 0.0)
            )
        return out

    return run


def run_calibration(
    root: Path,
    gateway: GatewayAccess,
    orchestrator: OrchestratorConfig,
    *,
    harness: str = "zero",
    threshold: float = 1.0,
) -> list[Calibration]:
    """`openforgerl tasks calibrate`: k rollouts per task under `root` through the orchestrator against a
    running gateway (its admin URL and token), in real sandboxes; each task's pass rate is written into
    its task.toml (infra failures are not counted). `orchestrator` is the command's evaluation contract
    (`Config.eval_orchestrator`): k is its `group_size`."""
    from openforgerl.tasks.format import find_tasks
    from openforgerl.tasks.loader import load_runtime

    paths = list(find_tasks(root))
    runtimes = [load_runtime(p) for p in paths]
    by_runtime_id = {rt.task_id: _task_id(p) for rt, p in zip(runtimes, paths, strict=True)}

    async def rollouts() -> dict[str, list[float | None]]:
        from openforgerl.eval.runner import run_eval
        from openforgerl.sandbox.local import LocalBackend

        backend = LocalBackend()
        try:
            trials = await run_eval(
                runtimes,
                [harness],
                gateway=gateway,
                backend=backend,
                config=orchestrator,
            )
        finally:
            await backend.aclose()
        out: dict[str, list[float | None]] = {}
        for t in trials:
            reward = None if t.infra else (t.reward if t.reward is not None else 0.0)
            out.setdefault(by_runtime_id.get(t.task_id, t.task_id), []).append(reward)
        return out

    measured = asyncio.run(rollouts())
    return calibrate(
        paths,
        lambda _tasks, _k: measured,
        orchestrator.group_size,
        policy=f"{harness}@{gateway.admin_url}",
        threshold=threshold,
    )


# --- through a live policy: the running gateway, or the embedded default stack -------------------------


async def measure(
    runtimes: Sequence[Any],
    k: int,
    harness: Any,
    *,
    gateway: Any,
    backend: Any,
    config: Any,
    sink: Any = None,
) -> dict[str, list[float | None]]:
    """k rollouts of every task runtime through `run_batch` (the trainer's own path, so the harness keeps
    the options training gives it); {task.toml name: rewards}, infra → None, timeout → 0 (as the
    orchestrator runner counts). `config`: an `OrchestratorConfig` (its `group_size` is replaced by k)."""
    import dataclasses

    from openforgerl.eval.runner import records_to_trials
    from openforgerl.orchestrator.batch import run_batch

    by_runtime = {rt.task_id: _task_id(rt.task.root) for rt in runtimes}
    cfg = dataclasses.replace(config, group_size=k, min_group_size=1)
    batch = await run_batch(list(runtimes), harness, gateway=gateway, backend=backend, config=cfg, sink=sink)
    out: dict[str, list[float | None]] = {}
    for t in records_to_trials(batch.records):
        out.setdefault(by_runtime.get(t.task_id, t.task_id), []).append(
            None if t.infra else (t.reward if t.reward is not None else 0.0)
        )
    return out
