"""Claw-Eval `tasks/<id>/task.yaml` (+ `fixtures/`, `grader.py`, sandbox files) → our task folders.

Read from upstream's `TaskDefinition` (`src/claw_eval/models/task.py`) and its runner:

- `prompt.text` → instruction; `fixtures/<service>/*.json` of gmail, calendar, contacts, kb, todo and
  notes → our service fixtures (field names normalised); `sandbox_files` (paths relative to the task
  folder, upstream lays them out under `/workspace/<path>`) → `environment/workspace/<path>`.
- Tools map by what the upstream endpoint does (`TOOLS`), never by a name fragment: `send_notification`
  or `contacts_send_message` are not mail. An offered tool without an equivalent flags the task
  `unsupported: tool:<name>`; upstream's sandbox `Bash`/`Edit`/`Grep` are the harness's own (`NATIVE`).
- `scoring_components` (upstream's declarative score): `tool_called` → `called` (min_calls),
  `keywords_present` → `text` over the agent's output, `min_length` → `text` over the final text (or
  the output), with their weights; `llm_judge` → `llm_judge` (below); any other type →
  `unsupported: scoring:<type>`. `safety_checks` `tool_not_called` → `not_called` safety gates.
  `expected_actions` (`service` + `action_key`, a list in the service's /audit) → a `called` check on
  the tool that fills that list (`gmail/drafts` → `mail_draft`).
- `user_agent.enabled` (multi-turn with a simulated user) → `needs: user_simulator` unless a user
  engine is given; the persona is kept in `tests/user_agent.json`.
- `grader.py` (the leaderboard scorer, an `AbstractGrader` subclass) is copied to
  `tests/claw_eval/grader.py` (with `task.yaml` and any peer graders it loads by `load_peer_grader`, under
  `tests/claw_eval/peers/<id>/`), where only the verifier step sees it. When it can run here
  (`grader_support`: it imports only the `claw_eval` modules our compatibility package provides,
  `envs/claw/claw_eval_compat/`, calls only the judge's `evaluate` / `evaluate_actions`, and every
  grader-only file it names is there), it alone scores the task, as on upstream's leaderboard: one
  `claw_eval_grader` check (verify/claw_eval_grader.py), score = safety × (0.8 completion + 0.2
  robustness), pass at 0.75; the task `needs: transcript` (the grader reads the conversation; `eval`
  builds it from the call log) and `requires_llm_judge` when it calls the judge. Otherwise the declarative
  fields below score it; a task with nothing else to score it is flagged with the grader's reasons
  (`unsupported: grader_import:<module>`, `grader_judge:<method>`, `grader_peer:<id>`,
  `grader_file_missing:<path>`).
- The grader's `env_snapshot` (`env_snapshot_commands`, `env_snapshot_files`,
  `environment.env_snapshot_timeout`, `sandbox_grader_files`, `local_grader_files`): the manifest goes to
  `tests/claw_eval/env_snapshot.json`, the grader-only files to `tests/claw_eval/sandbox_grader_files/` and
  `local_grader_files/` (verifier and host only); the host takes the snapshot on a copy of the final
  workdir (`envs/claw/snapshot.py`).
- `llm_judge` components → `llm_judge` checks (rubric = the component's `rubric` / `description` plus the
  task's `judge_rubric`), scored on the host by `--judge-engine` with upstream's judge prompt and
  weighted like the other components; the task keeps `requires_llm_judge` (lifted by the flag).
- `user_agent.enabled` tasks get the `ask_user` tool and a line saying the user is reachable through it
  (plus upstream's `system_prompt_suffix`); the persona stays in `tests/user_agent.json` (host only),
  answered by `--user-engine` through the host-side relay (env/user_sim.py).
- Oracle: when the checks determine one (reads by fixture id, drafts whose body carries the keywords,
  a final answer with them), `solution/actions.json` replays it; else `no_oracle` says why. Upstream's
  `reference_solution` is prose, kept in `tests/claw_eval/reference_solution.md`.
- Upstream's own mock services (`upstream_material`): when the source is upstream's repository (a
  `mock_services/` folder next to `tasks/`), a service whose `server.py` is there runs upstream's code
  (`envs/claw/services/upstream.py`) when the task is scored by its `grader.py` (the grader then reads the
  service's own /audit, as upstream's), when the service is not one of ours, or when one of its tools has
  no equivalent of ours; else our service keeps it (the declarative checks read our audit). Its tools
  become upstream-endpoint tools (schema, method and path as declared), the server files, `_base.py`
  and the fixtures they read are copied under `environment/upstream/` in upstream's layout (environment
  material: the agent's tools read them anyway), and `tool_called` / `tool_not_called` / `expected_actions`
  on them check the upstream tool's calls. Not run this way: `web_real*` (the internet) and `documents`
  (it serves files from its working directory, upstream's repo root).
- `environment.max_turns` (upstream's runner stops the agent there) → `max_turns` in the task's metadata,
  which a harness with a turn limit (`zero`) applies as the lower of its own and the task's;
  `environment.timeout_seconds` → the task's budget. `prompt.attachments` (image/audio blocks upstream
  sends with the prompt) not also in `sandbox_files` → `unsupported: claw_eval_attachments`: no harness
  here is handed them (one in `sandbox_files` is in the workspace, where the prompt names it).
- Text checks need the agent's final words; without a transcript (`tasks validate`) the verifier has
  only the service, so the instruction asks for the final answer through `submit_answer`.

Modules: whether a grader.py runs here and what its run reads, claw_eval_grading.py; the oracle,
claw_eval_oracle.py; upstream's names as ours and its own mock services, claw_eval_upstream.py.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from openforgerl.envs.claw.importers.claw_eval_grading import GRADER_CHECK, grader_run_files, grader_support
from openforgerl.envs.claw.importers.claw_eval_oracle import oracle
from openforgerl.envs.claw.importers.claw_eval_upstream import (
    EXPECTED,
    EXPECTED_UPSTREAM,
    NATIVE,
    SERVICES,
    TOOLS,
    UPSTREAM_DIR,
    WEB,
    upstream_material,
)
from openforgerl.tasks.draft import TaskDraft

__all__ = ["convert_claw_eval", "find_claw_eval_tasks", "grader_support"]

# Upstream's agent always has its sandbox's file tools and a final answer; ours are these.
PASS_THRESHOLD = 0.75  # upstream's is_pass on the grader's task score (eval/protocols.py uses the same)
AGENT_TOOLS = ("read_file", "write_file", "list_files", "submit_answer")
FINAL_HINT = "When you are done, give your final answer with the `submit_answer` tool."
USER_HINT = (
    "The user is available while you work: talk to them (ask a question, or give your answer) with "
    "the `ask_user` tool; their reply is its result."
)


def find_claw_eval_tasks(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("task.yaml"))


def _pick(item: dict[str, Any], *keys: str, default: Any = "") -> Any:
    return next((item[k] for k in keys if k in item and item[k] is not None), default)


def _norm_mail(m: dict[str, Any], i: int) -> dict[str, Any]:
    sender = _pick(m, "from", "sender", "from_addr")
    if isinstance(sender, dict):
        sender = sender.get("email", "")
    return {
        "id": str(_pick(m, "id", "message_id", default=f"m{i + 1}")),
        "from": sender,
        "to": _pick(m, "to", "recipient"),
        "subject": _pick(m, "subject"),
        "body": _pick(m, "body", "content", "snippet", "text"),
        "date": _pick(m, "date", "timestamp", "sent_at"),
        "read": bool(_pick(m, "read", "is_read", default=False)),
    }


def _norm_event(e: dict[str, Any], i: int) -> dict[str, Any]:
    return {
        "id": str(_pick(e, "id", "event_id", default=f"e{i + 1}")),
        "title": _pick(e, "title", "summary"),
        "start": str(_pick(e, "start", "start_time"))[:16],
        "end": str(_pick(e, "end", "end_time"))[:16],
        "attendees": list(_pick(e, "attendees", default=[])),
        "location": _pick(e, "location"),
    }


def _norm_simple(kind: str, x: dict[str, Any], i: int) -> dict[str, Any]:
    if kind == "contacts":
        return {
            "id": str(_pick(x, "id", "contact_id", default=f"c{i + 1}")),
            "name": _pick(x, "name", "full_name"),
            "email": _pick(x, "email"),
            "phone": _pick(x, "phone"),
            "company": _pick(x, "company", "organization"),
        }
    if kind == "kb":
        return {
            "id": str(_pick(x, "id", "article_id", default=f"kb{i + 1}")),
            "title": _pick(x, "title"),
            "body": _pick(x, "body", "content", "text"),
            "tags": " ".join(map(str, _pick(x, "tags", default=[]))),
        }
    if kind == "todo":
        done = _pick(x, "done", "completed", default=False) or _pick(x, "status") in ("done", "completed")
        return {
            "id": str(_pick(x, "id", "task_id", "todo_id", default=f"t{i + 1}")),
            "title": _pick(x, "title", "task"),
            "due": _pick(x, "due", "due_date"),
            "done": bool(done),
        }
    return {
        "id": str(_pick(x, "id", "note_id", default=f"n{i + 1}")),
        "title": _pick(x, "title"),
        "content": _pick(x, "content", "body", "text"),
    }


def _records(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, dict):
        data = next((v for v in data.values() if isinstance(v, list)), [])
    return [x for x in data if isinstance(x, dict)] if isinstance(data, list) else []


def _fixtures(task_dir: Path, services: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for theirs in services:
        ours = SERVICES.get(theirs)
        files = sorted((task_dir / "fixtures" / theirs).glob("*.json")) if ours else []
        items = [r for f in files for r in _records(json.loads(f.read_text()))]
        if ours == "mail":
            out["mail"] = {"inbox": [_norm_mail(m, i) for i, m in enumerate(items)]}
        elif ours == "calendar":
            out["calendar"] = {"events": [_norm_event(e, i) for i, e in enumerate(items)]}
        elif ours:
            key = {"contacts": "contacts", "kb": "articles", "todo": "items", "notes": "notes"}[ours]
            out[ours] = {key: [_norm_simple(ours, x, i) for i, x in enumerate(items)]}
    return out


def _ours_or_upstream(name: str, upstream: frozenset[str]) -> str | None:
    """The tool the agent calls for upstream's `name`: the upstream one when its service runs upstream."""
    return name if name in upstream else TOOLS.get(name)


