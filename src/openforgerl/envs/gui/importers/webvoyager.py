"""WebVoyager `data/WebVoyager_data.jsonl` (one `{web_name, id, ques, web}` per line, optional
`reference_answer.json` `{<web_name>: {answers: [{id, type, ans}]}}`) -> browser task folders.

Every WebVoyager task browses a live site (`web` is a public URL) and is scored by a VLM judge over
the last screenshots and the answer (upstream `evaluation/auto_eval.py`: SUCCESS / NOT SUCCESS), so
each is flagged `requires_internet` + `requires_llm_judge` and never run here; tasks whose question
names a calendar date are tagged `date_dependent` (forks drop or re-date them). The reference answer,
when given, goes to `tests/judge.json` for a judge; there is no oracle (`no_oracle`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from openforgerl.envs.gui.suite.drafting import GuiDraft

__all__ = ["convert_webvoyager", "judge_draft"]

_DATE = re.compile(
    r"\b(19|20)\d{2}\b|\b(january|february|march|april|may|june|july|august|september|october|"
    r"november|december)\b",
    re.I,
)
JUDGE_TEST_SH = """#!/usr/bin/env bash
# This task is judged by a VLM over the final screenshots (tests/judge.json); no state verifier.
echo "requires an LLM/VLM judge (see tests/judge.json); not run offline" >&2
exit 2
"""


def _references(path: Path | None) -> dict[str, Any]:
    if path is None or not path.is_file():
        return {}
    data = json.loads(path.read_text())
    out: dict[str, Any] = {}
    for site, block in data.items():
        for ans in (block or {}).get("answers", []):
            out[f"{site}--{ans.get('id')}"] = ans
    return out


def judge_draft(
    name: str, instruction: str, start_url: str, judge: dict[str, Any], tags: list[str], source: str
) -> GuiDraft:
    """A live-web browser task scored by a judge: flagged, no checks, no oracle."""
    meta = {
        "requires_internet": True,
        "requires_llm_judge": True,
        "verifier": "script",
        "no_oracle": "live web task scored by a judge",
    }
    return GuiDraft(
        name,
        instruction,
        "browser",
        {"start_url": start_url, "apps": {}},
        [],
        [],
        tags=tags,
        difficulty="hard",
        source=source,
        extra_meta=meta,
        extra_files={"tests/judge.json": json.dumps(judge, indent=1) + "\n", "tests/test.sh": JUDGE_TEST_SH},
    )


def convert_webvoyager(path: Path, references: Path | None = None) -> list[GuiDraft]:
    refs = _references(references or path.with_name("reference_answer.json"))
    drafts = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        tid, ques, web = str(row["id"]), str(row["ques"]), str(row["web"])
        tags = ["webvoyager", f"site:{row.get('web_name', '')}"] + (
            ["date_dependent"] if _DATE.search(ques) else []
        )
        judge = {
            "protocol": "webvoyager",
            "question": ques,
            "reference": refs.get(tid),
            "last_k_screenshots": 3,
        }
        drafts.append(
            judge_draft(f"webvoyager/{tid}", f"{ques}\n\nStart at {web}.", web, judge, tags, "webvoyager")
        )
    return drafts
