"""What counting a rollout's call log quota across gateway replicas costs a call (store/postgres.py).

On a PostgreSQL call log each model call reserves its body's bytes with one atomic statement
(`reserve_log_bytes`: INSERT .. ON CONFLICT DO UPDATE .. WHERE bytes + n <= quota RETURNING), awaited
before the call is admitted, and is charged its record's size unawaited, in the writer's next batch.
This measures that statement against one throwaway PostgreSQL server (`testing/postgres.py`, fsync on):
  reserve        - the reservation as the gateway makes it (a reading thread's connection,
                   synchronous_commit off), one at a time and `--concurrency` at once
  reserve+flush  - the same statement waiting for the WAL flush (synchronous_commit on): what it would
                   cost through the writer thread, or on a connection of default settings
  append         - for scale: committing one 4 KB call record (what every call already awaits)
  append+charge  - the same with the call's settlement (`charge_log_bytes`) queued before it
Reported: wall time per operation as the caller sees it, and this process's CPU per operation.

    python benchmarks/log_quota_cost.py --ops 2000
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable

import psutil

from openforgerl.store.postgres import PostgresCallStore
from openforgerl.testing.postgres import find_bindir, start


async def _measure(name: str, ops: int, concurrency: int, op: Callable[[int], Awaitable[object]]) -> None:
    proc = psutil.Process()
    cpu0, wall0 = proc.cpu_times(), time.perf_counter()
    latencies: list[float] = []

    async def worker(first: int) -> None:
        for i in range(first, ops, concurrency):
            t = time.perf_counter()
            await op(i)
            latencies.append(time.perf_counter() - t)

    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    wall, cpu1 = time.perf_counter() - wall0, proc.cpu_times()
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    latencies.sort()
    print(
        f"{name:14s} x{concurrency:<3d} {ops / wall:8.0f} ops/s "
        f"  p50 {latencies[len(latencies) // 2] * 1e3:6.2f} ms"
        f"   p99 {latencies[int(len(latencies) * 0.99)] * 1e3:6.2f} ms   CPU {cpu / ops * 1e6:6.0f} us/op"
    )


def _charged(store: PostgresCallStore, rollout_id: str, index: int, record: bytes) -> Awaitable[None]:
    store.charge_log_bytes(rollout_id, len(record) - 1000)
    return store.append_call(rollout_id, index, record)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    bindir = find_bindir()
    if bindir is None:
        raise SystemExit(
            "error: PostgreSQL server binaries (initdb, postgres) not found: apt-get install postgresql"
        )
    server = start(bindir)
    try:
        store = PostgresCallStore(server.create_database("bench"))
        quota = 1 << 60
        record = b'{"x":"' + b"y" * 4096 + b'"}'
        flushing = store._connect(autocommit=True)  # synchronous_commit on, the server's default

        def flushed_plain(i: int) -> object:
            return flushing.execute(
                "INSERT INTO rollout_log_bytes AS q VALUES (%s, 1) ON CONFLICT (rollout_id) "
                "DO UPDATE SET bytes = q.bytes + 1 RETURNING bytes",
                (f"f{i % 64}",),
            ).fetchall()

        for concurrency in (1, args.concurrency):
            await _measure(
                "reserve", args.ops, concurrency, lambda i: store.reserve_log_bytes(f"r{i % 64}", 1000, quota)
            )
            await _measure(
                "append",
                args.ops,
                concurrency,
                lambda i, c=concurrency: store.append_call(f"a{c}-{i % 64}", i, record),
            )
            await _measure(
                "append+charge",
                args.ops,
                concurrency,
                lambda i, c=concurrency: _charged(store, f"b{c}-{i % 64}", i, record),
            )
        await _measure("reserve+flush", args.ops, 1, lambda i: asyncio.to_thread(flushed_plain, i))
        flushing.close()
        await store.aclose()
    finally:
        server.stop()


if __name__ == "__main__":
    asyncio.run(main())
