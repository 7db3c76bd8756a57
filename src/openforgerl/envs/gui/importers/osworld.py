"""OSWorld `evaluation_examples/examples/<domain>/<id>.json` -> desktop task folders.

An OSWorld task is `{id, snapshot, instruction, config: [{type, parameters}], related_apps,
evaluator: {func, result, expected, postconfig?}, proxy?}`, written for a VM image with a harness
server inside. What maps onto our desktop environment runs; the rest is flagged with the reason:
- apps: `related_apps` outside `APPS` (gimp, libreoffice, thunderbird, vlc, vs_code, ...) ->
  `unsupported: vm_image:<app>`; `proxy` or a `download` / `chrome_open_tabs` / URL `open` step ->
  `requires_internet`; any other setup step -> `unsupported: setup:<type>`;
- evaluator: `check_include_exclude` on a `vm_file` with `rule` include/exclude -> a `file` check, and
  `compare_text_file` / `exact_match` against a `rule` string -> a `file equals` check; `infeasible` ->
  `needs: answer` (the agent must answer FAIL); a `cloud_file` expectation -> `requires_internet`;
  other funcs -> `unsupported: evaluator:<func>`; an `llm`/`vlm` judge -> `requires_llm_judge`.
Paths under `/home/user/` map to `/workdir/`. Imported tasks have no oracle (`no_oracle`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openforgerl.envs.gui.suite.drafting import GuiDraft

__all__ = ["APPS", "convert_osworld", "find_osworld_tasks"]

APPS = {"os", "gedit", "mousepad", "text_editor", "chrome", "chromium"}
_HOME = "/home/user/"
_INTERNET_STEPS = {"download", "chrome_open_tabs", "googledrive", "login"}


def _local(path: str) -> str | None:
    return path[len(_HOME) :] if path.startswith(_HOME) else None


def _setup(task: dict[str, Any], flags: dict[str, list[str]]) -> list[dict[str, Any]]:
    launch: list[dict[str, Any]] = []
    for step in task.get("config") or []:
        kind, params = step.get("type", ""), step.get("parameters") or {}
        if kind in _INTERNET_STEPS or (kind == "open" and "://" in str(params.get("path", ""))):
            flags["internet"].append(kind)
        elif kind in ("launch", "open"):
            argv = params.get("command") or [params.get("path", "")]
            argv = argv.split() if isinstance(argv, str) else argv
            target = next((_local(a) for a in argv if isinstance(a, str) and _local(a)), None)
            if (target and str(argv[0]) in ("gedit", "mousepad")) or (kind == "open" and target):
                launch.append({"app": "mousepad", "file": f"/workdir/{target}"})
            else:
                flags["unsupported"].append(f"setup:{kind}:{argv[0] if argv else ''}")
        elif kind != "sleep":
            flags["unsupported"].append(f"setup:{kind}")
    return launch


def _checks(ev: dict[str, Any], flags: dict[str, list[str]]) -> list[dict[str, Any]]:
    func = ev.get("func")
    func = func[0] if isinstance(func, list) and len(func) == 1 else func
    result, expected = ev.get("result") or {}, ev.get("expected") or {}
    if func == "infeasible":
        flags["needs"].append("answer")
        return []
    if not isinstance(func, str):
        flags["unsupported"].append("evaluator:multi")
        return []
    if "llm" in func or "vlm" in func:
        flags["judge"].append(func)
        return []
    if expected.get("type") == "cloud_file":
        flags["internet"].append("cloud_file")
        return []
    path = _local(str(result.get("path", ""))) if result.get("type") == "vm_file" else None
    rules = expected.get("rules") or {}
    if path and func == "check_include_exclude" and expected.get("type") == "rule":
        check: dict[str, Any] = {"kind": "file", "name": "file_state", "path": path}
        check |= {"contains": list(rules["include"])} if rules.get("include") else {}
        check |= {"not_contains": list(rules["exclude"])} if rules.get("exclude") else {}
        return [check]
    if path and func in ("compare_text_file", "exact_match") and isinstance(rules.get("expected"), str):
        return [{"kind": "file", "name": "file_state", "path": path, "equals": rules["expected"]}]
    flags["unsupported"].append(f"evaluator:{func}")
    return []


def _meta(task: dict[str, Any], flags: dict[str, list[str]]) -> dict[str, Any]:
    apps = [a for a in task.get("related_apps") or [] if a not in APPS]
    unsupported = [f"vm_image:{a}" for a in apps] + flags["unsupported"]
    if task.get("snapshot") not in (None, "", "init_state", "os"):
        unsupported.append(f"vm_image:snapshot:{task['snapshot']}")
    meta: dict[str, Any] = {"no_oracle": "imported from OSWorld (no scripted oracle)"}
    meta |= {"requires_internet": True} if flags["internet"] or task.get("proxy") else {}
    meta |= {"requires_llm_judge": True} if flags["judge"] else {}
    meta |= {"unsupported": sorted(set(unsupported))} if unsupported else {}
    meta |= {"needs": flags["needs"]} if flags["needs"] else {}
    return meta


def convert_osworld(path: Path, domain: str = "") -> GuiDraft:
    task = json.loads(path.read_text())
    flags: dict[str, list[str]] = {"internet": [], "unsupported": [], "needs": [], "judge": []}
    launch = _setup(task, flags)
    checks = _checks(task.get("evaluator") or {}, flags)
    meta = _meta(task, flags)
    if not checks:
        meta["verifier"] = "script"
    domain = domain or path.parent.name
    return GuiDraft(
        f"osworld/{domain}-{task['id']}",
        str(task["instruction"]),
        "desktop",
        {"desktop": {"launch": launch}},
        checks,
        [],
        difficulty="hard",
        tags=["osworld", f"domain:{domain}"],
        source="osworld",
        extra_meta=meta,
        extra_files={"tests/osworld_task.json": json.dumps(task, indent=1) + "\n"},
    )


def find_osworld_tasks(root: Path) -> list[Path]:
    """`<root>/examples/<domain>/<id>.json` (or any `*.json` below `root` that has an `evaluator`)."""
    found = sorted(root.rglob("*.json")) if root.is_dir() else [root]
    return [p for p in found if '"evaluator"' in p.read_text(errors="replace")[:200000]]
