"""Claw-Eval's `grader.py`: can it run in our verifier (`grader_support`), and what its run reads besides
itself (`grader_run_files`: task.yaml, peer graders, grader-only files, the env snapshot's manifest).

See the importer (claw_eval.py) for how a graded task is scored.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

__all__ = ["GRADER_CHECK", "grader_run_files", "grader_support"]

# The `claw_eval` modules our compatibility package provides (envs/claw/claw_eval_compat/).
COMPAT_MODULES = {
    "claw_eval",
    "claw_eval.graders",
    "claw_eval.graders.base",
    "claw_eval.graders.llm_judge",
    "claw_eval.graders.pinbench_common",
    "claw_eval.graders.multimodal_common",
    "claw_eval.graders.visual_grader",
    "claw_eval.graders.webpage_grader",
    "claw_eval.graders.user_agent_clarify_base",
    "claw_eval.graders.officeqa_reward",
    "claw_eval.graders.image_qa_oracle",
    "claw_eval.models",
    "claw_eval.models.task",
    "claw_eval.models.trace",
    "claw_eval.models.content",
    "claw_eval.models.message",
    "claw_eval.models.scoring",
}
# answered by the host's --judge-engine (`client`: the raw chat call T001/T002 make, with `model_id`)
JUDGE_METHODS = {"evaluate", "evaluate_actions", "evaluate_visual", "client", "model_id"}
JUDGING_BASES = {
    "claw_eval.graders.webpage_grader",  # bases whose own grade() asks the judge
    "claw_eval.graders.user_agent_clarify_base",
}
THIRD_PARTY_OK = {"pydantic", "yaml"}  # installed wherever the verifier runs
# task.yaml fields that feed a grader's env_snapshot from the agent's final sandbox (the first three: taken by
# the host on a copy, envs/claw/snapshot.py) or from the task's own files (local_grader_files: the verifier)
SNAPSHOT_FIELDS = (
    "env_snapshot_files",
    "env_snapshot_commands",
    "sandbox_grader_files",
    "local_grader_files",
)
# files a base reads beside the task's task.yaml (`task.task_file`):
# grader-only, copied under tests/claw_eval/
BASE_FILES = {"claw_eval.graders.image_qa_oracle": "fixtures/oracle.json"}
GRADER_CHECK = {
    "kind": "claw_eval_grader",
    "name": "grader",
    "script": "claw_eval/grader.py",
    "task": "claw_eval/task.yaml",
}


def _imported_modules(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
    return out


def _module_problems(modules: set[str]) -> list[str]:
    bad = []
    for mod in sorted(modules):
        top = mod.split(".")[0]
        known = (
            mod in COMPAT_MODULES
            if top == "claw_eval"
            else top in sys.stdlib_module_names or top in THIRD_PARTY_OK
        )
        if not known:
            bad.append(f"grader_import:{mod}")
    return bad


def _judge_problems(source: str) -> tuple[list[str], bool]:
    """(judge attributes we cannot answer, whether it calls the judge at all)."""
    used = set(re.findall(r"\bjudge\.(\w+)", source))
    via_mixin = "judge_visual_similarity(" in source  # visual_grader's helper calls judge.evaluate_visual
    return [f"grader_judge:{a}" for a in sorted(used - JUDGE_METHODS)], bool(
        used & JUDGE_METHODS
    ) or via_mixin


def grader_support(task_dir: Path) -> tuple[list[str], bool, dict[str, bytes]]:
    """Whether the task's grader.py can run in our verifier: (problems, calls the judge, peer graders to
    copy as {task id: source}). Problems are flags: modules we do not provide, judge methods the host
    cannot answer, a missing peer grader, a grader-only file (`sandbox_grader_files`, `local_grader_files`)
    not in the source."""
    spec = yaml.safe_load((task_dir / "task.yaml").read_text()) or {}
    problems = [
        f"grader_file_missing:{rel}"
        for rel, data in _grader_only_files(task_dir, spec).items()
        if data is None
    ]
    peers: dict[str, bytes] = {}
    judged = False
    todo = [(task_dir.name, (task_dir / "grader.py").read_bytes())]
    while todo:
        name, source = todo.pop()
        text = source.decode(errors="replace")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            problems.append(f"grader_syntax:{name}")
            continue
        judge_bad, calls = _judge_problems(text)
        modules = _imported_modules(tree)
        judged |= calls or bool(modules & JUDGING_BASES)
        if re.search(r"^\s*REQUIRE_IMAGE_LOAD\s*=\s*True", text, re.M):  # our runner records no media loads
            problems.append("grader_media_events")
        problems += _module_problems(modules) + judge_bad
        problems += [
            f"grader_file_missing:{BASE_FILES[m]}"
            for m in modules & BASE_FILES.keys()
            if not (task_dir / BASE_FILES[m]).is_file()
        ]
        for peer in re.findall(r"load_peer_grader\(\s*[\"']([^\"']+)[\"']", text):
            path = task_dir.parent / peer / "grader.py"
            if peer in peers:
                continue
            if not path.is_file():
                problems.append(f"grader_peer:{peer}")
                continue
            peers[peer] = path.read_bytes()
            todo.append((peer, peers[peer]))
    return sorted(set(problems)), judged, peers


def grader_run_files(task_dir: Path, peers: dict[str, bytes], spec: dict[str, Any]) -> dict[str, str | bytes]:
    """What the verifier's grader run reads besides grader.py (copied by the importer's `_upstream_files`),
    and what the host needs for its env snapshot (`envs/claw/snapshot.py`): all under tests/,
    never in the agent's reach."""
    out: dict[str, str | bytes] = {
        "tests/claw_eval/task.yaml": (task_dir / "task.yaml").read_bytes(),
        **{f"tests/claw_eval/peers/{k}/grader.py": v for k, v in peers.items()},
    }
    found = {k: v for k, v in _grader_only_files(task_dir, spec).items() if v is not None}
    out |= {f"tests/claw_eval/{k}": v for k, v in found.items()}
    source = (task_dir / "grader.py").read_text(errors="replace") + "".join(
        p.decode(errors="replace") for p in peers.values()
    )
    out |= {
        f"tests/claw_eval/{rel}": (task_dir / rel).read_bytes()
        for mod, rel in BASE_FILES.items()
        if mod in source and (task_dir / rel).is_file()
    }
    if any(spec.get(f) for f in SNAPSHOT_FIELDS[:3]):  # local_grader_files alone: read by the verifier
        manifest = {
            "commands": [str(c) for c in spec.get("env_snapshot_commands") or []],
            "files": [str(f) for f in spec.get("env_snapshot_files") or []],
            "timeout_s": int((spec.get("environment") or {}).get("env_snapshot_timeout") or 10),
            "sandbox_grader_files": [str(r) for r in spec.get("sandbox_grader_files") or []],
        }
        out["tests/claw_eval/env_snapshot.json"] = json.dumps(manifest, indent=1, ensure_ascii=False)
    return out


def _grader_only_files(task_dir: Path, spec: dict[str, Any]) -> dict[str, bytes | None]:
    """{`sandbox_grader_files/<path>` or `local_grader_files/<path>`: bytes, or None when not found}. Looked
    up as upstream's runner does: in the task folder, then from the repository root (`tasks/<id>/...`)."""
    out: dict[str, bytes | None] = {}
    for kind in ("sandbox_grader_files", "local_grader_files"):
        for rel in spec.get(kind) or []:
            path = PurePosixPath(str(rel))
            found = None
            if not path.is_absolute() and ".." not in path.parts:
                here = [task_dir / path, task_dir.resolve().parent.parent / path]
                found = next((p.read_bytes() for p in here if p.is_file() and not p.is_symlink()), None)
            out[f"{kind}/{path}"] = found
    return out
