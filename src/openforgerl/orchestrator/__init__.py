"""The rollout orchestrator: tasks x harness -> sandboxes -> gateway -> verifier -> RolloutRecords.

Entry point: `run_batch` (batch.py). One rollout's lifecycle: rollout.py; GRPO group policy:
groups.py; fault types and the `boundary` that classifies them: errors.py; what a task must
provide: `openforgerl.env.contract` (`TaskRuntime`, `Verdict`, `VerifierError`).
"""

from openforgerl.env.contract import TaskRuntime, Verdict, VerifierError
from openforgerl.orchestrator.batch import BatchResult, run_batch
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.orchestrator.gateway_client import GatewayClient, GatewayClientError, OpenedRollout
from openforgerl.orchestrator.groups import GroupResult, apply_group_policy, run_group
from openforgerl.orchestrator.results import ResultSink
from openforgerl.orchestrator.rollout import RolloutRequest, RolloutRunner

__all__ = [
    "BatchResult",
    "GatewayClient",
    "GatewayClientError",
    "GroupResult",
    "OpenedRollout",
    "OrchestratorConfig",
    "ResultSink",
    "RolloutRequest",
    "RolloutRunner",
    "TaskRuntime",
    "Verdict",
    "VerifierError",
    "apply_group_policy",
    "run_batch",
    "run_group",
]
