"""A prompt longer than the engine's context is a configuration error: `config_error:context`, never
trained, never retried, counted as `config` by eval — not the model's failure, not infra."""

from __future__ import annotations

from openforgerl.engines.base import EngineError
from openforgerl.eval.metrics import CONFIG, Trial
from openforgerl.orchestrator.classify import call_log_taint
from openforgerl.orchestrator.config import OrchestratorConfig
from openforgerl.orchestrator.groups import apply_group_policy
from openforgerl.records import (
    CallError,
    CallErrorKind,
    CallRecord,
    RolloutRecord,
    RolloutStatus,
    WireProtocol,
)
from openforgerl.trajectory.trainable import untrainable_reason

VLLM_400 = (
    "This model's maximum context length is 8192 tokens. However, your request has 20503 input "
    "tokens. Please reduce the length of the input messages."
)


def test_the_engines_context_400_is_a_context_overflow_not_a_bad_request() -> None:
    overflow = EngineError(CallErrorKind.ENGINE_HTTP, VLLM_400, status=400)
    other = EngineError(CallErrorKind.ENGINE_HTTP, "messages must be a non-empty list", status=400)
    assert overflow.is_context_overflow and not other.is_context_overflow
    assert not EngineError(CallErrorKind.ENGINE_HTTP, VLLM_400, status=503).is_context_overflow


def test_the_status_table_and_its_readers() -> None:
    kind = CallErrorKind.CONTEXT_OVERFLOW
    assert kind.rollout_status is RolloutStatus.CONFIG_CONTEXT and not kind.is_infra
    assert RolloutStatus.CONFIG_CONTEXT.is_config and not RolloutStatus.CONFIG_CONTEXT.is_infra
    call = CallRecord(
        rollout_id="r",
        index=0,
        protocol=WireProtocol.ANTHROPIC,
        error=CallError(kind=kind, message=VLLM_400, status=400),
    )
    assert call_log_taint([call]) is RolloutStatus.CONFIG_CONTEXT
    record = RolloutRecord(rollout_id="r", status=RolloutStatus.CONFIG_CONTEXT, reward=0.0)
    [judged], valid = apply_group_policy([record], OrchestratorConfig(group_size=1, min_group_size=1))
    assert judged.in_batch is False and judged.drop_reason == "config_error:context" and not valid
    assert untrainable_reason(judged) is not None
    assert Trial("t", "claude_code", None, False, (), "config_error:context").kind == CONFIG


def _call(index: int, kind: CallErrorKind | None = None, side: bool = False) -> CallRecord:
    error = CallError(kind=kind, message=VLLM_400 if kind else "", status=400) if kind else None
    return CallRecord(rollout_id="r", index=index, protocol=WireProtocol.CHAT, error=error, side_call=side)


def test_an_overflow_after_the_model_answered_is_the_agents_doing_not_a_config_error() -> None:
    """The agent holds the key: an oversized request it sends itself (or a history it grew) must not turn
    its rollout into an excluded one instead of a 0."""
    overflow = CallErrorKind.CONTEXT_OVERFLOW
    assert call_log_taint([_call(0), _call(1, overflow)]) is None
    assert call_log_taint([_call(1, overflow), _call(0)]) is None  # by index, not arrival order
    # a side call (title) answering first is not the model acting on the task
    assert call_log_taint([_call(0, side=True), _call(1, overflow)]) is RolloutStatus.CONFIG_CONTEXT
    # an engine fault after the answer still counts as infra
    assert (
        call_log_taint([_call(0), _call(1, overflow), _call(2, CallErrorKind.ENGINE_DEADLINE)])
        is RolloutStatus.INFRA_ENGINE
    )


def test_the_first_prompts_overflow_decides_whatever_follows_it() -> None:
    """A harness that loops (overflow -> summary -> overflow) until a call is cut at the deadline, or
    that meets an engine fault later, is still the same setup error: never infra, never retried."""
    overflow = CallErrorKind.CONTEXT_OVERFLOW
    loop = [_call(0, overflow), _call(1), _call(2, overflow), _call(3, CallErrorKind.ROLLOUT_DEADLINE)]
    assert call_log_taint(loop) is RolloutStatus.CONFIG_CONTEXT
    assert call_log_taint([*loop[:3], _call(3, CallErrorKind.ENGINE_HTTP)]) is RolloutStatus.CONFIG_CONTEXT
    assert (
        call_log_taint(loop, {"infra_tainted": True, "status": "infra_error:engine"})
        is RolloutStatus.CONFIG_CONTEXT
    )
    # control: the same loop after the model answered first is the agent's own timeout, not config or infra
    answered = [_call(0), *[c.model_copy(update={"index": c.index + 1}) for c in loop]]
    assert call_log_taint(answered) is RolloutStatus.TIMEOUT
