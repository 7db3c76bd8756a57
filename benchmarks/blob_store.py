"""CPU per new blob: a file beside the call log (`store/blobfiles.py`, what `put_blob` does now) against the
anchor, a row of the log's `blobs` table written the way `put_blob` did before (journal frame, then the
writer thread's batched INSERT in WAL mode, checkpoints included). Same process, same blobs, interleaved.

    python benchmarks/blob_store.py [--blobs 1500] [--size 41000]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import tempfile
import time
from pathlib import Path

from openforgerl.store.sqlite import _BLOB_FRAME, _PUT_BLOB, SQLiteCallStore


async def as_rows(blobs: list[tuple[str, bytes]], folder: Path) -> float:
    store = SQLiteCallStore(folder / "rows.db")
    t = time.process_time()  # the writer thread's CPU counts: process time covers every thread
    for sha, data in blobs:
        store._journal_for_append().append(f"{_BLOB_FRAME}{sha}\x00image/png", 0, data)
        store._queue.put((_PUT_BLOB, (sha, "image/png", len(data), data), None))
    await store.aclose()
    return (time.process_time() - t) / len(blobs)


async def as_files(blobs: list[tuple[str, bytes]], folder: Path) -> float:
    store = SQLiteCallStore(folder / "files.db")
    t = time.process_time()
    for sha, data in blobs:
        await store.put_blob(sha, data, "image/png")
    await store.aclose()
    return (time.process_time() - t) / len(blobs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--blobs", type=int, default=1500)
    p.add_argument("--size", type=int, default=41000, help="bytes per blob (a 1280x720 screenshot PNG: ~41 KB)")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    print("| round | table row us/blob (anchor) | file us/blob | file / row |\n|---|---|---|---|")
    for r in range(args.rounds):
        blobs = [(hashlib.sha256(b).hexdigest(), b) for b in (os.urandom(args.size) for _ in range(args.blobs))]
        with tempfile.TemporaryDirectory() as tmp:
            first, second = (as_rows, as_files) if r % 2 == 0 else (as_files, as_rows)
            a = asyncio.run(first(blobs, Path(tmp)))
            b = asyncio.run(second(blobs, Path(tmp)))
            row, file = (a, b) if first is as_rows else (b, a)
        print(f"| {r} | {row * 1e6:.0f} | {file * 1e6:.0f} | {file / row:.2f} |", flush=True)


if __name__ == "__main__":
    main()