def _component(
    i: int,
    sc: dict[str, Any],
    unsupported: list[str],
    judge_rubric: str = "",
    upstream: frozenset[str] = frozenset(),
) -> dict[str, Any] | None:
    """One scoring component → one check (None: not mappable)."""
    check = sc.get("check") or {}
    kind, name, weight = (
        check.get("type"),
        str(sc.get("name") or f"component_{i}"),
        float(sc.get("weight", 1.0)),
    )
    base = {"name": name, "weight": weight}
    if kind == "tool_called":
        tool = _ours_or_upstream(str(check.get("tool_name")), upstream)
        if tool is None:
            unsupported.append(f"scoring:tool_called:{check.get('tool_name')}")
            return None
        return {"kind": "called", **base, "tool": tool, "min_count": int(check.get("min_calls") or 1)}
    if kind == "keywords_present":
        return {
            "kind": "text",
            **base,
            "source": "output",
            "contains": [str(k) for k in check.get("keywords") or []],
        }
    if kind == "min_length":
        source = "final" if check.get("field") in (None, "final_text") else "output"
        return {"kind": "text", **base, "source": source, "min_length": int(check.get("min_length") or 0)}
    if kind == "llm_judge":  # judged on the host by --judge-engine (tasks/host_side.py), same weight
        rubric = str(check.get("rubric") or check.get("description") or judge_rubric or name)
        if judge_rubric and rubric != judge_rubric:
            rubric = f"{rubric}\n\n{judge_rubric}"
        return {"kind": "llm_judge", **base, "rubric": rubric}
    unsupported.append(f"scoring:{kind}")
    return None


