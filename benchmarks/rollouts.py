"""Sandbox start cost and rollout throughput on this box (README quotes the output).

1. start: raw `bwrap ... true` vs our sandbox (open + exec `true` + aclose, i.e. netns, forwarder,
   dirs and cleanup included), and our `exec` alone in an open sandbox. Target: ours <= 2x raw.
2. sequential: rollouts one at a time: the orchestration overhead per rollout on an idle pipeline
   (wall time minus the harness's own run: gateway open/close, sandbox boot, verify, teardown).
3. throughput: N concurrent rollouts (default 1,000) of a trivial harness (one model call with
   curl) through the real gateway in front of the in-process scripted engine (a fast fake), each
   in its own bwrap sandbox with its own network namespace; all must complete. Reports wall time,
   rollouts/s and the orchestration overhead per rollout (rollout wall time minus harness time).

Usage: python benchmarks/rollouts.py [--quick] [--n 1000] [--starts 50] [--only start|sequential|throughput]
       [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from openforgerl.engines.scripted import ScriptedEngine
from openforgerl.env.contract import TaskDefaults, Verdict
from openforgerl.gateway.server import start_gateway
from openforgerl.harness.generic import CommandHarness
from openforgerl.orchestrator.batch import run_batch
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.sandbox.base import Sandbox, SandboxSpec
from openforgerl.sandbox.local import LocalBackend, raise_nofile_limit
from openforgerl.store.sqlite import SQLiteCallStore

RAW_BWRAP = [
    "bwrap",
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
    "--unshare-all",
    "--die-with-parent",
    "true",
]
CURL = (
    'curl -sS --max-time 120 -X POST "$OPENAI_BASE_URL/chat/completions" '
    '-H "Authorization: Bearer $OPENAI_API_KEY" -H "content-type: application/json" '
    '-d \'{"model":"m","messages":[{"role":"user","content":"say ok"}]}\' -o /workdir/reply.json'
)


def ms(xs: Sequence[float]) -> dict[str, float]:
    s = sorted(xs)
    return {
        "median_ms": round(statistics.median(s) * 1000, 2),
        "p90_ms": round(s[int(len(s) * 0.9) - 1] * 1000, 2),
        "mean_ms": round(statistics.fmean(s) * 1000, 2),
    }


def raw_start() -> float:
    t = time.perf_counter()
    subprocess.run(RAW_BWRAP, check=True)
    return time.perf_counter() - t


async def our_start(backend: LocalBackend, i: int, gateway_port: int) -> tuple[float, float]:
    """(open + exec true + aclose, exec true alone) for one fresh sandbox."""
    t = time.perf_counter()
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id=f"start-{i}", gateway_port=gateway_port))
    t1 = time.perf_counter()
    await sbx.exec(["true"])
    exec_only = time.perf_counter() - t1
    await sbx.aclose()
    return time.perf_counter() - t, exec_only


async def bench_starts(n: int, root: Path) -> dict[str, Any]:
    """Raw and ours interleaved run by run: the box is shared, so both see the same load."""
    backend = LocalBackend(root=root)
    raw, full, exec_only = [], [], []
    for i in range(n + 3):
        r = raw_start()
        f, e = await our_start(backend, i, 18999)
        if i >= 3:  # warm-up
            raw.append(r)
            full.append(f)
            exec_only.append(e)
    return {
        "raw_bwrap_true": ms(raw),
        "ours_open_exec_close": ms(full),
        "ours_exec_in_open_sandbox": ms(exec_only),
        "ratio_open_exec_close_vs_raw": round(statistics.median(full) / statistics.median(raw), 2),
        "ratio_exec_vs_raw": round(statistics.median(exec_only) / statistics.median(raw), 2),
    }


class ReplyTask(TaskDefaults):
    """Trivial task: the harness must leave the model's reply in /workdir/reply.json."""

    task_id = "trivial"
    instruction = "say ok"
    budget_s = 600.0

    def files(self) -> Mapping[str, bytes]:
        return {"README": b"trivial\n"}

    async def verify(self, sandbox: Sandbox) -> Verdict:
        try:
            body = json.loads(await sandbox.read_file("/workdir/reply.json"))
            ok = float(body["choices"][0]["message"]["content"] == "ok")
        except (FileNotFoundError, ValueError, KeyError, IndexError) as e:  # the agent's failure
            return Verdict(0.0, {"ok": 0.0}, f"no valid reply: {e!r}")
        return Verdict(ok, {"ok": ok}, "")


