"""What one rollout costs the cluster's shared parts, measured, and a sizing for N concurrent rollouts.

Measured here, on a real `openforgerl gateway` process over a throwaway PostgreSQL server
(`testing/postgres.py`, fsync on) in front of the scripted engine: `--rollouts` agent-shaped rollouts of
`--turns` calls each (every turn resends the conversation so far plus a ~1 KB tool result and gets a
32-token answer), opened, called and closed through the admin and model APIs. Per call: the gateway's CPU
(psutil), PostgreSQL's CPU (its backends), the rows it inserted and updated and the transactions it
committed (`pg_stat_database`), its WAL bytes (`pg_current_wal_lsn`) and how much the database grew.

Then the sizing for `--concurrent` rollouts, from those figures and three inputs given on the command line
(their defaults are measured figures, each named in docs/kubernetes.md with its command):
`--call-interval-s` (a rollout's time between calls: engine time plus tool time; the one input that is a
property of the workload, not of openforgerl), `--rollout-mib` and `--rollout-cpus` (what an environment
Pod needs), `--screenshot-kib` (one new screenshot per call, GUI rollouts only).

    python benchmarks/cluster_sizing.py --concurrent 1000 --call-interval-s 5 0.5
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import time
from dataclasses import dataclass

import aiohttp
from gateway_replicas import TOKEN, Proc, _tree_cpu, start_engine, start_gateway  # benchmarks/ on sys.path

TOOL_RESULT = "x" * 1000
REPLICA_CORES = 0.7  # keep each replica's one event-loop core below 70 % busy: latency grows past it
NODE_ALLOCATABLE = (
    14.0,
    56 * 1024,
)  # cores, MiB a 16-core / 64 GiB node leaves to Pods after system reserves


@dataclass(frozen=True)
class PerCall:
    gateway_us: float
    postgres_us: float
    rows: float  # inserted + updated
    commits: float
    wal_bytes: float
    db_bytes: float


def pg_figures(url: str) -> tuple[int, int, int, int]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT tup_inserted + tup_updated, xact_commit, pg_current_wal_lsn() - '0/0'::pg_lsn, "
            "pg_database_size(current_database()) FROM pg_stat_database "
            "WHERE datname = current_database()"
        ).fetchone()
        conn.execute("SELECT pg_stat_clear_snapshot()")
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2]), int(row[3])


async def agent_rollouts(gw: Proc, rollouts: int, turns: int) -> int:
    """`rollouts` at once, each `turns` calls whose prompt grows like an agent's; returns the calls made."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    done = 0
    async with aiohttp.ClientSession() as http:

        async def one(i: int) -> None:
            nonlocal done
            async with http.post(gw.admin_url + "/rollouts", json={"task_id": f"t{i}"}, headers=auth) as r:
                ro = await r.json()
            key = {"Authorization": f"Bearer {ro['api_key']}"}
            messages: list[dict[str, str]] = [
                {"role": "system", "content": "You are an agent. " * 50},
                {"role": "user", "content": f"task {i}: fix the bug"},
            ]
            for _ in range(turns):
                body = {"model": "m", "messages": messages, "max_tokens": 32}
                async with http.post(
                    f"{gw.model_url}/r/{ro['rollout_id']}/v1/chat/completions", json=body, headers=key
                ) as r:
                    reply = await r.json()
                    if r.status != 200:
                        raise RuntimeError(f"call failed: {r.status} {reply}")
                done += 1
                messages += [
                    {"role": "assistant", "content": reply["choices"][0]["message"]["content"] or ""},
                    {"role": "user", "content": TOOL_RESULT},
                ]
            async with http.post(
                f"{gw.admin_url}/rollouts/{ro['rollout_id']}/close", json={}, headers=auth
            ) as r:
                await r.read()

        await asyncio.gather(*(one(i) for i in range(rollouts)))
    return done


async def measure(rollouts: int, turns: int) -> tuple[PerCall, int]:
    from openforgerl.testing.postgres import find_bindir, start

    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("error: PostgreSQL server binaries not found (apt-get install postgresql)")
    server = start(bindir)
    engine = await start_engine()
    try:
        url = server.create_database("sizing")
        gw = await start_gateway(engine.model_url, url)
        try:
            await agent_rollouts(gw, 4, 2)  # warm-up: imports, connections, the schema
            pg0, gw0, db0 = pg_figures(url), gw.cpu(), _tree_cpu(server.proc.pid)
            calls = await agent_rollouts(gw, rollouts, turns)
            # a PostgreSQL backend publishes its counters at most once a second while busy and within
            # 10 s once idle: read them after that (measured: 1 s later the gateway's inserts were missing)
            await asyncio.sleep(11.0)
            gw1, db1, pg1 = gw.cpu(), _tree_cpu(server.proc.pid), pg_figures(url)
        finally:
            gw.stop()
    finally:
        engine.stop()
        server.stop()
    d = [b - a for a, b in zip(pg0, pg1, strict=True)]
    return PerCall(
        gateway_us=(gw1 - gw0) / calls * 1e6,
        postgres_us=(db1 - db0) / calls * 1e6,
        rows=d[0] / calls,
        commits=d[1] / calls,
        wal_bytes=d[2] / calls,
        db_bytes=d[3] / calls,
    ), calls


