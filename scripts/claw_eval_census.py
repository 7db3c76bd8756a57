"""How much of upstream Claw-Eval runs here: the figures the README and docs/importers.md quote.

    python scripts/claw_eval_census.py <a checkout of github.com/claw-eval/claw-eval>

Imports every task (`openforgerl.tasks.importing`), then
- graders: every task scored by its own `grader.py` is graded once in process on a two-message
  conversation, an empty audit and snapshot, with every judge call answered 0.5 (a raw chat call: "{}")
  (rounds until none is pending): "runs" = returned a score without raising;
- tasks: how many run with nothing, with the transcript (`eval`), and with a judge and a simulated user
  too, and the reasons the rest stay flagged (a task counts under each of its reasons).
"""

from __future__ import annotations

import collections
import sys
import tempfile
from pathlib import Path

from openforgerl.env.checks.evaluate import Evidence
from openforgerl.envs.claw.verify import evaluate, load_spec  # the package registers Claw's check kinds
from openforgerl.tasks.flags import reason_of, unmet
from openforgerl.tasks.format import load_task
from openforgerl.tasks.importing import import_any

TWO_MESSAGES = [
    {"role": "user", "content": "Do the task."},
    {"role": "assistant", "content": "I did the task: the answer is 42."},
]
EVERYTHING = frozenset({"transcript", "judge", "user_simulator"})


def grader_runs(folder: Path) -> str:
    """ "" when the grader scores the stand-in run, else why not."""
    spec = load_spec(folder / "tests/checks.toml")
    answers: dict[str, float | str] = {}
    try:
        for _ in range(5):
            outcome = evaluate(
                spec,
                Evidence(
                    {},
                    [],
                    None,
                    tests_dir=folder / "tests",
                    transcript=TWO_MESSAGES,
                    judge_answers=answers,
                    env_snapshot={},
                ),
            )
            if not outcome.judge_requests:
                return ""
            answers.update({r["key"]: "{}" if r["method"] == "chat" else 0.5 for r in outcome.judge_requests})
        return "judge calls still pending after 5 rounds"
    except Exception as exc:  # the figure counts what breaks, whatever it is
        return repr(exc)[:200]


def main(source: Path) -> None:
    tasks = [load_task(f) for f in import_any(source / "tasks", Path(tempfile.mkdtemp()))]
    graded = [t for t in tasks if "claw_eval_grader" in (t.root / "tests/checks.toml").read_text()]
    broken = {t.task_id: why for t in graded if (why := grader_runs(t.root))}
    judged = sum("requires_llm_judge" in t.flags for t in graded)
    print(
        f"imported {len(tasks)}; scored by their grader.py {len(graded)}; of those the grader runs for "
        f"{len(graded) - len(broken)} ({judged} call the judge)"
    )
    for task_id, why in sorted(broken.items()):
        print(f"  grader broken: {task_id}: {why}")
    for name, given in (
        ("with nothing", frozenset()),
        ("with the transcript (eval)", frozenset({"transcript"})),
        ("with a judge and a simulated user too", EVERYTHING),
    ):
        runs = [t for t in tasks if not unmet(t.flags, given)]
        print(f"run {name}: {len(runs)} ({sum(t in graded for t in runs)} grader-scored)")
    for label, pool in (("whole set", tasks), ("grader-scored", graded)):
        left = [t for t in pool if unmet(t.flags, EVERYTHING)]
        reasons = collections.Counter(
            r for t in left for r in {reason_of(f) for f in unmet(t.flags, EVERYTHING)}
        )
        print(f"still flagged ({label}): {len(left)}: {reasons.most_common()}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
