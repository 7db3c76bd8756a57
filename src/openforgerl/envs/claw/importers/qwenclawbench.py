"""QwenClawBench `tasks/task_*.md` → our task folders.

A task is YAML front matter (`id, name, category, grading_type, grading_weights, timeout_seconds,
external_dependency, workspace_files`) plus `## Prompt` and `## Automated Checks` (a Python
`grade(transcript, workspace_path) -> dict[str, float]` in a ```python block, ending at a fence on its
own line, as upstream's `lib_grading` extracts it). The grade function becomes `tests/grade.py`
(verifier = python, reward = mean of its scores, as upstream's automated score).

`workspace_files` entries are either `{source, dest}`, looked up as upstream's docker loader does
(`assets/<task id>/<source>` first, then `assets/<source>`), or inline `{path, content}`; both land in
the workspace. Flags: `llm_judge`/`hybrid` grading (`requires_llm_judge`: the hybrid score gates the
judge's share on the automated one, so the automated part alone is not the task's score), external
dependencies, and graders that read the transcript (`needs: transcript`): upstream passes the OpenClaw
session events; `eval` builds them on the host from the call log (tasks/transcript.py), which lifts the flag.
A judged task also gets `tests/judge.json` (grading type, `grading_weights`, prompt, `## Expected
Behavior`, the `## LLM Judge Rubric` or the `## Grading Criteria` bullets): with `--judge-engine` the
host judges it with upstream's judge prompt and combines the parts as `_combine_grades` does (below
0.75 automated, the judge's share is zeroed).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import yaml

from openforgerl.tasks.draft import TaskDraft

__all__ = ["convert_qwenclawbench", "parse_markdown_task"]

_FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*\n(.*)\Z", re.S)
_CODE = re.compile(r"```python\s*\n(.*?)\n\s*```", re.S)


def parse_markdown_task(text: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(front matter, {section title: body}) of a task .md file."""
    m = _FRONT.match(text)
    if not m:
        raise ValueError("no YAML front matter (--- ... ---) at the top")
    # tracing-only fields upstream's loader drops before parsing (they may hold text YAML rejects)
    front = re.sub(r"^source_query:\s*.*?(?=\n\w+:\s|\Z)", "", m.group(1), flags=re.M | re.S)
    front = re.sub(r"^source_line_number:.*$", "", front, flags=re.M)
    sections: dict[str, str] = {}
    for block in re.split(r"^## ", m.group(2), flags=re.M)[1:]:
        title, _, body = block.partition("\n")
        sections[title.strip()] = body.strip()
    return yaml.safe_load(front) or {}, sections


def _asset(assets: Path | None, task_id: str, source: str) -> Path | None:
    candidates = [assets / task_id / source, assets / source] if assets else []
    return next((c for c in candidates if c.is_file()), None)


def _workspace(front: dict[str, Any], assets: Path | None, unsupported: list[str]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    task_id = str(front.get("id", ""))
    for wf in front.get("workspace_files") or []:
        if "content" in wf:
            out[str(wf.get("path", "")).lstrip("/")] = str(wf["content"]).encode()
            continue
        source = _asset(assets, task_id, str(wf.get("source", "")))
        if source is None:
            unsupported.append(f"missing_asset:{wf.get('source')}")
            continue
        out[str(wf.get("dest") or source.name).lstrip("/")] = source.read_bytes()
    return out


def reads_transcript(code: str) -> bool:
    """Whether `grade(transcript, ...)` uses its first argument (not just receives it)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and fn.name == "grade" and fn.args.args:
            name = fn.args.args[0].arg
            return any(isinstance(n, ast.Name) and n.id == name for stmt in fn.body for n in ast.walk(stmt))
    return False


def _judge_spec(front: dict[str, Any], sections: dict[str, str], grading: str) -> dict[str, Any]:
    """What upstream's `_grade_llm_judge` reads: prompt, `## Expected Behavior`, the rubric
    (`## LLM Judge Rubric`, else the `## Grading Criteria` bullets) and `grading_weights`."""
    criteria = [
        m.group(1)
        for ln in sections.get("Grading Criteria", "").splitlines()
        if (m := re.match(r"^-\s+\[[ x]\]\s+(.+)$", ln.strip()))
    ]  # upstream's checklist items
    rubric = sections.get("LLM Judge Rubric") or "\n".join(f"- {c}" for c in criteria)
    return {
        "benchmark": "qwenclawbench",
        "grading_type": grading,
        "weights": front.get("grading_weights"),
        "prompt": sections.get("Prompt", ""),
        "expected_behavior": sections.get("Expected Behavior", ""),
        "rubric": rubric,
    }


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
        name=f"qwenclawbench/{front.get('id', md.stem)}",
        instruction=sections.get("Prompt", ""),
        services=[],
        checks=[],
        source="qwenclawbench",
        split="test",
        tags=[str(front.get("category", "qwenclawbench"))],
        budget_s=float(front.get("timeout_seconds", 1800)),
        extra_files={
            "tests/grade.py": code.group(1) + "\n"
            if code
            else "def grade(transcript, workspace_path):\n    return {}\n",
            **{f"environment/workspace/{k}": v for k, v in files.items()},
        },
    )
    grading = str(front.get("grading_type", "automated"))
    if grading != "automated":
        draft.extra_files["tests/judge.json"] = json.dumps(
            _judge_spec(front, sections, grading), indent=1, ensure_ascii=False
        )
    draft.extra_meta = {
        "verifier": "python",
        "requires_internet": dependency == "web",
        "requires_llm_judge": front.get("grading_type", "automated") != "automated",
        "unsupported": unsupported,
        "needs": ["transcript"] if code and reads_transcript(code.group(1)) else [],
        "no_oracle": "QwenClawBench ships no reference solution",
    }
    return draft