def sizing(
    per: PerCall, n: int, interval_s: float, rollout_mib: float, rollout_cpus: float, screenshot_kib: float
) -> list[str]:
    rate = n / interval_s
    gw_cores = rate * per.gateway_us / 1e6
    pg_cores = rate * per.postgres_us / 1e6
    replicas = max(2, math.ceil(gw_cores / REPLICA_CORES))  # two at least: one may be drained
    nodes = max(
        math.ceil(n * rollout_cpus / NODE_ALLOCATABLE[0]), math.ceil(n * rollout_mib / NODE_ALLOCATABLE[1])
    )
    return [
        f"model calls/s                 {rate:10.0f}   ({n} "
        f"rollouts / {interval_s:g} s between a rollout's calls)",
        f"gateway cores                 {gw_cores:10.2f}   -> "
        f"{replicas} replicas at <= {REPLICA_CORES:.0%} of a core each",
        f"PostgreSQL cores              {pg_cores:10.2f}",
        f"PostgreSQL commits/s          {rate * per.commits:10.0f}",
        f"PostgreSQL rows written/s     {rate * per.rows:10.0f}",
        f"PostgreSQL WAL MiB/s          {rate * per.wal_bytes / 2**20:10.2f}",
        f"call log growth GiB/hour      {rate * per.db_bytes * 3600 / 2**30:10.2f}",
        f"blob MiB/s (GUI, 1 new shot)  {rate * screenshot_kib / 1024:10.2f}   (text rollouts: 0)",
        f"environment nodes             {nodes:10d}   ({n} x {rollout_cpus:g} CPU, {rollout_mib:g} MiB on "
        f"{NODE_ALLOCATABLE[0]:g}-core / {NODE_ALLOCATABLE[1] // 1024:g} GiB allocatable nodes)",
    ]


def pod_requests() -> tuple[float, float]:
    """(CPUs, MiB) a rollout Pod rendered with the backend's defaults requests, summed over its containers
    (the agent's and the services one), so the sizing follows the manifests instead of a copy of them."""
    from openforgerl.sandbox.base import SandboxSpec
    from openforgerl.sandbox.kubernetes.config import KubernetesConfig
    from openforgerl.sandbox.kubernetes.manifests import render_pod

    pod = render_pod(SandboxSpec(rollout_id="sizing"), KubernetesConfig())
    requests = [c["resources"]["requests"] for c in pod["spec"]["containers"]]
    cpus = sum(int(r["cpu"].removesuffix("m")) for r in requests) / 1000
    return cpus, float(sum(int(r["memory"].removesuffix("Mi")) for r in requests))


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rollouts", type=int, default=32, help="measured rollouts, all at once")
    ap.add_argument("--turns", type=int, default=10, help="calls per measured rollout")
    ap.add_argument("--concurrent", type=int, default=1000)
    ap.add_argument(
        "--call-interval-s",
        type=float,
        nargs="+",
        default=[5.0],
        help="seconds between a rollout's calls; several values give one sizing each",
    )
    cpus, mib = pod_requests()
    ap.add_argument(
        "--rollout-mib",
        type=float,
        default=mib,
        help="an environment Pod's memory request (default: the rendered rollout Pod's)",
    )
    ap.add_argument(
        "--rollout-cpus",
        type=float,
        default=cpus,
        help="an environment Pod's CPU request (default: the rendered rollout Pod's)",
    )
    ap.add_argument("--screenshot-kib", type=float, default=55.0)
    args = ap.parse_args()
    t0 = time.monotonic()
    per, calls = await measure(args.rollouts, args.turns)
    print(
        f"{os.cpu_count()} cores; {args.rollouts} rollouts x {args.turns} calls = {calls} calls in "
        f"{time.monotonic() - t0:.1f} s, one gateway on PostgreSQL"
    )
    print(
        f"per call: gateway {per.gateway_us:.0f} us CPU, PostgreSQL {per.postgres_us:.0f} us CPU, "
        f"{per.commits:.2f} commits, {per.rows:.2f} rows written, {per.wal_bytes / 1024:.1f} KiB WAL, "
        f"{per.db_bytes / 1024:.1f} KiB database growth"
    )
    for interval in args.call_interval_s:
        print(f"sizing for {args.concurrent} concurrent rollouts, {interval:g} s between a rollout's calls:")
        for line in sizing(
            per, args.concurrent, interval, args.rollout_mib, args.rollout_cpus, args.screenshot_kib
        ):
            print("  " + line)


if __name__ == "__main__":
    asyncio.run(main())
