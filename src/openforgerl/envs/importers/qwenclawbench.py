"""QwenClawBench `tasks/task_*.md` → our task folders.

A task is YAML front matter (`id, name, category, grading_type, timeout_seconds, external_dependency,
workspace_files[{source, dest}]`) plus `## Prompt` and `## Automated Checks` (a Python
`grade(transcript, workspace_path) -> dict[str, float]` in a code block). The grade function becomes
`tests/grade.py` (verifier = python, reward = mean of its scores); assets listed in `workspace_files`
are copied from `assets/` into the workspace. `llm_judge`/`hybrid` grading and external dependencies
are flagged. The grader gets an empty transcript (harness session events are not collected yet).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from openforgerl.envs.draft import TaskDraft

__all__ = ["convert_qwenclawbench", "parse_markdown_task"]

_FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*\n(.*)\Z", re.S)
_CODE = re.compile(r"```(?:python)?\s*\n(.*?)```", re.S)


def parse_markdown_task(text: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(front matter, {section title: body}) of a task .md file."""
    m = _FRONT.match(text)
    if not m:
        raise ValueError("no YAML front matter (--- ... ---) at the top")
    sections: dict[str, str] = {}
    for block in re.split(r"^## ", m.group(2), flags=re.M)[1:]:
        title, _, body = block.partition("\n")
        sections[title.strip()] = body.strip()
    return yaml.safe_load(m.group(1)) or {}, sections


def _workspace(front: dict[str, Any], assets: Path | None, unsupported: list[str]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for wf in front.get("workspace_files") or []:
        source = assets / str(wf.get("source", "")) if assets else None
        if source is None or not source.is_file():
            unsupported.append(f"missing_asset:{wf.get('source')}")
            continue
        out[str(wf.get("dest") or source.name).lstrip("/")] = source.read_bytes()
    return out


def convert_qwenclawbench(md: Path, assets: Path | None = None) -> TaskDraft:
    front, sections = parse_markdown_task(md.read_text())
    unsupported: list[str] = []
    code = _CODE.search(sections.get("Automated Checks", ""))
    if code is None:
        unsupported.append("no_automated_checks")
    dependency = str(front.get("external_dependency") or "none")
    if dependency not in ("none", "web"):
        unsupported.append(f"external_dependency:{dependency}")
    files = _workspace(front, assets, unsupported)
    draft = TaskDraft(
        name=f"qwenclawbench/{front.get('id', md.stem)}", instruction=sections.get("Prompt", ""),
        services=[], checks=[], source="qwenclawbench", split="test",
        tags=[str(front.get("category", "qwenclawbench"))],
        budget_s=float(front.get("timeout_seconds", 1800)),
        extra_files={"tests/grade.py": code.group(1) if code else "def grade(transcript, workspace_path):\n    return {}\n",
                     **{f"environment/workspace/{k}": v for k, v in files.items()}})
    draft.extra_meta = {"verifier": "python", "requires_internet": dependency == "web",
                        "requires_llm_judge": front.get("grading_type", "automated") != "automated",
                        "unsupported": unsupported}
    return draft
