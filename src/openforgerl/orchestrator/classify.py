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

from openforgerl.records import CallErrorKind, CallRecord, RolloutStatus
from openforgerl.sandbox.base import ExecResult

__all__ = ["call_log_taint", "harness_status"]


def call_log_taint(calls: Sequence[CallRecord], rollout: Mapping[str, Any] | None = None
                   ) -> RolloutStatus | None:
    """The infra (or config) status the call log implies, or None when every call was clean.

    A context overflow is a configuration error only before the model has answered anything in this
    rollout (the harness's own prompt cannot fit the model). After that the prompt grew by what the
    agent did, and the agent can also send an oversized request itself with the key it holds: counting
    that as `config_error:context` would let a policy turn a failing rollout into an excluded one instead
    of a 0. It is then the agent's doing, and the rollout is judged as usual."""
    answered = False
    for call in sorted(calls, key=lambda c: c.index):
        kind = call.error.kind if call.error is not None else None
        if kind is CallErrorKind.CONTEXT_OVERFLOW and answered:
            continue
        if kind is not None and kind.rollout_status is not None:
            return kind.rollout_status
        answered = answered or (call.error is None and not call.side_call)
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
