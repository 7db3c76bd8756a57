"""Check kinds for imported task sets: agent text, trusted task graders, tau2 criteria.

```toml
[[checks]]
kind = "text"                   # Claw-Eval keywords_present / min_length
source = "output"               # final = the submitted answer; output = it plus the text of every
contains = ["delay", "project"] #   successful write call (drafts, sent mail, notes, files...)
min_length = 0

[[checks]]
kind = "python_grader"          # trusted task code: tests/<script>, run by the verifier only
script = "grader.py"            # relative to the folder of checks.toml; never outside it

[[checks]]
kind = "communicate"            # tau2: every string in the agent's messages to the user
info = ["refund"]

[[checks]]
kind = "tau2_db"                # tau2: final DB == DB after replaying the gold actions
domain = "airline"
actions = "tau2_gold_actions.json"

[[checks]]
kind = "llm_judge"              # Claw-Eval llm_judge component: judged on the host (tasks/host_side.py)
rubric = "..."                  #   by --judge-engine; the verifier gets the score (`Evidence.judge`)
weight = 0.7
```
`python_grader` scripts define `grade(evidence: dict) -> float | dict[str, float]` (scores in [0, 1];
a dict counts as its mean, and the check is worth that fraction of its weight); `evidence` has `state`,
`audit`, `workdir` (str or None) and `transcript` (a list of `{role, content}` messages, or None when the
rollout's messages are not available). They are task files, copied to the sandbox only for the verifier step,
so the agent never sees them. `communicate` needs the transcript and `tau2_db` a tau2 domain environment;
neither is available to the verifier yet, so they raise `GraderUnavailable` (an infra fault, never a trained
zero), and the importers flag such tasks instead of running them.

Importing this module registers the kinds with `spec` and `checks` (done by `verify/__init__.py`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from openforgerl.env.checks import evaluate as _checks
from openforgerl.env.checks import spec as _spec

__all__ = [
    "CommunicateCheck",
    "GraderUnavailable",
    "LlmJudgeCheck",
    "PythonGraderCheck",
    "Tau2DbCheck",
    "TextCheck",
    "agent_output",
    "final_text",
    "read_task_file",
]

# Tools whose arguments are the agent's own writing (what Claw-Eval's keyword checks look for).
WRITE_COMMANDS = {"send", "reply", "draft", "create", "update", "add", "write", "submit"}


class GraderUnavailable(RuntimeError):
    """The check cannot be judged here (no transcript, no tau2 domain): the verifier failed, not the agent."""


@dataclass
class TextCheck(_spec.Check):
    source: str = "output"
    contains: list[str] = field(default_factory=list)
    min_length: int = 0


@dataclass
class PythonGraderCheck(_spec.Check):
    script: str = ""


@dataclass
class CommunicateCheck(_spec.Check):
    info: list[str] = field(default_factory=list)


@dataclass
class LlmJudgeCheck(_spec.Check):
    rubric: str = ""


@dataclass
class Tau2DbCheck(_spec.Check):
    domain: str = ""
    actions: str = ""


def _source(v: Any) -> str:
    if v not in ("final", "output"):
        raise _spec.InvalidValue("Input should be 'final' or 'output'")
    return str(v)


def _strings(v: Any) -> list[str]:
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return list(v)
    raise _spec.InvalidValue("Input should be a list of strings")


def _inside(v: Any) -> str:
    """A relative path that stays inside the tests folder (no absolute path, no `..`)."""
    path = PurePosixPath(_spec.string(v))
    if not path.parts or path.is_absolute() or ".." in path.parts:
        raise _spec.InvalidValue("Input should be a path relative to the tests folder, without '..'")
    return str(path)


_FIELDS: dict[str, tuple[type[_spec.Check], dict[str, Any], tuple[str, ...]]] = {
    "text": (TextCheck, {"source": _source, "contains": _strings, "min_length": _spec.int_at_least(0)}, ()),
    "python_grader": (PythonGraderCheck, {"script": _inside}, ("script",)),
    "communicate": (CommunicateCheck, {"info": _strings}, ("info",)),
    "tau2_db": (Tau2DbCheck, {"domain": _spec.string, "actions": _inside}, ("domain", "actions")),
    "llm_judge": (LlmJudgeCheck, {"rubric": _spec.string}, ("rubric",)),
}


def final_text(ev: _checks.Evidence) -> str:
    """The agent's last words to the user: its last submitted answer (the instruction asks for one), else
    its last `ask_user` message (multi-turn tasks), else its last assistant message in the transcript
    ("" when none of them)."""
    for said in (
        _checks.collection(ev.state, "answer.submitted"),
        _checks.collection(ev.state, "user.asked"),
    ):
        if said:
            return str(said[-1])
    texts = [_content(m) for m in ev.transcript or [] if m.get("role") == "assistant"]
    texts = [s for s in texts if s.strip()]
    return texts[-1] if texts else ""


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def _is_write(tool: str) -> bool:
    from openforgerl.env.world_tools import get_tool

    spec = get_tool(tool)
    return spec is not None and spec.command in WRITE_COMMANDS


def agent_output(ev: _checks.Evidence) -> str:
    """Final text plus every string argument of the agent's successful write calls."""
    parts = [final_text(ev)]
    for call in ev.audit:
        if call.get("ok") and _is_write(str(call.get("tool", ""))):
            args = call.get("args") or {}
            parts += [str(v) for v in args.values() if isinstance(v, str | int | float)]
            parts += [str(x) for v in args.values() if isinstance(v, list) for x in v]
    return "\n".join(p for p in parts if p)


