"""Does the in-process validator agree with the real one? Run a sample through `tasks validate`.

The sample is kept tasks (in-process: no-op 0, oracle 1) plus candidates the in-process validator
rejected at the no-op or oracle filter (written to a scratch folder, never to the output). Both go
through `tasks.validate.validate_tasks` (bubblewrap sandbox, the task's service, its gold replay and
verifier: Claw's or a tool world's); the two verdicts must give the same no-op and oracle rewards.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from openforgerl.synth.compose import Candidate
from openforgerl.synth.filters import Verdict
from openforgerl.synth.loading import load_env
from openforgerl.synth.pipeline import write_candidate
from openforgerl.synth.toolenv import ToolEnv
from openforgerl.synth.world_doc import env_document

__all__ = ["sandbox_agreement"]


def _same(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) < 1e-6


def sandbox_agreement(
    env: str | ToolEnv,
    kept: Sequence[Path],
    rejected: Sequence[tuple[Candidate, Verdict]],
    k: int,
    *,
    seed: int = 0,
    concurrency: int = 4,
) -> dict[str, Any]:
    """Validate `k` kept tasks and every given rejected candidate in real sandboxes; compare."""
    from openforgerl.tasks.loader import load_runtime
    from openforgerl.tasks.validate import validate_tasks

    tool_env = load_env(env)
    if not tool_env.claw and env_document(tool_env) is None:  # code no sandbox can import: not served
        return {"skipped": f"environment {tool_env.name!r} has no sandbox service"}
    sample = random.Random(seed).sample(list(kept), min(k, len(kept)))
    expected: dict[str, tuple[float | None, float | None]] = {}
    with tempfile.TemporaryDirectory(prefix="synth-rejected-") as scratch:
        runtimes = []
        for path in sample:
            rt = load_runtime(path)
            expected[rt.task_id] = (0.0, 1.0)
            runtimes.append(rt)
        for cand, verdict in rejected:
            rt = load_runtime(write_candidate(tool_env, cand, Path(scratch)))
            expected[rt.task_id] = (verdict.noop_reward, verdict.oracle_reward)
            runtimes.append(rt)
        results = asyncio.run(validate_tasks(runtimes, concurrency=concurrency))
    rows: list[dict[str, Any]] = []
    agreed = 0
    for r in results:
        noop, oracle = expected[r.task_id]
        agree = not r.error and _same(r.noop_reward, noop) and _same(r.oracle_reward, oracle)
        agreed += int(agree)
        rows.append(
            {
                "task": r.task_id,
                "in_process": [noop, oracle],
                "sandbox": [r.noop_reward, r.oracle_reward],
                "agree": agree,
                "error": r.error,
                "seconds": round(r.seconds, 2),
            }
        )
    return {
        "checked": len(rows),
        "kept_checked": len(sample),
        "rejected_checked": len(rejected),
        "agreed": agreed,
        "sandbox_valid_kept": sum(1 for r in results[: len(sample)] if r.ok),
        "rows": rows,
    }
