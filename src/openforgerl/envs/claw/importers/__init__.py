"""Claw's importers: Claw-Eval `task.yaml` folders (`claw_eval`) and QwenClawBench `task_*.md` files
(`qwenclawbench`) → Claw task folders (with the Claw test.sh and CLI solve.sh), registered as the
`claw-eval` and `qwenclawbench` formats of `openforgerl.importers` (`openforgerl.tasks.importing`)."""

from __future__ import annotations

from pathlib import Path

from openforgerl.envs.claw.drafts import write_claw_task
from openforgerl.tasks.importing import TaskImporter, convert_each, write_drafts

__all__ = ["CLAW_EVAL", "QWENCLAWBENCH"]


def _claw_eval(source: Path, out: Path, user_engine: str | None) -> list[Path]:
    from openforgerl.envs.claw.importers.claw_eval import convert_claw_eval, find_claw_eval_tasks

    dirs = [source] if (source / "task.yaml").is_file() else find_claw_eval_tasks(source)
    return write_drafts(
        convert_each("claw-eval", dirs, lambda d: [convert_claw_eval(d, user_engine)]), out, write_claw_task
    )


def _assets_for(md: Path) -> Path | None:
    """QwenClawBench keeps assets in `<data>/assets/` next to `<data>/tasks/`."""
    for parent in md.parents:
        if (parent / "assets").is_dir():
            return parent / "assets"
    return None


def _qwenclawbench(source: Path, out: Path, user_engine: str | None) -> list[Path]:
    from openforgerl.envs.claw.importers.qwenclawbench import convert_qwenclawbench

    tasks = source / "tasks"
    files = [source] if source.is_file() else sorted((tasks if tasks.is_dir() else source).rglob("task_*.md"))
    return write_drafts(
        convert_each("qwenclawbench", files, lambda f: [convert_qwenclawbench(f, _assets_for(f))]),
        out,
        write_claw_task,
    )


CLAW_EVAL = TaskImporter(_claw_eval)
QWENCLAWBENCH = TaskImporter(_qwenclawbench)
