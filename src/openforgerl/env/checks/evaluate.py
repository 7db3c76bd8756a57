"""Judge a `Spec` against final state, audit log and workspace. Pure: inputs in, `Outcome` out.

reward = safety × completion, where safety = 1 unless a safety check failed, and completion is the
weighted fraction of passed non-safety checks. `pass` = reward ≥ pass_threshold.

Importing this module registers the built-in kinds in `spec.CHECK_KINDS`, each with its judge.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openforgerl.env.checks.spec import (
    ANSWER_FIELDS,
    CALLED_FIELDS,
    CHECK_KINDS,
    FILE_FIELDS,
    RECORD_FIELDS,
    AnswerCheck,
    CalledCheck,
    CheckKind,
    FileCheck,
    RecordCheck,
    Spec,
)
from openforgerl.sandbox.base import TamperError
from openforgerl.sandbox.safefile import read_under

__all__ = ["Evidence", "Outcome", "collection", "evaluate"]


@dataclass(frozen=True)
class Evidence:
    state: Mapping[str, Any]
    audit: Sequence[Mapping[str, Any]]
    workdir: Path | None
    violations: list[str] = field(default_factory=list)
    """Files of the agent's the verifier refused to read (a link, FIFO, device, oversized...)."""
    tests_dir: Path | None = None
    """The folder of checks.toml (task code such as `python_grader` scripts lives there)."""
    transcript: Sequence[Mapping[str, Any]] | None = None
    """The rollout's messages ({role, content}), when the verifier is given them."""
    judge: Mapping[str, float] | None = None
    """Scores of the `llm_judge` checks by name, judged on the host before this verifier ran."""
    judge_answers: Mapping[str, float | str] | None = None
    """The host judge's answers to a task grader's judge calls, by request key (`claw_eval_grader`): a score,
    or a reply's text for a raw chat call."""
    judge_requests: list[dict[str, Any]] = field(default_factory=list)
    """Judge calls a task grader made that the host has not answered yet: this run's reward is void."""
    sub_scores: dict[str, float] = field(default_factory=dict)
    """Scores a check reports besides its own (`<check>.<part>`, e.g. a grader's dimensions), for the log."""
    upstream_audit: Mapping[str, Any] | None = None
    """Upstream Claw-Eval services' own /audit by service name
    (read with the token; `services/upstream.py`)."""
    env_snapshot: Mapping[str, Any] | None = None
    """Upstream Claw-Eval's env snapshot of the agent's final workdir, taken by the
    host (Claw's `snapshot.py`)."""
    media_events: Sequence[Mapping[str, Any]] | None = None
    """Claw-Eval `MediaLoad` events: the images the gateway recorded reaching the
    model (`tasks/transcript.py`)."""
    user_record: Sequence[Mapping[str, str]] | None = None
    """The simulated user's dialogue as the host relayed it (`env/user_sim.py`), `[{role, content}]`."""


@dataclass(frozen=True)
class Outcome:
    reward: float
    completion: float
    safety: float
    passed: bool
    checks: dict[str, float] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    """Non-empty: what the agent left behind broke the rules; the reward is 0 (`TamperError`)."""
    judge_requests: list[dict[str, Any]] = field(default_factory=list)
    """Non-empty: a grader's judge calls wait for the host; judge them and run the verifier again."""

    def components(self) -> dict[str, float]:
        out = {
            "reward": self.reward,
            "completion": self.completion,
            "safety": self.safety,
            "pass": float(self.passed),
        }
        return out | {f"check.{k}": v for k, v in self.checks.items()}

    def log(self) -> str:
        head = (
            f"reward={self.reward:.3f} completion={self.completion:.3f} "
            f"safety={self.safety:.0f} pass={int(self.passed)}"
        )
        tampered = [f"VIOLATION {v}" for v in self.violations]
        return "\n".join([head, *tampered, *self.lines]) + "\n"


def _norm(v: object) -> object:
    return " ".join(v.split()).casefold() if isinstance(v, str) else v


def _equal(actual: object, expected: object) -> bool:
    if isinstance(expected, list):
        return isinstance(actual, list) and sorted(map(_norm, actual)) == sorted(map(_norm, expected))  # type: ignore[type-var]
    if isinstance(actual, list):
        return any(_norm(a) == _norm(expected) for a in actual)
    return _norm(actual) == _norm(expected)


def _has(actual: object, needles: str | list[str]) -> bool:
    text = (
        " ".join(map(str, actual)) if isinstance(actual, list) else str(actual if actual is not None else "")
    )
    text = " ".join(text.split()).casefold()
    wanted = [needles] if isinstance(needles, str) else needles
    return all(" ".join(n.split()).casefold() in text for n in wanted)


def _matches(item: Mapping[str, Any], match: Mapping[str, Any], contains: Mapping[str, Any]) -> bool:
    return all(_equal(item.get(k), v) for k, v in match.items()) and all(
        _has(item.get(k), v) for k, v in contains.items()
    )


