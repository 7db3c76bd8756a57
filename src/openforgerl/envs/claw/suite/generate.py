"""`python -m openforgerl.envs.claw.suite.generate [OUT]`: (re)write the Claw suite from `families.py`.

Split: in every family with two or more tasks, the last one is held out as `test`, the rest `train`
(unless the family sets the split itself, as the easy `sft` families do).
Output is deterministic, so the committed suite equals a fresh generation (a test checks this).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from openforgerl.envs.claw.drafts import write_claw_task
from openforgerl.envs.claw.suite import CLAW_SUITE
from openforgerl.envs.claw.suite.families import FAMILIES
from openforgerl.tasks.draft import TaskDraft

__all__ = ["all_drafts", "generate"]


def all_drafts() -> list[TaskDraft]:
    drafts: list[TaskDraft] = []
    for family in FAMILIES:
        members = family()
        chosen = any(d.split == "test" for d in members)
        for i, draft in enumerate(members):
            if not chosen:
                draft.split = "test" if len(members) >= 2 and i == len(members) - 1 else "train"
            drafts.append(draft)
    names = [d.name for d in drafts]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"duplicate task names: {sorted(dupes)}")
    return drafts


def generate(out: Path = CLAW_SUITE) -> list[Path]:
    """Write every task under `out` (which is emptied first)."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    return [write_claw_task(d, out) for d in all_drafts()]


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else CLAW_SUITE
    paths = generate(out)
    print(f"wrote {len(paths)} tasks to {out}")


if __name__ == "__main__":
    main()
