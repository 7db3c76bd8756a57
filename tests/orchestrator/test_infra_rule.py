"""The infra rule (orchestrator/classify.py) end to end: real gateway, real bubblewrap sandboxes, the
scripted engine as the only double. Infra needs evidence the agent cannot produce: a harness that ended
with no call in the gateway's log, an engine that failed its health probe. What follows from what the
agent sent (a long answer, a huge max_tokens, a prompt it grew past the context) is its own outcome."""

from __future__ import annotations

import asyncio
from io import StringIO

import pytest
from orch_helpers import agent_harness, proof_task
from rich.console import Console

from openforgerl.engines.scripted import Faults, Turn, _Replay
from openforgerl.eval.metrics import count_tasks
from openforgerl.eval.runner import records_to_trials
from openforgerl.orchestrator.view import ProgressView
from openforgerl.records import CallErrorKind, RolloutStatus

LONG = "abracadabra " * 600  # ~1200 tokens: 60 s at the pace below, longer than every budget here


def long_policy(turn: Turn) -> str:
    return LONG


@pytest.mark.parametrize("mode", ["crash-before-call", "exit-0-before-call"])
async def test_a_harness_that_ends_before_its_first_model_call_is_infra_retried_with_its_output(
    make_env, mode
) -> None:
    """The gateway's call log has no call: the model decided nothing, so the exit is never its 0. The
    rollout is `infra_error:harness_start`, retried within the group's retry budget, out of the batch
    and out of eval's denominators, its output tails in the record. Control: a harness that asked the
    model and then failed is `agent_failed`, a scored 0 in the batch and in n."""
    env = await make_env()
    result = await env.run([proof_task()], agent_harness(mode), group_size=2, min_group_size=2, retries=2)
    (group,) = result.groups
    assert not group.valid and len(group.records) == 4, [str(r.status) for r in group.records]
    for rec in group.records:
        assert rec.status is RolloutStatus.INFRA_HARNESS_START, rec.metadata
        assert not rec.in_batch and rec.reward is None
        assert "before its first model call" in rec.metadata["error"]
        assert await env.store.list_calls(rec.rollout_id) == []
        if mode == "crash-before-call":
            assert "settings.json" in rec.metadata["harness_stderr_tail"]
            assert "starting agent" in rec.metadata["harness_stdout_tail"]
    assert {r.metadata["attempt"] for r in group.records} == {0, 1}  # each slot retried once
    (counts,) = count_tasks(records_to_trials(group.records))
    assert counts.n == 0 and counts.config == 4

    control = await make_env(policy=lambda t: "no idea")
    (rec,) = (await control.run([proof_task()], agent_harness("fail"))).records
    assert rec.status is RolloutStatus.AGENT_FAILED and rec.in_batch and rec.reward == 0.0
    (counts,) = count_tasks(records_to_trials([rec]))
    assert counts.n == 1 and counts.c == 0


@pytest.mark.parametrize("mode", ["ok", "huge-max-tokens", "parallel-long"])
async def test_an_answer_still_running_at_the_rollout_deadline_is_a_timeout_not_infra(make_env, mode) -> None:
    """The model writes a long answer (paced like a real engine; or the client asks max_tokens 100000):
    at the rollout's deadline - 2 s the call is cut as `rollout_deadline`, and the rollout is a
    `timeout` under the documented policy (dropped; kept as 0 under `zero`), never retried as infra.
    The non-streamed call sends no byte for the stall window, and the engine's passed health probe
    lets it go on. `parallel-long` is the same attack eight calls at once: none of them is infra."""
    env = await make_env(policy=long_policy, faults=Faults(token_delay_s=0.05))
    task = proof_task(budget_s=25.0)  # room for the harness's start on a loaded box (seen: 13 s)
    # Both policies' rollouts at once: each waits out its deadline, so one after the other took 47 s.
    result, zero_run = await asyncio.gather(
        env.run([task], agent_harness(mode), retries=2),
        env.run([task], agent_harness(mode), timeout_policy="zero"),
    )
    (rec,) = result.records  # no retry: not infra
    assert rec.status is RolloutStatus.TIMEOUT and not rec.infra_tainted, rec.metadata
    assert not rec.in_batch and rec.drop_reason == "timeout"
    calls = await env.store.list_calls(rec.rollout_id)
    assert len(calls) == (8 if mode == "parallel-long" else 1)
    assert all(c.error is not None and c.error.kind is CallErrorKind.ROLLOUT_DEADLINE for c in calls), calls
    stored = await env.store.get_rollout(rec.rollout_id)
    assert stored is not None and stored.status is RolloutStatus.TIMEOUT and not stored.infra_tainted
    (zero,) = zero_run.records
    assert zero.status is RolloutStatus.TIMEOUT and zero.in_batch and zero.reward == 0.0


