"""T950_ledger_post grader — written for openforgerl's tests in the shape of an upstream Claw-Eval grader:
completion from the ledger service's own /audit (120 posted to A-2, the Travel account)."""

from __future__ import annotations

from typing import Any

from claw_eval.graders.base import AbstractGrader
from claw_eval.models.trace import DimensionScores


class LedgerPostGrader(AbstractGrader):
    def grade(
        self,
        messages,
        dispatches,
        task,
        audit_data: dict[str, Any] | None = None,
        judge=None,
        media_events=None,
        env_snapshot=None,
    ) -> DimensionScores:
        scores = DimensionScores()
        posted = self.get_service_actions(audit_data, "ledger", "posted")
        travel = [p for p in posted if p.get("account_id") == "A-2" and p.get("amount") == 120]
        wrong = [p for p in posted if p not in travel]
        scores.completion = 1.0 if travel and not wrong else 0.0
        scores.robustness = (
            self.compute_robustness(dispatches) if dispatches else 0.0
        )  # a no-op earns nothing
        return scores
