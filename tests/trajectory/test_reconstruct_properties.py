"""Property tests: random conversations with drift, sub-agents, compaction, side calls, errors."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st
from trajectory_sim import Agent, Simulator, check_invariants, trainable

from openforgerl.records import RolloutRecord, RolloutStatus
from openforgerl.trajectory import OverflowPolicy, ReconstructionOptions, reconstruct_samples

DRIFT = [
    "call",
    "call",
    "call",
    "reserialize",
    "rewrite",
    "ephemeral",
    "compact",
    "subagent",
    "side",
    "error",
    "bump",
    "title",
]
APPEND_ONLY = ["call", "call", "subagent", "side", "error"]


def _rollout(reward: float = 1.0) -> RolloutRecord:
    return RolloutRecord(
        rollout_id="r0",
        task_id="t",
        harness="sim",
        group_id="g",
        status=RolloutStatus.OK,
        reward=reward,
        in_batch=True,
        group_valid=True,
    )


def _simulate(data: st.DataObject, actions: list[str]) -> Simulator:
    sim = Simulator(random.Random(data.draw(st.integers(0, 2**32), label="seed")))
    main = sim.new_agent(data.draw(st.sampled_from([None, "thread-main"]), label="main id"))
    agents, version = [main], 0
    for action in data.draw(st.lists(st.sampled_from(actions), min_size=1, max_size=25), label="actions"):
        agent = data.draw(st.sampled_from(agents), label="agent")
        version += action == "bump"
        _apply(sim, agents, agent, action, version, main)
    return sim


def _apply(sim: Simulator, agents: list[Agent], agent: Agent, action: str, version: int, main: Agent) -> None:
    if action in ("call", "reserialize"):
        sim.answer(agent, sim.call(agent, version=version), reserialize=action == "reserialize")
    elif action == "rewrite":
        sim.rewrite_old_message(agent)
    elif action == "ephemeral":
        agent.ephemeral = sim.content()
    elif action == "compact":
        sim.compact(agent)
    elif action == "subagent":
        agents.append(sim.new_agent(f"sub{len(agents)}", parent=main.agent_id or "root"))
    elif action == "title":
        sim.call(agent, version=version, prompt=sim.prompt(sim.new_agent(None)))
    elif action in ("side", "error"):
        sim.call(agent, side=action == "side", error=action == "error", version=version)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_every_sampled_token_trained_once_under_drift(data: st.DataObject) -> None:
    sim = _simulate(data, DRIFT)
    result = reconstruct_samples(sim.calls, _rollout())
    check_invariants(sim.calls, result.samples)
    m = result.metrics
    n_trainable = sum(trainable(c) for c in sim.calls)
    assert m.trainable_calls == n_trainable
    assert sum(m.excluded.values()) == len(sim.calls) - n_trainable
    assert (
        m.tokens_trained
        == m.tokens_sampled
        == sum(len(c.completion_token_ids) for c in sim.calls if trainable(c))
    )
    assert m.chains == len(result.samples) == m.trainable_calls - m.merged_calls
    assert sum(m.break_causes.values()) == m.chains - (1 if result.samples else 0)
    if result.samples:
        _check_rollout_fields(result.samples)


def _check_rollout_fields(samples: tuple) -> None:
    assert [s.is_final_chain for s in samples] == [False] * (len(samples) - 1) + [True]
    assert math.isclose(sum(s.weight for s in samples), 1.0)
    assert {(s.rollout_id, s.group_id, s.reward_score, s.harness, s.task_id, s.status) for s in samples} == {
        ("r0", "g", 1.0, "sim", "t", "ok")
    }
    assert all(s.policy_version_min <= s.policy_version_max for s in samples)
    assert len({s.chain_index for s in samples}) == len(samples)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_append_only_histories_merge_fully(data: st.DataObject) -> None:
    sim = _simulate(data, APPEND_ONLY)
    result = reconstruct_samples(sim.calls, _rollout())
    check_invariants(sim.calls, result.samples)
    m = result.metrics
    assert m.chains == m.agents, "one chain per agent when histories are append-only"
    assert set(m.break_causes) <= {"sub_agent"}
    assert m.merge_rate in (None, 1.0)
    top = [c.agent_id for c in sim.calls if trainable(c) and c.parent_agent_id is None]
    if top:
        assert result.samples[-1].agent_id == top[0], "the main agent's chain is last"


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_call_order_in_input_does_not_matter(data: st.DataObject) -> None:
    sim = _simulate(data, DRIFT)
    shuffled = list(sim.calls)
    random.Random(data.draw(st.integers(0, 1000))).shuffle(shuffled)
    a = reconstruct_samples(sim.calls, _rollout())
    b = reconstruct_samples(shuffled, _rollout())
    assert [s.model_dump() for s in a.samples] == [s.model_dump() for s in b.samples]


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from(list(OverflowPolicy)), st.integers(4, 80), st.integers(8, 120))
def test_overflow_is_counted_never_silent(
    data: st.DataObject, policy: OverflowPolicy, max_prompt: int, max_response: int
) -> None:
    sim = _simulate(data, DRIFT)
    opts = ReconstructionOptions(max_prompt_len=max_prompt, max_response_len=max_response, overflow=policy)
    m = reconstruct_samples(sim.calls, _rollout(), options=opts)
    for s in m.samples:
        assert len(s.prompt_ids) <= max_prompt and len(s.response_ids) <= max_response
    met = m.metrics
    assert (
        met.tokens_trained + met.sampled_tokens_truncated + met.sampled_tokens_dropped == met.tokens_sampled
    )
    if policy is OverflowPolicy.DROP:
        assert met.sampled_tokens_truncated == met.prompt_tokens_truncated == 0
    else:
        assert met.sampled_tokens_dropped == 0 and met.chains_dropped == 0
    if policy is OverflowPolicy.SPLIT:
        unsplittable = [c for c in sim.calls if trainable(c) and len(c.completion_token_ids) > max_response]
        assert met.sampled_tokens_truncated == 0 or unsplittable
