"""Why tasks cannot run: their flags grouped into reasons and counted, for `tasks validate` and `eval`.

A flag (`Task.flags`) is `requires_internet`, `requires_llm_judge`, `needs:<what>` or
`unsupported:<kind>:<detail>`; the reason is the flag without its detail (`unsupported:tool:x` →
`unsupported tool`), so a set of 300 imported tasks prints a few lines, not 300. A task with several
flags counts under each of its reasons.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["FlagSummary", "reason_of", "summarize_flags", "unmet"]

_PLAIN = {"requires_internet": "needs internet", "requires_llm_judge": "needs judge"}
# flag -> what lifts it when given (`HostSide.provided()`: eval's call log, --judge-engine, --user-engine)
_LIFTED_BY = {
    "requires_llm_judge": "judge",
    "needs:transcript": "transcript",
    "needs:user_simulator": "user_simulator",
}


def unmet(flags: Sequence[str], provided: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The flags that still keep a task from running when `provided` is given."""
    return [f for f in flags if _LIFTED_BY.get(f) not in provided]


def reason_of(flag: str) -> str:
    """`needs:user_simulator` → `needs user_simulator`; `unsupported:service:crm` → `unsupported service`."""
    if flag in _PLAIN:
        return _PLAIN[flag]
    head, _, rest = flag.partition(":")
    if head == "needs":
        return f"needs {rest or '?'}"
    if head == "unsupported":
        return f"unsupported {rest.split(':', 1)[0] or '?'}"
    return flag


@dataclass(frozen=True)
class FlagSummary:
    total: int
    runnable: int
    reasons: dict[str, int]
    """Reason → number of flagged tasks that have it (most frequent first)."""

    def line(self, noun: str = "tasks") -> str:
        """`0 runnable of 12 tasks: 8 needs user_simulator, 4 needs judge`."""
        head = f"{self.runnable} runnable of {self.total} {noun}"
        parts = [f"{n} {reason}" for reason, n in self.reasons.items()]
        return f"{head}: {', '.join(parts)}" if parts else head


def summarize_flags(flag_lists: Iterable[Sequence[str]]) -> FlagSummary:
    """One entry per task: its flags (empty = runnable)."""
    lists = [list(f) for f in flag_lists]
    counts: Counter[str] = Counter()
    for flags in lists:
        counts.update({reason_of(f) for f in flags})
    ordered = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return FlagSummary(len(lists), sum(1 for f in lists if not f), ordered)
