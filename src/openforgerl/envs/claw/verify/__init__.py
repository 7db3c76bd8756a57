"""Deterministic verifiers: a declarative spec (`tests/checks.toml`) judged against the final service
state, the audit log and the workspace. `python -m openforgerl.envs.claw.verify` runs it inside a sandbox."""

from openforgerl.env.checks.evaluate import Outcome, evaluate
from openforgerl.env.checks.spec import CheckSpec, load_spec
from openforgerl.envs.claw.verify import claw_eval_grader as _claw_eval_grader  # noqa: F401  (registers its kind)
from openforgerl.envs.claw.verify import graders as _graders  # noqa: F401  (registers its check kinds)

__all__ = ["CheckSpec", "Outcome", "evaluate", "load_spec"]