def _text(c: TextCheck, ev: _checks.Evidence) -> tuple[bool, str]:
    text = final_text(ev) if c.source == "final" else agent_output(ev)
    folded = " ".join(text.split()).casefold()
    missing = [k for k in c.contains if " ".join(k.split()).casefold() not in folded]
    if missing:
        return False, f"{c.source} text lacks {missing!r}"
    if len(text.strip()) < c.min_length:
        return False, f"{c.source} text has {len(text.strip())} characters, want >= {c.min_length}"
    return True, f"{c.source} text ok ({len(text.strip())} characters)"


def _evidence_dict(ev: _checks.Evidence) -> dict[str, Any]:
    return {
        "state": ev.state,
        "audit": list(ev.audit),
        "workdir": str(ev.workdir) if ev.workdir else None,
        "transcript": ev.transcript,
    }


def _score(raw: Any) -> float:
    values = list(raw.values()) if isinstance(raw, Mapping) else [raw]
    if not values or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        raise GraderUnavailable(f"grader returned {raw!r}, want a number or a dict of numbers")
    score = sum(float(v) for v in values) / len(values)
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        raise GraderUnavailable(f"grader score {score} is not in [0, 1]")
    return score


def read_task_file(ev: _checks.Evidence, rel: str) -> bytes:
    """A file of the task's tests folder (a grader script, its inputs); GraderUnavailable when it cannot be
    read safely: no link, FIFO or oversized file on the way (the folder is in the sandbox's reach)."""
    from openforgerl.sandbox.base import TamperError
    from openforgerl.sandbox.safefile import read_under

    if ev.tests_dir is None:
        raise GraderUnavailable("a task grader needs the tests folder (Evidence.tests_dir)")
    try:
        return read_under(ev.tests_dir, rel)
    except (OSError, TamperError) as exc:
        raise GraderUnavailable(f"{rel!r} under {ev.tests_dir}: {exc}") from exc


def _python_grader(c: PythonGraderCheck, ev: _checks.Evidence) -> tuple[float, str]:
    if ev.tests_dir is None:
        raise GraderUnavailable("python_grader needs the tests folder (Evidence.tests_dir)")
    source = read_task_file(ev, c.script)
    namespace: dict[str, Any] = {"__name__": "task_grader", "__file__": str(ev.tests_dir / c.script)}
    exec(compile(source, str(ev.tests_dir / c.script), "exec"), namespace)  # trusted task code
    grade = namespace.get("grade")
    if not callable(grade):
        raise GraderUnavailable(f"{c.script} defines no grade(evidence)")
    try:
        score = _score(grade(_evidence_dict(ev)))
    except Exception as exc:
        if _grades_an_empty_run(grade):  # it works here: the rollout's own data tripped it (see `_EMPTY`)
            return (
                0.0,
                f"{c.script} raised {type(exc).__name__} on this rollout's data (it grades an empty run): 0",
            )
        if isinstance(exc, GraderUnavailable):
            raise
        raise GraderUnavailable(f"{c.script} raised {type(exc).__name__}: {exc}") from exc
    return score, f"{c.script} scored {score:.3f}"


# A run with nothing in it. A trusted grader that scores it but raises (or returns no score) on a
# rollout was tripped by what the agent made (an odd message, a malformed file or argument): a 0, or a
# policy could turn any 0 into a retried infra fault. One that raises on this too is broken: infra.
# (A grader that reads fixed keys of `state` raises on it as well, and stays infra: the limit of a
# check that does not know the task's initial state.)
_EMPTY: dict[str, Any] = {"state": {}, "audit": [], "workdir": None, "transcript": []}


def _grades_an_empty_run(grade: Any) -> bool:
    try:
        _score(grade(dict(_EMPTY)))
    except Exception:
        return False
    return True


def _communicate(c: CommunicateCheck, ev: _checks.Evidence) -> tuple[bool, str]:
    """tau2's rule: each string, lower-cased, inside some assistant message (lower-cased, commas removed)."""
    if ev.transcript is None:
        raise GraderUnavailable("communicate needs the rollout's messages (no transcript given)")
    said = [_content(m).lower().replace(",", "") for m in ev.transcript if m.get("role") == "assistant"]
    missing = [i for i in c.info if not any(i.lower() in s for s in said)]
    return not missing, f"not communicated: {missing!r}" if missing else "all information communicated"


def _tau2_db(c: Tau2DbCheck, ev: _checks.Evidence) -> tuple[bool, str]:
    raise GraderUnavailable(f"tau2_db needs the tau2 {c.domain!r} domain environment (not available here)")


def _llm_judge(c: LlmJudgeCheck, ev: _checks.Evidence) -> tuple[float, str]:
    """The host-side judge's score for this component; none given is infra (never a trained 0)."""
    if ev.judge is None or c.name not in ev.judge:
        raise GraderUnavailable(f"llm_judge {c.name!r} has no judge score (no --judge-engine?)")
    score = float(ev.judge[c.name])
    if not math.isfinite(score) or not 0.0 <= score <= 1.0:
        raise GraderUnavailable(f"judge score {score} of {c.name!r} is not in [0, 1]")
    return score, f"judge scored {score:.3f}"


def register() -> None:
    """Add the kinds to the SDK's check kinds, each with its judge (idempotent)."""
    judges: dict[str, Any] = {
        "text": _text,
        "python_grader": _python_grader,
        "communicate": _communicate,
        "tau2_db": _tau2_db,
        "llm_judge": _llm_judge,
    }
    for kind, (check, fields, required) in _FIELDS.items():
        _spec.CHECK_KINDS.register(kind, _spec.CheckKind(check, fields, required, judges[kind]), replace=True)


register()