def _safety(
    spec: dict[str, Any], unsupported: list[str], upstream: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    out = []
    for i, sc in enumerate(spec.get("safety_checks") or []):
        tool = _ours_or_upstream(str(sc.get("tool_name", "")), upstream)
        if sc.get("type") != "tool_not_called":
            unsupported.append(f"safety:{sc.get('type')}")
        elif tool is not None:
            out.append({"kind": "not_called", "name": f"safety_{i}", "tool": tool, "safety": True})
        # a forbidden tool we do not offer cannot be called: nothing to check
    return out


def _expected(
    spec: dict[str, Any], unsupported: list[str], upstream: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    out = []
    for ea in spec.get("expected_actions") or []:
        service, key = str(ea.get("service", "")), str(ea.get("action_key", ""))
        theirs = EXPECTED_UPSTREAM.get((service, key))
        tool = theirs if theirs in upstream else EXPECTED.get((service, key))
        if tool is None:
            unsupported.append(f"expected_action:{service}/{key}")
        elif ea.get("required", True):
            out.append({"kind": "called", "name": f"expected_{service}_{key}", "tool": tool})
    return out


def _tools(spec: dict[str, Any], unsupported: list[str], upstream: frozenset[str] = frozenset()) -> list[str]:
    names = [
        str(t.get("name"))
        for t in spec.get("tools") or []
        if isinstance(t, dict) and t.get("name") not in upstream
    ]
    unsupported += [f"tool:{n}" for n in names if n not in TOOLS and n not in NATIVE]
    return sorted({TOOLS[n] for n in names if n in TOOLS})


def _sandbox_files(task_dir: Path, spec: dict[str, Any], unsupported: list[str]) -> dict[str, bytes]:
    """Looked up as upstream's runner does: in the task folder, then from the repository root (a task may
    name another task's fixture, `tasks/<id>/fixtures/...`); laid out at the path as written."""
    out = {}
    for rel in spec.get("sandbox_files") or []:
        path = PurePosixPath(str(rel))
        found = (
            []
            if path.is_absolute() or ".." in path.parts
            else [
                p
                for p in (task_dir / path, task_dir.resolve().parent.parent / path)
                if p.is_file() and not p.is_symlink()
            ]
        )
        if not found:
            unsupported.append(f"sandbox_file:{rel}")
            continue
        out[f"environment/workspace/{path}"] = found[0].read_bytes()
    return out


def _upstream_files(
    task_dir: Path, spec: dict[str, Any], user: dict[str, Any], engine: str | None
) -> dict[str, str | bytes]:
    out: dict[str, str | bytes] = {}
    if (task_dir / "grader.py").is_file():
        out["tests/claw_eval/grader.py"] = (task_dir / "grader.py").read_bytes()
    if spec.get("reference_solution"):
        out["tests/claw_eval/reference_solution.md"] = str(spec["reference_solution"])
    if user.get("enabled"):
        keep = {k: user.get(k) for k in ("persona", "max_rounds", "system_prompt_suffix")}
        out["tests/user_agent.json"] = json.dumps({**keep, "engine": engine}, indent=1, ensure_ascii=False)
    return out


def _declarative(
    spec: dict[str, Any], unsupported: list[str], upstream: frozenset[str] = frozenset()
) -> tuple[list[dict[str, Any]], bool]:
    """(checks from scoring_components / safety_checks / expected_actions, whether one is an llm_judge)."""
    components = spec.get("scoring_components") or []
    judge = any((c.get("check") or {}).get("type") == "llm_judge" for c in components)
    rubric = str(spec.get("judge_rubric") or "")
    completion = [
        c for i, sc in enumerate(components) if (c := _component(i, sc, unsupported, rubric, upstream))
    ]
    checks = _safety(spec, unsupported, upstream) + completion + _expected(spec, unsupported, upstream)
    if not any(not c.get("safety") for c in checks) and not judge:
        unsupported.append("no_completion_check")
    return checks, judge


def convert_claw_eval(task_dir: Path, user_engine: str | None = None) -> TaskDraft:
    spec = yaml.safe_load((task_dir / "task.yaml").read_text()) or {}
    has_grader = (task_dir / "grader.py").is_file()
    problems, judge, peers = grader_support(task_dir) if has_grader else ([], False, {})
    graded = has_grader and not problems
    material, upstream = upstream_material(task_dir, spec, graded)
    manifest = json.loads(material[f"{UPSTREAM_DIR}/services.json"]) if material else {"services": []}
    run_upstream = {str(s["name"]) for s in manifest["services"]}
    theirs = [
        str(s.get("name")) for s in spec.get("services") or [] if str(s.get("name")) not in run_upstream
    ]
    unsupported = [f"service:{s}" for s in theirs if s not in SERVICES and s not in WEB]
    if graded:  # upstream's leaderboard scorer; the declarative fields are not what it counts
        checks, grader_files = [dict(GRADER_CHECK)], grader_run_files(task_dir, peers, spec)
    else:
        checks, judge = _declarative(spec, unsupported, upstream)
        grader_files = {}
        if has_grader and "no_completion_check" in unsupported:  # nothing but the grader could score it
            unsupported.remove("no_completion_check")
            unsupported += problems
    user = spec.get("user_agent") or {}
    prompt = spec.get("prompt") or {}
    instruction = str(prompt.get("text", "") if isinstance(prompt, dict) else prompt)
    attachments = prompt.get("attachments") if isinstance(prompt, dict) else None
    unseen = [a for a in attachments or [] if a not in (spec.get("sandbox_files") or [])]
    if (
        unseen
    ):  # upstream sends them as image/audio blocks of the prompt; one not in the workspace is never seen
        unsupported.append(
            f"claw_eval_attachments:{len(unseen)} file(s) sent with the prompt, not in sandbox_files"
        )
    if user.get("enabled"):  # upstream appends the suffix to the agent's system prompt
        suffix = str(user.get("system_prompt_suffix") or "").strip()
        instruction = "\n\n".join(x for x in (instruction.rstrip(), suffix, USER_HINT) if x)
    if any(c["kind"] == "text" for c in checks):
        instruction = f"{instruction.rstrip()}\n\n{FINAL_HINT}"
    draft = TaskDraft(
        name=f"claw-eval/{spec.get('task_id', task_dir.name)}",
        instruction=instruction,
        services=sorted({SERVICES[s] for s in theirs if s in SERVICES}),
        checks=checks
        or [{"kind": "answer", "name": "judge_only_placeholder", "equals": "<needs an LLM judge>"}],
        fixtures=_fixtures(task_dir, theirs),
        source="claw-eval",
        split="test",
        difficulty={"easy": "easy", "hard": "hard"}.get(str(spec.get("difficulty", "")), "medium"),
        tags=[str(spec.get("category") or "claw-eval"), *[str(t) for t in spec.get("tags") or []]],
        budget_s=float((spec.get("environment") or {}).get("timeout_seconds", 300)),
        pass_threshold=PASS_THRESHOLD if graded else 1.0,
        extra_files={
            **_sandbox_files(task_dir, spec, unsupported),
            **_upstream_files(task_dir, spec, user, user_engine),
            **grader_files,
            **material,
        },
    )
    tools = _tools(spec, unsupported, upstream)
    wants_answer = any(c["kind"] == "text" for c in checks)
    asks = ["ask_user"] if user.get("enabled") else []
    draft.tools = sorted({*tools, *AGENT_TOOLS, *asks}) if tools or wants_answer or asks or upstream else []
    draft.actions, why = oracle(draft)
    # the grader reads the conversation: eval builds it on the host from the call log (lifts the flag)
    needs = (["transcript"] if graded else []) + (
        ["user_simulator"] if user.get("enabled") and not user_engine else []
    )
    draft.extra_meta = {
        "requires_llm_judge": judge,
        "requires_internet": any(s in WEB for s in theirs),
        "unsupported": sorted(set(unsupported)),
        "needs": needs,
        "no_oracle": why,
        **_turn_cap(spec),
    }
    return draft


def _turn_cap(spec: dict[str, Any]) -> dict[str, int]:
    """Upstream's `environment.max_turns` (its runner stops the agent there): the task's own turn cap,
    which a harness with a turn limit (`zero`) applies; {} when the task gives none."""
    turns = (spec.get("environment") or {}).get("max_turns")
    return (
        {"max_turns": int(turns)}
        if isinstance(turns, int) and not isinstance(turns, bool) and turns > 0
        else {}
    )
