"""Pure classification of a rollout's outcome from what the harness and the call log showed.

Precedence (first match wins):
1. an infra fault raised at a boundary (sandbox, gateway admin, harness start, verifier) — decided
   by the fault's type in `rollout.py`;
2. an infra error recorded on any call in the call log (engine 5xx/connection/protocol ->
   `infra_error:engine`; the gateway's own upstream deadline or an internal error ->
   `infra_error:gateway`), or the gateway marking the rollout `infra_tainted` — even when the harness
   then timed out: a hung engine is not the agent's fault;
3. the wall-clock budget ran out -> `timeout`;
4. the harness exited non-zero -> `agent_failed` (still verified and scored: it is data);
5. otherwise `ok` (the verifier's reward, whatever it is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from openforgerl.records import CallErrorKind, CallRecord, RolloutStatus
from openforgerl.sandbox.base import ExecResult

__all__ = ["call_log_taint", "harness_status"]

_TAINT: Mapping[CallErrorKind, RolloutStatus] = {
    CallErrorKind.ENGINE_HTTP: RolloutStatus.INFRA_ENGINE,
    CallErrorKind.ENGINE_CONNECTION: RolloutStatus.INFRA_ENGINE,
    CallErrorKind.ENGINE_PROTOCOL: RolloutStatus.INFRA_ENGINE,
    CallErrorKind.ENGINE_DEADLINE: RolloutStatus.INFRA_GATEWAY,
    CallErrorKind.GATEWAY_INTERNAL: RolloutStatus.INFRA_GATEWAY,
}


def call_log_taint(calls: Sequence[CallRecord], rollout: Mapping[str, Any] | None = None
                   ) -> RolloutStatus | None:
    """The infra status the call log implies, or None when every call was clean."""
    for call in calls:
        if call.error is not None and call.error.kind in _TAINT:
            return _TAINT[call.error.kind]
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
