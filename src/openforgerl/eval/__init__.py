"""Evaluation: unbiased pass@k / pass^k per harness and service with bootstrap CIs (`metrics`, pure),
reports as JSON / Markdown / PNG (`report`), each imported benchmark under its authors' protocol
(`protocols`), the embedded default stack (`stack`) and the run through the orchestrator (`runner`, `command`)."""

from openforgerl.eval.metrics import Trial, group_metrics, pass_at_k, pass_hat_k

__all__ = ["Trial", "group_metrics", "pass_at_k", "pass_hat_k"]
