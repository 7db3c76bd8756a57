"""What a grader gets back from `judge.evaluate(...)` / `judge.evaluate_actions(...)`.

The judge object itself is openforgerl's (envs/claw/verify/claw_eval_grader.py): its calls are answered
by the host's `--judge-engine`, never from inside the verifier sandbox.
"""

from __future__ import annotations

from pydantic import BaseModel


class JudgeResult(BaseModel):
    score: float
    reasoning: str = ""