async def test_a_hung_engine_at_the_same_deadline_is_infra(make_env) -> None:
    """Control of the test above: the engine sends nothing and fails its health probe (a wedged engine):
    the stall window (a quarter of the time left) cuts the call as `engine_deadline` before the
    rollout's deadline, and the rollout is `infra_error:engine`, out of the batch."""
    env = await make_env(faults=Faults(hang_before_headers=1))
    (rec,) = (await env.run([proof_task(budget_s=15.0)], agent_harness("ok"))).records
    assert rec.status is RolloutStatus.INFRA_ENGINE and not rec.in_batch, rec.metadata
    (call,) = await env.store.list_calls(rec.rollout_id)
    assert call.error is not None and call.error.kind is CallErrorKind.ENGINE_DEADLINE
    assert rec.deadline_at is not None and call.finished_at is not None
    assert call.finished_at < rec.deadline_at


def _why(records: list) -> list:
    return [
        (str(r.status), r.metadata.get("error"), r.metadata.get("harness_stderr_tail", "")[-400:])
        for r in records
    ]


def _summary_is_long(turn: Turn) -> str:
    text = str(turn.messages)
    return LONG if "Summarize" in text else "The magic word is abracadabra."


async def test_a_harness_looping_on_its_first_prompts_overflow_is_a_config_error(
    make_env, monkeypatch
) -> None:
    """opencode with SmolLM2: the first prompt overflows, a summary call, the prompt again... here the
    summary call is still being written at the rollout's deadline. The rollout is `config_error:context`
    whatever the harness did after the overflow (it ended `infra_error:engine` when the cut call was
    infra), and the `rollout` command's summary warns about the context."""
    monkeypatch.setattr(_Replay, "max_model_len", 400)
    env = await make_env(policy=_summary_is_long, faults=Faults(token_delay_s=0.05))
    result = await env.run([proof_task(budget_s=15.0)], agent_harness("overflow-loop"), retries=2)
    assert len(result.records) == 1, _why(result.records)  # never retried
    (rec,) = result.records
    assert rec.status is RolloutStatus.CONFIG_CONTEXT and not rec.in_batch, rec.metadata
    assert rec.drop_reason == "config_error:context"
    stored = await env.store.get_rollout(rec.rollout_id)
    assert stored is not None and stored.status is RolloutStatus.CONFIG_CONTEXT
    calls = await env.store.list_calls(rec.rollout_id)
    assert calls[0].error is not None and calls[0].error.kind is CallErrorKind.CONTEXT_OVERFLOW
    out = StringIO()
    ProgressView(1, Console(file=out, width=200)).print_summary(result)
    assert "longer than the engine's context" in out.getvalue()


async def test_an_overflow_after_the_model_answered_is_the_agents_own_never_config_or_infra(
    make_env, monkeypatch
) -> None:
    """Control of the test above, and the protection it keeps: once the model has answered, a prompt
    over the context is what the agent grew (or sent on purpose): not a config error, so the agent
    cannot choose to be excluded, and not infra either: the rollout is its own `timeout`."""
    monkeypatch.setattr(_Replay, "max_model_len", 400)
    env = await make_env(policy=_summary_is_long, faults=Faults(token_delay_s=0.05))
    result = await env.run([proof_task(budget_s=15.0)], agent_harness("answer-then-overflow-loop"), retries=2)
    assert len(result.records) == 1, _why(result.records)
    (rec,) = result.records
    assert rec.status is RolloutStatus.TIMEOUT and not rec.infra_tainted, rec.metadata
    kinds = [c.error.kind if c.error else None for c in await env.store.list_calls(rec.rollout_id)]
    assert kinds[0] is None and CallErrorKind.CONTEXT_OVERFLOW in kinds
    assert kinds[-1] is CallErrorKind.ROLLOUT_DEADLINE
