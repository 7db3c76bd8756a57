"""Gateway replicas on one PostgreSQL call log against one gateway on SQLite: throughput and CPU per call.

Each setup runs real `openforgerl gateway` processes in front of the scripted fast fake engine (its
own process, vLLM wire shape, 32-token answers) and a closed-loop load of `--concurrency` clients,
each on a rollout of its own, its calls spread round-robin over the replicas (a load balancer):
  sqlite x1    - the embedded default (journal + batched SQLite commits)
  postgres xN  - N replicas (1, 2, 4) on one throwaway PostgreSQL server (`testing/postgres.py`,
                 fsync and synchronous_commit on: every answered call is committed and flushed)
Reported per setup: calls/s, the gateways' CPU per call (all replicas, user+system, psutil), the
PostgreSQL server's CPU per call, and the p50/p99 latency the clients saw. Every process shares this
box's cores, so more replicas than cores measure contention, not scale-out; run it where each replica
has a core to see that.

    python benchmarks/gateway_replicas.py --seconds 5
    python benchmarks/gateway_replicas.py --blobs     # the blob storage choice (store/postgres.py)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import psutil
from gateway_overhead import free_port, wait_ready  # benchmarks/ is the script's folder on sys.path

TOKEN, SECRET = "bench-admin-token", "bench-key-secret"


@dataclass
class Proc:
    popen: subprocess.Popen[bytes]
    model_url: str = ""
    admin_url: str = ""

    def cpu(self) -> float:
        try:
            t = psutil.Process(self.popen.pid).cpu_times()
        except psutil.NoSuchProcess:
            return 0.0
        return float(t.user + t.system)

    def stop(self) -> None:
        self.popen.terminate()
        try:
            self.popen.wait(10)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def _spawn(module_args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", *module_args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


async def start_engine() -> Proc:
    port = free_port()
    text = " ".join(f"w{i}" for i in range(32))
    popen = _spawn(
        ["openforgerl.engines.scripted_server", "--port", str(port), "--text", text], dict(os.environ)
    )
    proc = Proc(popen, f"http://127.0.0.1:{port}")
    await wait_ready(proc.model_url + "/v1/models", popen, 60)
    return proc


async def start_gateway(engine_url: str, store: str) -> Proc:
    port, admin = free_port(), free_port()
    env = {**os.environ, "OPENFORGERL_ADMIN_TOKEN": TOKEN, "OPENFORGERL_GATEWAY_SECRET": SECRET}
    popen = _spawn(
        [
            "openforgerl.gateway",
            "--engine",
            engine_url + "/v1",
            "--model",
            "m",
            "--port",
            str(port),
            "--admin-port",
            str(admin),
            "--store",
            store,
        ],
        env,
    )
    proc = Proc(popen, f"http://127.0.0.1:{port}", f"http://127.0.0.1:{admin}")
    await wait_ready(proc.admin_url + "/healthz", popen, 60)
    return proc


async def drive(gateways: list[Proc], concurrency: int, seconds: float) -> list[float]:
    """Closed loop: `concurrency` clients, one rollout each, calls round-robin over the replicas."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    latencies: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        rollouts = []
        for i in range(concurrency):
            async with http.post(
                gateways[i % len(gateways)].admin_url + "/rollouts", json={"task_id": "b"}, headers=auth
            ) as r:
                rollouts.append(await r.json())
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 32}
        end = time.monotonic() + seconds

        async def client(i: int) -> None:
            ro, n = rollouts[i], i
            headers = {"Authorization": f"Bearer {ro['api_key']}"}
            while time.monotonic() < end:
                gw = gateways[n % len(gateways)]
                n += 1
                start = time.monotonic()
                async with http.post(
                    f"{gw.model_url}/r/{ro['rollout_id']}/v1/chat/completions", json=body, headers=headers
                ) as r:
                    await r.read()
                    if r.status == 200:
                        latencies.append(time.monotonic() - start)

        await asyncio.gather(*(client(i) for i in range(concurrency)))
    return latencies


