"""Our task suite -> veRL parquet rows (``train.parquet``, ``val.parquet``) for ``examples/verl/run_grpo.sh``.

Each row: ``prompt`` (the task instruction as a chat), ``data_source``, ``reward_model``, ``agent_name:
openforgerl`` and ``extra_info{index, split, task_id, task_dir, harness}``. Tasks whose ``split`` is
``train`` go to train.parquet, the rest to val.parquet.

    python examples/verl/build_dataset.py --tasks builtin:claw --harness zero --out ~/data/openforgerl
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from openforgerl.tasks.format import find_tasks, load_task
from openforgerl.train.services import resolve_task_dir
from openforgerl.train.verl.rows import build_row


def task_root(spec: str) -> Path:
    """`builtin:<suite>` as `train` resolves it (one table: train.services.resolve_task_dir), else the folder."""
    return resolve_task_dir(spec).resolve()


def build(tasks: str, harness: str, out: Path, difficulty: list[str] | None = None) -> dict[str, int]:
    rows: dict[str, list[dict]] = {"train": [], "val": []}
    for path in find_tasks(task_root(tasks)):
        task = load_task(path)
        if difficulty and task.meta.difficulty not in difficulty:
            continue
        split = "train" if task.meta.split == "train" else "val"
        rows[split].append(build_row(task, harness=harness, index=len(rows[split]), split=split))
    out.mkdir(parents=True, exist_ok=True)
    for split, items in rows.items():
        if items:
            pq.write_table(pa.Table.from_pylist(items), out / f"{split}.parquet")
    return {k: len(v) for k, v in rows.items()}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", default="builtin:claw", help="task folder, or builtin:<suite>")
    p.add_argument("--harness", default="zero")
    p.add_argument("--difficulty", action="append", help="keep only these difficulties (repeatable)")
    p.add_argument("--out", type=Path, default=Path("data/openforgerl-verl"))
    args = p.parse_args(argv)
    counts = build(args.tasks, args.harness, args.out, args.difficulty)
    print(f"wrote {counts} rows to {args.out}")


if __name__ == "__main__":
    main()