def collection(state: Mapping[str, Any], dotted: str) -> list[Any]:
    """The list at `<service>.<list>` of a state snapshot ([] when absent or not a list)."""
    service, _, key = dotted.partition(".")
    value = state.get(service, {}).get(key, [])
    return value if isinstance(value, list) else []


def _record(c: RecordCheck, ev: Evidence) -> tuple[bool, str]:
    items = collection(ev.state, c.collection)
    n = sum(1 for it in items if isinstance(it, Mapping) and _matches(it, c.match, c.contains))
    if c.kind == "no_record":
        return n == 0, f"{n} matching record(s) in {c.collection}, want none"
    ok = n == c.count if c.count is not None else n >= 1
    return (
        ok,
        f"{n} matching record(s) in {c.collection} (of {len(items)}), "
        f"want {c.count if c.count is not None else '>=1'}",
    )


def _called(c: CalledCheck, ev: Evidence) -> tuple[bool, str]:
    calls = [
        a
        for a in ev.audit
        if a.get("tool") == c.tool and a.get("ok") and _matches(a.get("args") or {}, c.match, c.contains)
    ]
    if c.kind == "not_called":
        return not calls, f"{c.tool} succeeded {len(calls)} time(s) with matching args, want 0"
    return len(calls) >= c.min_count, f"{c.tool} succeeded {len(calls)} time(s), want >= {c.min_count}"


def _json_get(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        elif isinstance(data, dict) and part in data:
            data = data[part]
        else:
            return None
    return data


def _file(c: FileCheck, ev: Evidence) -> tuple[bool, str]:
    if ev.workdir is None:
        return False, "no workdir given"
    try:  # never follows a link, never blocks on a FIFO, bounded (the agent wrote it)
        data = read_under(ev.workdir, c.path)
    except FileNotFoundError:
        return not c.exists, f"{c.path} does not exist"
    except TamperError as exc:
        ev.violations.append(str(exc))
        return False, f"{c.path} refused: {exc}"
    if not c.exists:
        return False, f"{c.path} exists, want absent"
    return _file_content(c, data.decode(errors="replace"))


def _file_content(c: FileCheck, text: str) -> tuple[bool, str]:
    if c.equals is not None and text.strip() != c.equals.strip():
        return False, f"{c.path} content differs from the expected text"
    if c.contains and not _has(text, c.contains):
        return False, f"{c.path} lacks {c.contains!r}"
    if c.not_contains and any(
        _has(text, n) for n in ([c.not_contains] if isinstance(c.not_contains, str) else c.not_contains)
    ):
        return False, f"{c.path} contains forbidden text {c.not_contains!r}"
    if c.json_fields:
        try:
            data = json.loads(text)
        except ValueError:
            return False, f"{c.path} is not JSON"
        bad = [k for k, v in c.json_fields.items() if not _equal(_json_get(data, k), v)]
        if bad:
            return False, f"{c.path} JSON fields wrong: {', '.join(bad)}"
    return True, f"{c.path} ok"


def _answer(c: AnswerCheck, ev: Evidence) -> tuple[bool, str]:
    submitted = collection(ev.state, "answer.submitted")
    if not submitted:
        return False, "no answer submitted"
    last = str(submitted[-1])
    if c.equals is not None and _norm(last) != _norm(c.equals):
        return False, f"answer {last!r} != {c.equals!r}"
    if c.contains and not _has(last, c.contains):
        return False, f"answer {last!r} lacks {c.contains!r}"
    return True, f"answer {last!r} ok"


# A judge says (passed, why); it may give a score in [0, 1] instead of a bool (e.g. `python_grader`).
_BUILT_IN = {
    "record": CheckKind(RecordCheck, RECORD_FIELDS, ("collection",), _record),
    "called": CheckKind(CalledCheck, CALLED_FIELDS, ("tool",), _called),
    "file": CheckKind(FileCheck, FILE_FIELDS, ("path",), _file),
    "answer": CheckKind(AnswerCheck, ANSWER_FIELDS, (), _answer),
}
for _name, _family in (
    ("record", "record"),
    ("no_record", "record"),
    ("called", "called"),
    ("not_called", "called"),
    ("file", "file"),
    ("answer", "answer"),
):
    CHECK_KINDS.register(_name, _BUILT_IN[_family], replace=True)


def evaluate(spec: Spec, ev: Evidence) -> Outcome:
    checks: dict[str, float] = {}
    lines: list[str] = []
    done = total = 0.0
    safety = 1.0
    for c in spec.checks:
        ok, detail = CHECK_KINDS.get(c.kind).judge(c, ev)
        checks[c.name] = float(ok)
        lines.append(f"{'PASS' if ok >= 1 else 'FAIL'} {c.name}{' [safety]' if c.safety else ''}: {detail}")
        if c.safety:
            safety = min(safety, float(ok))
        else:
            total += c.weight
            done += c.weight * ok
    completion = done / total if total else 1.0
    reward = 0.0 if ev.violations else safety * completion
    checks.update(ev.sub_scores)
    return Outcome(
        reward,
        completion,
        safety,
        reward >= spec.pass_threshold - 1e-9 and not ev.violations,
        checks,
        lines,
        list(ev.violations),
        list(ev.judge_requests),
    )
