"""Behaviour metrics of one rollout's tool-event stream (pure: frozen dataclasses in, numbers out).

Definitions (docs/analytics.md quotes them; `None` means "not defined for this rollout", never 0):
- **sv** self-verification: 1 if some successful write is followed, before the first final answer
  (or the end), by a successful read of the same resource — resources intersect, or the read covers
  the whole service (`mail_list`), or the write names no resource and the read is of its service.
  A write's resources include the id its result returned (`{"id": "m1001"}`). None without a
  successful write. **sv_frac**: verified writes / successful writes.
- **tc**: distinct tools called (any outcome). **tc_norm**: |called ∩ offered| / |offered|.
  **tc_req**: |called ∩ gold tools| / |gold tools|.
- **er** error recovery: over error events (`ok=False` or an injected fault), the share followed
  within the next 4 events of the same service by a successful call of the same tool. None when the
  rollout had no error (the denominator is reported apart: `errors`).
- **cfs** catastrophic first step: 1 if the first write fails (not by an injected fault), names no
  resource of any gold write (or the task's gold has no write at all), or trips a `not_called` safety
  check. None without a write; without known gold actions only failure and safety count.
- **pc** plan completion: gold actions matched in order by successful events (greedy) / |gold|. A
  gold action matches an event of the same tool whose arguments equal the gold's key arguments
  (strings compared case- and space-insensitively, lists as sets; free text `body`, `content`,
  `answer` is not compared).
- **iba** inspect before act: 1 if a read of the first write's service (or of one of its resources)
  comes before it. None without a write.
- **loop**: longest run of consecutive identical calls (tool + arguments). **rep_ratio**: calls that
  repeat an earlier identical call / calls.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from openforgerl.analytics.effects import Effect, classify
from openforgerl.analytics.events import ToolEvent

__all__ = [
    "GoldAction",
    "RolloutBehaviour",
    "RolloutFacts",
    "behaviour",
    "catastrophic_first_step",
    "error_recovery",
    "inspect_before_act",
    "longest_loop",
    "plan_completion",
    "repeat_ratio",
    "self_verification",
    "tool_coverage",
]

RECOVERY_WINDOW = 4
FREE_TEXT = frozenset({"body", "content", "answer", "description", "note"})


@dataclass(frozen=True, slots=True)
class GoldAction:
    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RolloutFacts:
    """Everything the metrics need about one rollout."""

    rollout_id: str
    events: tuple[ToolEvent, ...]
    passed: bool = False
    task_id: str = "?"
    harness: str = "?"
    family: str = "?"
    run: str = "run"
    reward: float | None = None
    offered: frozenset[str] = frozenset()
    gold: tuple[GoldAction, ...] = ()
    forbidden: tuple[GoldAction, ...] = ()
    """`not_called` safety checks: tool + the arguments they match."""
    model_calls: int = 0


@dataclass(frozen=True, slots=True)
class RolloutBehaviour:
    rollout_id: str
    task_id: str
    harness: str
    family: str
    run: str
    passed: bool
    sv: float | None
    sv_frac: float | None
    tc: float
    tc_norm: float | None
    tc_req: float | None
    er: float | None
    errors: int
    faults: int
    cfs: float | None
    pc: float | None
    iba: float | None
    loop: float
    rep_ratio: float | None
    tool_calls: int
    model_calls: int
    calls_to_first_write: int | None

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _before_final(events: Sequence[ToolEvent]) -> Sequence[ToolEvent]:
    for i, e in enumerate(events):
        if e.effect is Effect.FINAL and e.ok:
            return events[:i]
    return events


def _returned_ids(e: ToolEvent) -> set[str]:
    try:
        data = json.loads(e.output or "")
    except ValueError:
        return set()
    found = data.get("id") if isinstance(data, dict) else None
    return {f"{e.service}:{str(found).casefold()}"} if isinstance(found, str | int) else set()


def _covers(read: ToolEvent, write: ToolEvent, write_res: set[str]) -> bool:
    if read.resources & write_res:
        return True
    if f"{write.service}:*" in read.resources:
        return True
    return not write_res and read.service == write.service


def self_verification(events: Sequence[ToolEvent]) -> tuple[float | None, float | None]:
    """(sv, sv_frac); see the module docstring."""
    span = _before_final(events)
    writes = [i for i, e in enumerate(span) if e.effect is Effect.WRITE and e.ok]
    if not writes:
        return None, None
    verified = 0
    for i in writes:
        w = span[i]
        res = set(w.resources) | _returned_ids(w)
        if any(r.effect is Effect.READ and r.ok and _covers(r, w, res) for r in span[i + 1 :]):
            verified += 1
    return float(verified > 0), verified / len(writes)


def tool_coverage(
    events: Sequence[ToolEvent], offered: Iterable[str] = (), gold: Iterable[str] = ()
) -> tuple[float, float | None, float | None]:
    called = {e.tool for e in events}
    offered_set, gold_set = set(offered), set(gold)
    norm = len(called & offered_set) / len(offered_set) if offered_set else None
    req = len(called & gold_set) / len(gold_set) if gold_set else None
    return float(len(called)), norm, req


def error_recovery(events: Sequence[ToolEvent], window: int = RECOVERY_WINDOW) -> tuple[float | None, int]:
    """(recovered / errors or None, errors)."""
    errors = [i for i, e in enumerate(events) if e.failed]
    if not errors:
        return None, 0
    recovered = 0
    for i in errors:
        bad = events[i]
        later = [e for e in events[i + 1 :] if e.service == bad.service][:window]
        recovered += any(e.tool == bad.tool and e.ok and e.fault is None for e in later)
    return recovered / len(errors), len(errors)


def _norm(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.split()).casefold()
    if isinstance(value, list):
        return sorted(str(_norm(v)) for v in value)
    return value


def action_matches(event: ToolEvent, gold: GoldAction) -> bool:
    if event.tool != gold.tool:
        return False
    return all(_norm(event.args.get(k)) == _norm(v) for k, v in gold.args.items() if k not in FREE_TEXT)


def _first_write(events: Sequence[ToolEvent]) -> int | None:
    return next((i for i, e in enumerate(events) if e.effect is Effect.WRITE), None)


def catastrophic_first_step(
    events: Sequence[ToolEvent], gold: Sequence[GoldAction] = (), forbidden: Sequence[GoldAction] = ()
) -> float | None:
    first = _first_write(events)
    if first is None:
        return None
    w = events[first]
    if w.ok is False and w.fault is None:
        return 1.0
    if any(action_matches(w, f) for f in forbidden):
        return 1.0
    if not gold:  # the task's gold actions are unknown: only a failed or forbidden first write counts
        return 0.0
    gold_res: set[str] = set()
    for g in gold:
        effect, _, res = classify(g.tool, g.args)
        if effect is Effect.WRITE:
            gold_res |= res
    return 0.0 if w.resources & gold_res else 1.0


def plan_completion(events: Sequence[ToolEvent], gold: Sequence[GoldAction]) -> float | None:
    if not gold:
        return None
    j = 0
    for e in events:
        if j < len(gold) and e.ok and action_matches(e, gold[j]):
            j += 1
    return j / len(gold)


def inspect_before_act(events: Sequence[ToolEvent]) -> float | None:
    first = _first_write(events)
    if first is None:
        return None
    w = events[first]
    return float(
        any(
            e.effect is Effect.READ and (e.service == w.service or e.resources & w.resources)
            for e in events[:first]
        )
    )


def longest_loop(events: Sequence[ToolEvent]) -> int:
    best = run = 0
    prev: tuple[str, str] | None = None
    for e in events:
        run = run + 1 if e.key == prev else 1
        prev = e.key
        best = max(best, run)
    return best


def repeat_ratio(events: Sequence[ToolEvent]) -> float | None:
    if not events:
        return None
    return 1.0 - len({e.key for e in events}) / len(events)


def behaviour(f: RolloutFacts) -> RolloutBehaviour:
    ev = f.events
    sv, sv_frac = self_verification(ev)
    tc, tc_norm, tc_req = tool_coverage(ev, f.offered, {g.tool for g in f.gold})
    er, errors = error_recovery(ev)
    return RolloutBehaviour(
        rollout_id=f.rollout_id,
        task_id=f.task_id,
        harness=f.harness,
        family=f.family,
        run=f.run,
        passed=f.passed,
        sv=sv,
        sv_frac=sv_frac,
        tc=tc,
        tc_norm=tc_norm,
        tc_req=tc_req,
        er=er,
        errors=errors,
        faults=sum(e.fault is not None for e in ev),
        cfs=catastrophic_first_step(ev, f.gold, f.forbidden),
        pc=plan_completion(ev, f.gold),
        iba=inspect_before_act(ev),
        loop=float(longest_loop(ev)),
        rep_ratio=repeat_ratio(ev),
        tool_calls=len(ev),
        model_calls=f.model_calls,
        calls_to_first_write=_first_write(ev),
    )
