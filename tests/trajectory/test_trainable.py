"""The one trainability rule (`trajectory.trainable`) and the one error-kind -> status table."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openforgerl.records import (
    CallError,
    CallErrorKind,
    CallRecord,
    RolloutRecord,
    RolloutStatus,
    WireProtocol,
)
from openforgerl.trajectory import TRAINABLE_STATUSES, infra_reason, trainable, untrainable_reason

KEPT = dict(status=RolloutStatus.OK, reward=1.0, in_batch=True, group_valid=True)


def _rec(**kw: object) -> RolloutRecord:
    return RolloutRecord(rollout_id="r", **{**KEPT, **kw})


def _call(kind: CallErrorKind | None, index: int = 0) -> CallRecord:
    err = None if kind is None else CallError(kind=kind, message="m")
    return CallRecord(rollout_id="r", index=index, protocol=WireProtocol.CHAT, error=err)


@pytest.mark.parametrize(
    ("kind", "status"),
    [
        (CallErrorKind.ENGINE_HTTP, RolloutStatus.INFRA_ENGINE),
        (CallErrorKind.ENGINE_CONNECTION, RolloutStatus.INFRA_ENGINE),
        (CallErrorKind.ENGINE_DEADLINE, RolloutStatus.INFRA_ENGINE),
        (CallErrorKind.ENGINE_PROTOCOL, RolloutStatus.INFRA_ENGINE),
        (CallErrorKind.GATEWAY_INTERNAL, RolloutStatus.INFRA_GATEWAY),
        (CallErrorKind.CLIENT_DISCONNECTED, None),
        (CallErrorKind.CLIENT_BAD_REQUEST, None),
        (CallErrorKind.CONTEXT_OVERFLOW, RolloutStatus.CONFIG_CONTEXT),
    ],
)
def test_one_error_kind_to_status_table(kind: CallErrorKind, status: RolloutStatus | None) -> None:
    assert kind.rollout_status is status
    assert kind.is_infra is (status is not None and status.is_infra)


def test_the_table_covers_every_kind_with_an_infra_or_config_status_a_timeout_or_none() -> None:
    for kind in CallErrorKind:
        status = kind.rollout_status
        assert status is None or status.is_infra or status.is_config or status is RolloutStatus.TIMEOUT
    # a call cut at its rollout's deadline is the rollout's timeout, never infra (orchestrator/classify.py)
    assert CallErrorKind.ROLLOUT_DEADLINE.rollout_status is RolloutStatus.TIMEOUT
    assert not CallErrorKind.ROLLOUT_DEADLINE.is_infra and not CallErrorKind.CALL_LIMIT.is_infra


def test_a_kept_rollout_in_a_valid_group_with_a_reward_is_trained() -> None:
    assert trainable(_rec()) and trainable(_rec(status=RolloutStatus.AGENT_FAILED, reward=0.0))
    assert trainable(_rec(status=RolloutStatus.TIMEOUT, reward=0.0)), "timeout kept under policy 'zero'"


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        ({"status": RolloutStatus.INFRA_ENGINE}, "infra:infra_error:engine"),
        ({"infra_tainted": True}, "infra:tainted"),
        ({"status": None}, "unfinished"),
        ({"in_batch": None}, "not_in_batch:undecided"),
        ({"in_batch": False, "drop_reason": "timeout"}, "not_in_batch:timeout"),
        (
            {"group_valid": False, "drop_reason": "group_below_min_size(1<2)"},
            "group_invalid:group_below_min_size(1<2)",
        ),
        ({"group_valid": None}, "group_invalid:undecided"),
        ({"reward": None}, "no_reward"),
        ({"status": RolloutStatus.TIMEOUT, "reward": None}, "no_reward"),
    ],
)
def test_each_rule_names_its_reason(kw: dict, reason: str) -> None:
    assert untrainable_reason(_rec(**kw)) == reason
    assert not trainable(_rec(**kw))


def test_a_timeout_after_an_engine_fault_is_infra_not_the_agents() -> None:
    rec = _rec(status=RolloutStatus.TIMEOUT, reward=0.0)
    calls = [_call(None, 0), _call(CallErrorKind.ENGINE_DEADLINE, 1)]
    assert untrainable_reason(rec, calls) == "infra:call_error:engine_deadline (call 1)"
    assert infra_reason(rec, [_call(CallErrorKind.CLIENT_BAD_REQUEST)]) is None, (
        "a bad request is never infra"
    )


@given(
    status=st.sampled_from([None, *RolloutStatus]),
    reward=st.one_of(st.none(), st.floats(-1, 1, allow_nan=False)),
    in_batch=st.sampled_from([None, False, True]),
    group_valid=st.sampled_from([None, False, True]),
    tainted=st.booleans(),
    kinds=st.lists(st.sampled_from([None, *CallErrorKind]), max_size=4),
)
def test_trainable_is_exactly_the_conjunction(
    status: RolloutStatus | None,
    reward: float | None,
    in_batch: bool | None,
    group_valid: bool | None,
    tainted: bool,
    kinds: list[CallErrorKind | None],
) -> None:
    rec = RolloutRecord(
        rollout_id="r",
        status=status,
        reward=reward,
        in_batch=in_batch,
        group_valid=group_valid,
        infra_tainted=tainted,
    )
    calls = [_call(k, i) for i, k in enumerate(kinds)]
    infra = (
        tainted
        or (status is not None and status.is_infra)
        or any(k is not None and k.is_infra for k in kinds)
    )
    expected = (
        not infra
        and status in TRAINABLE_STATUSES
        and in_batch is True
        and group_valid is True
        and reward is not None
    )
    assert trainable(rec, calls) is expected
    reason = untrainable_reason(rec, calls)
    assert (reason is None) is expected
    assert (reason or "").startswith("infra:") is infra, "infra wins over every other reason"
