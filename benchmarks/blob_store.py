"""CPU per new blob: an entry appended to a pack beside the call log (`store/blobfiles.py`, what `put_blob`
does now) against two anchors written the way `put_blob` did before: a file of its own per blob (open,
write, close, rename) and a row of the log's `blobs` table (journal frame, then the writer thread's
batched INSERT in WAL mode, checkpoints included). Same process, same blobs, interleaved.

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


async def as_packs(blobs: list[tuple[str, bytes]], folder: Path) -> float:
    store = SQLiteCallStore(folder / "packs.db")
    t = time.process_time()
    for sha, data in blobs:
        await store.put_blob(sha, data, "image/png")
    await store.aclose()
    return (time.process_time() - t) / len(blobs)


async def as_files(blobs: list[tuple[str, bytes]], folder: Path) -> float:
    """A file per blob, as `BlobFiles.put` wrote them before packs (a temporary name, then a rename)."""
    root = folder / "files.db.blobs"
    t = time.process_time()
    for k, (sha, data) in enumerate(blobs):
        sub = root / sha[:2]
        sub.mkdir(parents=True, exist_ok=True)
        tmp = sub / f".{sha}.{os.getpid()}.{k}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, sub / sha)
    return (time.process_time() - t) / len(blobs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--blobs", type=int, default=1500)
    p.add_argument(
        "--size", type=int, default=41000, help="bytes per blob (a 1280x720 screenshot PNG: ~41 KB)"
    )
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    print(
        "| round | table row us/blob (anchor) | file us/blob "
        "(anchor) | pack us/blob | pack / row | pack / file |\n"
        "|---|---|---|---|---|---|"
    )
    arms = [as_rows, as_files, as_packs]
    for r in range(args.rounds):
        blobs = [
            (hashlib.sha256(b).hexdigest(), b) for b in (os.urandom(args.size) for _ in range(args.blobs))
        ]
        cost = {}
        with tempfile.TemporaryDirectory() as tmp:
            for arm in arms if r % 2 == 0 else arms[::-1]:
                cost[arm] = asyncio.run(arm(blobs, Path(tmp)))
        row, file, pack = cost[as_rows], cost[as_files], cost[as_packs]
        print(
            f"| {r} | {row * 1e6:.0f} | {file * 1e6:.0f} | "
            f"{pack * 1e6:.0f} | {pack / row:.2f} | {pack / file:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
