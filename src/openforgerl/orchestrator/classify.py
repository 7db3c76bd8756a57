"""Pure classification of a rollout's outcome from what the harness and the call log showed.

Precedence (first match wins):
1. an infra fault raised at a boundary (sandbox, gateway admin, harness start, verifier) — decided
   by the fault's type in `rollout.py`;
2. an infra error recorded on any call in the call log, by the one table
   `CallErrorKind.rollout_status` (engine 5xx/connection/protocol and the per-call deadline ->
   `infra_error:engine`; an internal gateway error -> `infra_error:gateway`; a client's malformed
   request or disconnect -> nothing), or the gateway marking the rollout `infra_tainted` — even when
   the harness then timed out: a hung engine is not the agent's fault;
3. the wall-clock budget ran out -> `timeout`;
4. the harness exited non-zero -> `agent_failed` (still verified and scored: it is data; a breached
   sandbox limit such as an OOM kill lands here too);
5. otherwise `ok` (the verifier's reward, whatever it is).
A harness killed by a signal from outside the sandbox never gets here: the exec boundary in
`rollout.py` raises it as `infra_error:sandbox` (1.).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from openforgerl.records import CallRecord, RolloutStatus
from openforgerl.sandbox.base import ExecResult

__all__ = ["call_log_taint", "harness_status"]


def call_log_taint(calls: Sequence[CallRecord], rollout: Mapping[str, Any] | None = None
                   ) -> RolloutStatus | None:
    """The infra status the call log implies, or None when every call was clean."""
    for call in calls:
        if call.error is not None and call.error.kind.rollout_status is not None:
            return call.error.kind.rollout_status
    if rollout and rollout.get("infra_tainted"):
        status = rollout.get("status")
        if isinstance(status, str) and status.startswith("infra_error:"):
            return RolloutStatus(status)
        return RolloutStatus.INFRA_GATEWAY
    return None


def harness_status(result: ExecResult) -> RolloutStatus:
    """timeout / agent_failed / ok from the harness process alone."""
    if result.timed_out:
        return RolloutStatus.TIMEOUT
    return RolloutStatus.OK if result.returncode == 0 else RolloutStatus.AGENT_FAILED
