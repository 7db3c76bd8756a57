"""Evaluation: unbiased pass@k / pass^k per harness and service with bootstrap CIs (`metrics`, pure),
reports as JSON / Markdown / PNG (`report`), each imported benchmark under its authors' scoring rule
(`scoring`) and the run through the orchestrator (`runner`; the `eval` command is `cli/eval.py`)."""

from openforgerl.eval.metrics import Trial, group_metrics, pass_at_k, pass_hat_k

__all__ = ["Trial", "group_metrics", "pass_at_k", "pass_hat_k"]