def _tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its children (PostgreSQL's backends and helpers)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.NoSuchProcess:
            pass
    return total


async def run_setup(
    name: str, engine: Proc, stores: list[str], seconds: float, concurrency: int, db_pid: int | None
) -> None:
    gateways = await asyncio.gather(*(start_gateway(engine.model_url, s) for s in stores))
    try:
        await drive(gateways, concurrency, min(1.0, seconds))  # warm-up: imports, connections, caches
        cpu0 = sum(g.cpu() for g in gateways)
        db0 = _tree_cpu(db_pid) if db_pid else 0.0
        t0 = time.monotonic()
        lat = await drive(gateways, concurrency, seconds)
        wall = time.monotonic() - t0
        cpu = sum(g.cpu() for g in gateways) - cpu0
        db = (_tree_cpu(db_pid) - db0) if db_pid else 0.0
    finally:
        for g in gateways:
            g.stop()
    n = max(len(lat), 1)
    q = statistics.quantiles(lat, n=100) if len(lat) > 1 else [0.0] * 99
    db_text = f"{db / n * 1e6:7.0f}" if db_pid else "      -"
    print(
        f"{name:<13} {len(lat) / wall:8.0f} {cpu / n * 1e6:9.0f} "
        f"{db_text}   {q[49] * 1e3:6.1f} {q[98] * 1e3:6.1f}",
        flush=True,
    )


async def blob_costs(url: str, count: int = 400) -> None:
    """`--blobs`: CPU and wall per new 41 KB blob, a bytea row of the PostgreSQL store (one at a time,
    and 16 in flight) against a pack-file append (`store/blobfiles.py`), plain and fdatasync'd."""
    import hashlib
    import resource

    from openforgerl.store.blobfiles import BlobFiles
    from openforgerl.store.postgres import PostgresCallStore

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    for in_flight in (1, 16):
        blobs = [os.urandom(41_000) for _ in range(count)]
        store = PostgresCallStore(url)
        gate = asyncio.Semaphore(in_flight)

        async def put(data: bytes, store: PostgresCallStore = store, gate: asyncio.Semaphore = gate) -> None:
            async with gate:
                await store.put_blob(hashlib.sha256(data).hexdigest(), data, "image/png")

        t, c = time.monotonic(), cpu()
        await asyncio.gather(*(put(b) for b in blobs))
        wall, used = time.monotonic() - t, cpu() - c
        await store.aclose()
        print(
            f"bytea row, {in_flight:>2} in flight   {used / count * 1e6:6.0f} "
            f"us CPU  {wall / count * 1e3:6.2f} ms wall"
        )
    for durable in (False, True):
        blobs = [os.urandom(41_000) for _ in range(count)]
        with tempfile.TemporaryDirectory() as tmp:
            files = BlobFiles(Path(tmp), durable=durable)
            t, c = time.monotonic(), cpu()
            for data in blobs:
                files.put(hashlib.sha256(data).hexdigest(), data)
            wall, used = time.monotonic() - t, cpu() - c
            files.close()
        name = "pack append, fdatasync" if durable else "pack append         "
        print(f"{name}   {used / count * 1e6:6.0f} us CPU  {wall / count * 1e3:6.2f} ms wall")


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--replicas", default="1,2,4")
    parser.add_argument(
        "--blobs", action="store_true", help="only compare blob storage: bytea rows vs pack files"
    )
    args = parser.parse_args()
    from openforgerl.testing.postgres import find_bindir, start

    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("error: PostgreSQL server binaries not found (apt-get install postgresql)")
    server = start(bindir)
    if args.blobs:
        try:
            await blob_costs(server.create_database("blobs"))
        finally:
            server.stop()
        return
    engine = await start_engine()
    print(f"{os.cpu_count()} cores; C={args.concurrency}, {args.seconds:g} s per setup, 32-token answers")
    print(f"{'setup':<13} {'calls/s':>8} {'gw us/call':>9} {'pg us/call':>7}   {'p50 ms':>6} {'p99 ms':>6}")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            await run_setup(
                "sqlite x1", engine, [str(Path(tmp) / "calls.db")], args.seconds, args.concurrency, None
            )
        for n in (int(x) for x in args.replicas.split(",")):
            url = server.create_database("bench")
            await run_setup(
                f"postgres x{n}", engine, [url] * n, args.seconds, args.concurrency, server.proc.pid
            )
    finally:
        engine.stop()
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
