"""Upstream Claw-Eval's names as ours, and which of its own mock services run here (claw_eval.py imports
the tasks).

- The name tables: upstream service → ours (`SERVICES`), upstream tool → ours by what its endpoint does
  (`TOOLS`), our argument names → upstream's (`UPSTREAM_ARGS`), the /audit lists of upstream's
  `expected_actions` → the tool filling each (`EXPECTED`, `EXPECTED_UPSTREAM`). The verifier uses them
  too, to hand an imported grader our audit under upstream's names (verify/claw_eval_inputs.py).
- `upstream_material`: when the source is upstream's repository, the services that run upstream's own
  code (see claw_eval.py's docstring for when), with their server files, fixtures and a `services.json`
  manifest laid out under `environment/upstream/` (envs/claw/services/upstream.py runs them).
"""

from __future__ import annotations

import json
import re
from pathlib import Path, PurePosixPath
from typing import Any

SERVICES = {
    "gmail": "mail",
    "calendar": "calendar",
    "contacts": "contacts",
    "kb": "kb",
    "todo": "todo",
    "notes": "notes",
}
WEB = {"web", "web_real", "web_real_injection"}
# Upstream tool → ours, by the upstream endpoint's semantics (tool_endpoints: /gmail/drafts/save, ...).
TOOLS = {
    "gmail_list_messages": "mail_list",
    "gmail_get_message": "mail_read",
    "gmail_save_draft": "mail_draft",
    "gmail_send_message": "mail_send",
    "calendar_list_events": "calendar_list",
    "calendar_create_event": "calendar_create",
    "calendar_delete_event": "calendar_delete",
    "contacts_search": "contacts_find",
    "kb_search": "kb_search",
    "kb_get_article": "kb_read",
    "todo_list_tasks": "todo_list",
    "todo_create_task": "todo_add",
    "notes_list": "notes_list",
    "notes_get": "notes_read",
    # upstream's sandbox tools (runner/sandbox_tools.py) with an equivalent among ours
    "Read": "read_file",
    "Write": "write_file",
    "Glob": "list_files",
}
# Our argument name → upstream's, where they differ (graders read `request_body["message_id"]`, ...).
UPSTREAM_ARGS = {
    "mail_read": {"id": "message_id"},
    "kb_read": {"id": "article_id"},
    "calendar_delete": {"id": "event_id"},
    "calendar_create": {"start": "start_time", "end": "end_time"},
}
# Upstream sandbox tools every harness CLI has natively (its shell and editor): not flagged when
# offered, but a `tool_called` on them cannot be observed (harness-native calls are not in our audit).
NATIVE = {"Bash", "Edit", "Grep"}
# (service, action_key in its /audit) → the tool of ours that fills that list.
EXPECTED = {
    ("gmail", "drafts"): "mail_draft",
    ("gmail", "sent"): "mail_send",
    ("calendar", "created_events"): "calendar_create",
    ("todo", "created_tasks"): "todo_add",
}
# (service, action_key) → the upstream tool that fills that list, when the service runs upstream's code
EXPECTED_UPSTREAM = {
    ("gmail", "drafts"): "gmail_save_draft",
    ("gmail", "sent"): "gmail_send_message",
    ("calendar", "created_events"): "calendar_create_event",
    ("todo", "created_tasks"): "todo_create_task",
}
NOT_UPSTREAM = {"web_real", "web_real_injection", "documents"}  # the internet; files of upstream's cwd
UPSTREAM_DIR = "environment/upstream"


# ---------------------------------------------------------------- upstream's own mock services


def _repo_root(task_dir: Path) -> Path | None:
    """Upstream's repository root above a task folder (`<root>/tasks/<id>`), if the source is the repo."""
    root = task_dir.resolve().parent.parent
    return root if (root / "mock_services" / "_base.py").is_file() else None


def _endpoint_path(url: str) -> str:
    rest = url.split("://", 1)[-1]
    return "/" + rest.split("/", 1)[1] if "/" in rest else "/"


def _port_of(url: str) -> str:
    host = url.split("://", 1)[-1].split("/", 1)[0]
    return host.rsplit(":", 1)[1] if ":" in host else ""


