"""Deterministic verifiers: a declarative spec (`tests/checks.toml`) judged against the final service
state, the audit log and the workspace. `python -m openforgerl.envs.claw.verify` runs it inside a sandbox."""

from openforgerl.envs.claw.verify import claw_eval_grader as _claw_eval_grader  # noqa: F401  (registers its kind)
from openforgerl.envs.claw.verify import graders as _graders  # noqa: F401  (registers its check kinds)
from openforgerl.envs.claw.verify.checks import Outcome, evaluate
from openforgerl.envs.claw.verify.spec import CheckSpec, load_spec

__all__ = ["CheckSpec", "Outcome", "evaluate", "load_spec"]
