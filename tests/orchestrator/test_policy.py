"""Pure parts: the fault boundary, call-log classification and the group policy."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from openforgerl.orchestrator.classify import call_log_taint, harness_status, rollout_status
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.orchestrator.errors import (
    GatewayFault,
    HarnessStartFault,
    SandboxFault,
    VerifierFault,
    boundary,
)
from openforgerl.orchestrator.groups import apply_group_policy, gather_joined
from openforgerl.records import (
    CallError,
    CallErrorKind,
    CallRecord,
    RolloutRecord,
    RolloutStatus,
    WireProtocol,
)
from openforgerl.sandbox.base import CommandNotFoundError, ExecResult, SandboxError


def test_boundary_retypes_once_by_type() -> None:
    with pytest.raises(SandboxFault) as info:
        with boundary(SandboxFault, {CommandNotFoundError: HarnessStartFault}):
            raise SandboxError("lost")
    assert info.value.status is RolloutStatus.INFRA_SANDBOX
    with pytest.raises(HarnessStartFault):
        with boundary(SandboxFault, {CommandNotFoundError: HarnessStartFault}):
            raise CommandNotFoundError("codex")
    with pytest.raises(VerifierFault):  # an already-typed fault passes through outer boundaries
        with boundary(GatewayFault):
            with boundary(VerifierFault):
                raise KeyError("x")


def _call(kind: CallErrorKind | None) -> CallRecord:
    err = CallError(kind=kind, message="m") if kind else None
    return CallRecord(rollout_id="r", index=0, protocol=WireProtocol.CHAT, error=err)


@pytest.mark.parametrize(
    ("kind", "status"),
    [
        (None, None),
        (CallErrorKind.CLIENT_DISCONNECTED, None),
        (CallErrorKind.CLIENT_BAD_REQUEST, None),
        (CallErrorKind.ENGINE_HTTP, RolloutStatus.INFRA_ENGINE),
        (CallErrorKind.ENGINE_CONNECTION, RolloutStatus.INFRA_ENGINE),
        (CallErrorKind.ENGINE_PROTOCOL, RolloutStatus.INFRA_ENGINE),
        (CallErrorKind.ENGINE_DEADLINE, RolloutStatus.INFRA_ENGINE),
        (CallErrorKind.GATEWAY_INTERNAL, RolloutStatus.INFRA_GATEWAY),
    ],
)
def test_call_log_taint(kind: CallErrorKind | None, status: RolloutStatus | None) -> None:
    assert call_log_taint([_call(None), _call(kind)]) == status


def test_gateway_taint_flag_without_call_error() -> None:
    assert (
        call_log_taint([], {"infra_tainted": True, "status": "infra_error:engine"})
        is RolloutStatus.INFRA_ENGINE
    )
    assert call_log_taint([], {"infra_tainted": True}) is RolloutStatus.INFRA_GATEWAY
    assert call_log_taint([], {"infra_tainted": False}) is None


def test_harness_status() -> None:
    assert harness_status(ExecResult(0, b"", b"")) is RolloutStatus.OK
    assert harness_status(ExecResult(1, b"", b"")) is RolloutStatus.AGENT_FAILED
    assert harness_status(ExecResult(-9, b"", b"", timed_out=True)) is RolloutStatus.TIMEOUT


def _rec(i: int, status: RolloutStatus, reward: float | None = None) -> RolloutRecord:
    return RolloutRecord(rollout_id=f"r{i}", status=status, reward=reward, sample_index=i)


def test_group_policy_drop_and_zero() -> None:
    recs = [
        _rec(0, RolloutStatus.OK, 1.0),
        _rec(1, RolloutStatus.AGENT_FAILED, 0.0),
        _rec(2, RolloutStatus.TIMEOUT),
        _rec(3, RolloutStatus.INFRA_ENGINE),
    ]
    out, valid = apply_group_policy(recs, OrchestratorConfig(group_size=4, min_group_size=2))
    assert valid and all(r.group_valid for r in out)
    assert [r.in_batch for r in out] == [True, True, False, False]
    assert [r.drop_reason for r in out] == [None, None, "timeout", "infra"]
    out, valid = apply_group_policy(
        recs, OrchestratorConfig(group_size=4, min_group_size=3, timeout_policy="zero")
    )
    assert valid and out[2].in_batch and out[2].reward == 0.0
    assert not out[3].in_batch


def test_group_below_min_size_dropped_whole() -> None:
    recs = [
        _rec(0, RolloutStatus.OK, 1.0),
        _rec(1, RolloutStatus.INFRA_SANDBOX),
        _rec(2, RolloutStatus.TIMEOUT),
    ]
    out, valid = apply_group_policy(recs, OrchestratorConfig(group_size=3, min_group_size=2))
    assert not valid and not any(r.group_valid for r in out)
    assert not any(r.in_batch for r in out)
    assert out[0].drop_reason.startswith("group_below_min_size")
    assert out[1].drop_reason == "infra"


def test_relative_tools_dir_is_resolved_against_the_callers_directory(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # The sandbox runs elsewhere: `--tools-dir .tools` must name the caller's folder, not the sandbox's.
    monkeypatch.chdir(tmp_path)
    config = OrchestratorConfig(harness_cache=Path(".tools"))
    assert config.harness_cache == tmp_path / ".tools"


def test_rollout_status_weighs_the_call_log_then_the_harness() -> None:
    """classify.rollout_status: the one decision (see its module docstring for the rule)."""
    exited = ExecResult(1, b"", b"boom")
    assert (
        rollout_status(exited, [])[0] is RolloutStatus.INFRA_HARNESS_START
    )  # no call: the model decided nothing
    assert rollout_status(ExecResult(0, b"", b""), [])[0] is RolloutStatus.INFRA_HARNESS_START
    assert rollout_status(ExecResult(-9, b"", b"", timed_out=True), [])[0] is RolloutStatus.TIMEOUT
    assert rollout_status(exited, [_call(None)]) == (RolloutStatus.AGENT_FAILED, "")  # control: it asked
    cut = [_call(None), _call(CallErrorKind.ROLLOUT_DEADLINE).model_copy(update={"index": 1})]
    assert rollout_status(exited, cut)[0] is RolloutStatus.TIMEOUT  # cut at the deadline: a timeout
    limit = [_call(None), _call(CallErrorKind.CALL_LIMIT).model_copy(update={"index": 1})]
    assert rollout_status(exited, limit)[0] is RolloutStatus.AGENT_FAILED  # a long answer: its own
    hung = [_call(None), _call(CallErrorKind.ENGINE_DEADLINE).model_copy(update={"index": 1})]
    assert rollout_status(ExecResult(-9, b"", b"", timed_out=True), hung)[0] is RolloutStatus.INFRA_ENGINE
    assert rollout_status(exited, [_call(None)], tools_missed=True)[0] is RolloutStatus.INFRA_HARNESS_START


@pytest.mark.parametrize("joined", [True, False])
async def test_a_cancelled_group_waits_for_every_rollout_to_tear_down(joined: bool) -> None:
    """Ctrl-C or SIGTERM cancels a batch while its rollouts run: each rollout's teardown (sandbox, then its
    gateway rollout) ends before the batch goes on to close the gateway client under it.
    Control (`joined=False`): plain `asyncio.gather` re-raises at the first cancelled rollout while the
    others still tear down."""
    torn_down: list[int] = []

    async def rollout(index: int, teardown_s: float) -> int:
        try:
            await asyncio.sleep(1000)
        finally:
            await asyncio.sleep(teardown_s)
            torn_down.append(index)
        return index

    coros = [rollout(0, 0.0), rollout(1, 0.2), rollout(2, 0.4)]
    gathered = gather_joined(coros) if joined else asyncio.gather(*coros)
    batch = asyncio.ensure_future(gathered)
    await asyncio.sleep(0.05)
    batch.cancel()
    with pytest.raises(asyncio.CancelledError):
        await batch
    assert sorted(torn_down) == ([0, 1, 2] if joined else [0])
    await asyncio.sleep(0.5)
    assert sorted(torn_down) == [0, 1, 2]


async def test_a_failed_rollout_report_stops_the_other_reports_before_it_raises() -> None:
    started, finished = [], []

    async def report(index: int) -> int:
        started.append(index)
        if index == 0:
            raise RuntimeError("gateway answered 400")
        await asyncio.sleep(1000)
        finished.append(index)
        return index

    with pytest.raises(RuntimeError, match="400"):
        await gather_joined(report(i) for i in range(3))
    assert started == [0, 1, 2] and finished == []
    assert [t for t in asyncio.all_tasks() if t.get_coro().__name__ == "report"] == []