def _tool_services(spec: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    """Tool name → (service, method, path) of its declared endpoint (the service by the endpoint's port)."""
    by_port = {
        str(s.get("port")): str(s.get("name")) for s in spec.get("services") or [] if isinstance(s, dict)
    }
    out = {}
    for e in spec.get("tool_endpoints") or []:
        url = str(e.get("url") or "")
        if by_port.get(_port_of(url)):
            out[str(e.get("tool_name"))] = (
                by_port[_port_of(url)],
                str(e.get("method") or "POST"),
                _endpoint_path(url),
            )
    return out


def _server_of(svc: dict[str, Any]) -> str:
    """The mock service folder a service's `command` runs
    (`python mock_services/<x>/server.py` → x), or ""."""
    found = re.fullmatch(
        r"python3?\s+mock_services/([\w-]+)/server\.py", str(svc.get("command") or "").strip()
    )
    return found.group(1) if found else ""


def _upstream_services(spec: dict[str, Any], root: Path | None, graded: bool) -> list[dict[str, Any]]:
    """The task's services that run upstream's code (see the module docstring)."""
    if root is None:
        return []
    endpoints = _tool_services(spec)
    out = []
    for svc in spec.get("services") or []:
        name, code = str(svc.get("name")), _server_of(svc)
        if not code or code in NOT_UPSTREAM or not (root / "mock_services" / code / "server.py").is_file():
            continue
        unmapped = any(s == name and t not in TOOLS for t, (s, _, _) in endpoints.items())
        if graded or name not in SERVICES or unmapped:
            out.append(svc)
    return out


GRADER_ONLY_FIXTURES = {
    "oracle.json"
}  # image-QA's answers: never copied where a service (and the agent) runs


def _fixture_files(
    root: Path, task_dir: Path, services: list[dict[str, Any]], servers: dict[str, bytes]
) -> dict[str, bytes]:
    """The task's fixtures, files named in the services' env and the fixture folders of the tasks whose
    files a server reads by default (upstream resolves both from its repo root)."""
    folders = {task_dir.resolve() / "fixtures"}
    for source in servers.values():
        folders |= {
            root / "tasks" / t.decode() / "fixtures"
            for t in re.findall(rb'"tasks"\s*/\s*"([\w.-]+)"', source)
        }
    files = {p for f in folders if f.is_dir() for p in f.rglob("*") if p.is_file()}
    for svc in services:
        for value in (svc.get("env") or {}).values():
            rel = PurePosixPath(str(value))
            if not rel.is_absolute() and ".." not in rel.parts and (root / rel).is_file():
                files.add(root / rel)
    return {
        str(PurePosixPath(p.relative_to(root))): p.read_bytes()
        for p in sorted(files)
        if root in p.resolve().parents and not p.is_symlink() and p.name not in GRADER_ONLY_FIXTURES
    }


def upstream_material(
    task_dir: Path, spec: dict[str, Any], graded: bool
) -> tuple[dict[str, bytes], frozenset[str]]:
    """({path in the task folder: bytes} under `environment/upstream/`, the tools that call upstream's
    services). Nothing when the source is not upstream's repository or no service runs upstream's code."""
    root = _repo_root(task_dir)
    services = _upstream_services(spec, root, graded)
    if root is None or not services:
        return {}, frozenset()
    names = {str(s.get("name")) for s in services}
    endpoints = {t: e for t, e in _tool_services(spec).items() if e[0] in names}
    schemas = {str(t.get("name")): t for t in spec.get("tools") or [] if isinstance(t, dict)}
    tools = [
        {
            "name": t,
            "description": str(schemas.get(t, {}).get("description") or ""),
            "input_schema": schemas.get(t, {}).get("input_schema") or {"type": "object", "properties": {}},
            "service": s,
            "method": m,
            "path": p,
        }
        for t, (s, m, p) in endpoints.items()
        if t in schemas
    ]
    codes = sorted({_server_of(s) for s in services})
    servers = {
        f"mock_services/{c}/server.py": (root / "mock_services" / c / "server.py").read_bytes() for c in codes
    }
    manifest = {
        "services": [
            {
                "name": str(s.get("name")),
                "server": f"mock_services/{_server_of(s)}/server.py",
                "env": {str(k): str(v) for k, v in (s.get("env") or {}).items()},
                "audit": _audit_path(s),
            }
            for s in services
        ],
        "tools": tools,
    }
    files = {
        "mock_services/_base.py": (root / "mock_services" / "_base.py").read_bytes(),
        **servers,
        **_fixture_files(root, task_dir, services, servers),
        "services.json": json.dumps(manifest, indent=1, ensure_ascii=False).encode(),
    }
    return {f"{UPSTREAM_DIR}/{k}": v for k, v in files.items()}, frozenset(str(t["name"]) for t in tools)


def _audit_path(svc: dict[str, Any]) -> str:
    """Where upstream's runner reads a service's audit: its reset endpoint with `/reset` → `/audit`."""
    reset = str(svc.get("reset_endpoint") or "")
    return _endpoint_path(reset.rsplit("/reset", 1)[0] + "/audit") if reset else ""