async def bench_rollouts(n: int, root: Path, max_running: int, max_booting: int) -> dict[str, Any]:
    await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True)
    store = SQLiteCallStore(root / "calls.db")
    gateway = await start_gateway(ScriptedEngine(lambda turn: "ok"), store)
    backend = LocalBackend(root=root / "sbx")
    config = OrchestratorConfig(
        group_size=n, min_group_size=1, retries=0, max_running=max_running, max_booting=max_booting
    )
    try:
        cpu0 = _cpu()
        t0 = time.perf_counter()
        result = await run_batch(
            [ReplyTask()],
            CommandHarness(["sh", "-c", CURL]),
            gateway=gateway.access,
            backend=backend,
            config=config,
        )
        wall = time.perf_counter() - t0
        cpu1 = _cpu()
    finally:
        await gateway.aclose()
        await backend.aclose()
        await store.aclose()
    stats = _rollout_stats(result.records, wall, n)
    stats["cpu_ms_per_rollout"] = {
        "orchestrator_gateway_engine_process": round((cpu1[0] - cpu0[0]) / n * 1000, 2),
        "sandboxes_and_harness_children": round((cpu1[1] - cpu0[1]) / n * 1000, 2),
    }
    return stats


def _cpu() -> tuple[float, float]:
    """(this process, its reaped children) CPU seconds, user + system."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _rollout_stats(records: list[Any], wall: float, n: int) -> dict[str, Any]:
    """Overhead = rollout wall time minus the harness's own run (gateway open, boot, verify, close).

    Under N concurrent rollouts on 2 cores this mostly measures queueing; the sequential run
    (`bench_rollouts(..., max_running=1)`) gives the per-rollout overhead on an idle pipeline.
    """
    timings = [r.metadata.get("timings", {}) for r in records]
    overhead = [t["total_s"] - t.get("harness_s", 0.0) for t in timings if "total_s" in t]
    phase = {
        k: ms([t[k] for t in timings if k in t])
        for k in ("boot_s", "harness_s", "verify_s", "teardown_s", "total_s")
    }
    ok = sum(1 for r in records if str(r.status) == "ok" and r.reward == 1.0)
    return {
        "rollouts": n,
        "attempts": len(records),
        "ok_reward_1": ok,
        "statuses": dict(Counter(str(r.status) for r in records)),
        "wall_s": round(wall, 2),
        "rollouts_per_s": round(n / wall, 2),
        "overhead_per_rollout": ms(overhead),
        "wall_per_rollout_ms": round(wall / n * 1000, 2),
        "phases": phase,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="20 starts, 100 rollouts")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--starts", type=int, default=50)
    ap.add_argument("--max-running", type=int, default=1000)
    ap.add_argument("--max-booting", type=int, default=32)
    ap.add_argument("--sequential", type=int, default=20, help="rollouts run one at a time (idle overhead)")
    ap.add_argument("--only", choices=["start", "sequential", "throughput"])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    n, starts, seq = (100, 20, 5) if args.quick else (args.n, args.starts, args.sequential)
    raise_nofile_limit()
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ofrl-bench-") as tmp:
        if args.only in (None, "start"):
            report["start"] = asyncio.run(bench_starts(starts, Path(tmp) / "starts"))
            print(json.dumps(report, indent=1), flush=True)
        if args.only in (None, "sequential"):
            report["sequential"] = asyncio.run(bench_rollouts(seq, Path(tmp) / "seq", 1, 1))
        if args.only in (None, "throughput"):
            report["throughput"] = asyncio.run(
                bench_rollouts(n, Path(tmp) / "conc", min(args.max_running, n), args.max_booting)
            )
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
