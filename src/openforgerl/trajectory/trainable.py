"""The one rule for "does this rollout become training data?" (pure; no I/O).

Export, the built-in trainer, the veRL agent loop and reconstruction all ask `untrainable_reason`;
eval asks `infra_reason` (an infra-faulted trial is not a trial). A rollout is trained only when
every one of these holds, checked in this order (the first failure is the reason):

1. **not infra** (`infra:...`): not tainted by the gateway, no `infra_error:*` status, and no call
   whose error kind maps to an infra status (`CallErrorKind.rollout_status`). Infra wins over
   everything else: a rollout that timed out *after* an engine fault is the engine's fault.
2. **finished** (`unfinished`): it has a status.
3. **a trainable status** (`status:...`): `ok` or `agent_failed` (the agent's own failure is data),
   or `timeout` — a genuine agent timeout (no infra fault anywhere) is the agent's failure, but it is
   trained only when the orchestrator kept it with reward 0 (`timeout_policy="zero"`); under the
   default `drop` policy it arrives with `in_batch=False` and stops at rule 4.
4. **in the batch** (`not_in_batch:...`): the orchestrator's verdict `in_batch` is True. A record
   the orchestrator never judged (None: opened outside any batch, e.g. forged from inside a
   sandbox, or the orchestrator died) is never trained.
5. **a valid group** (`group_invalid:...`): its GRPO group kept at least `min_group_size`.
6. **a reward** (`no_reward`): a sample never carries `reward_score: None`.
"""

from __future__ import annotations

from collections.abc import Sequence

from openforgerl.records import CallRecord, RolloutRecord, RolloutStatus

__all__ = ["TRAINABLE_STATUSES", "infra_reason", "trainable", "untrainable_reason"]

TRAINABLE_STATUSES = frozenset({RolloutStatus.OK, RolloutStatus.AGENT_FAILED, RolloutStatus.TIMEOUT})


def infra_reason(record: RolloutRecord, calls: Sequence[CallRecord] = ()) -> str | None:
    """Why this rollout is an infrastructure casualty (None: it is not)."""
    if record.status is not None and record.status.is_infra:
        return f"infra:{record.status.value}"
    if record.infra_tainted:
        return "infra:tainted"
    for call in calls:
        if call.error is not None and call.error.kind.is_infra:
            return f"infra:call_error:{call.error.kind.value} (call {call.index})"
    return None


def _verdict_reason(record: RolloutRecord) -> str | None:
    """Rules 2-6 on the record's typed verdict fields."""
    if record.status is None:
        return "unfinished"
    if record.status not in TRAINABLE_STATUSES:
        return f"status:{record.status.value}"
    if record.in_batch is not True:
        return f"not_in_batch:{record.drop_reason or 'undecided'}"
    if record.group_valid is not True:
        return f"group_invalid:{record.drop_reason or 'undecided'}"
    if record.reward is None:
        return "no_reward"
    return None


def untrainable_reason(record: RolloutRecord, calls: Sequence[CallRecord] = ()) -> str | None:
    """Why this rollout must not become samples (None: train it). See the module docstring."""
    return infra_reason(record, calls) or _verdict_reason(record)


def trainable(record: RolloutRecord, calls: Sequence[CallRecord] = ()) -> bool:
    """The rollout becomes samples (its calls, when given, are checked for infra errors too)."""
    return untrainable_reason(record, calls) is None
