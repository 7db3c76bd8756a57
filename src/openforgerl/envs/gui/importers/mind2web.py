"""Online-Mind2Web `Online_Mind2Web.json` (a list of `{task_id, confirmed_task, website,
reference_length, level}`) -> browser task folders.

All 300 tasks run on live websites and are scored by WebJudge (key points -> key screenshots ->
verdict), so each is flagged `requires_internet` + `requires_llm_judge` and never run here. `level`
(easy / medium / hard) becomes the difficulty, `reference_length` goes to `tests/judge.json` (the
judge's and the step budget's input).
"""

from __future__ import annotations

import json
from pathlib import Path

from openforgerl.envs.gui.importers.webvoyager import judge_draft
from openforgerl.envs.gui.suite.drafting import GuiDraft

__all__ = ["convert_mind2web"]


def convert_mind2web(path: Path) -> list[GuiDraft]:
    rows = json.loads(path.read_text())
    drafts = []
    for row in rows:
        tid, task, site = str(row["task_id"]), str(row["confirmed_task"]), str(row["website"])
        judge = {"protocol": "webjudge", "task": task, "reference_length": row.get("reference_length")}
        d = judge_draft(
            f"mind2web/{tid}",
            f"{task}\n\nStart at {site}.",
            site,
            judge,
            ["online-mind2web"],
            "online-mind2web",
        )
        d.difficulty = row.get("level") if row.get("level") in ("easy", "medium", "hard") else "hard"
        drafts.append(d)
    return drafts
