"""Named scenarios: each break cause, exclusions, drops, rewards/weights, metrics aggregation."""

from __future__ import annotations

import random

import pytest
from trajectory_sim import Simulator, check_invariants

from openforgerl.records import CallError, CallErrorKind, RolloutRecord, RolloutStatus
from openforgerl.trajectory import aggregate_by_harness, reconstruct_samples


def _rollout(**kw: object) -> RolloutRecord:
    base: dict[str, object] = dict(
        rollout_id="r0",
        harness="h",
        task_id="t",
        group_id="g",
        status=RolloutStatus.OK,
        reward=0.5,
        in_batch=True,
        group_valid=True,
    )
    return RolloutRecord(**{**base, **kw})


@pytest.fixture
def sim() -> Simulator:
    return Simulator(random.Random(7))


def _turns(sim: Simulator, agent, n: int, **kw: object) -> None:
    for _ in range(n):
        sim.answer(agent, sim.call(agent), **kw)


def test_append_only_rollout_is_one_chain_with_reward(sim: Simulator) -> None:
    main = sim.new_agent(None)
    _turns(sim, main, 5)
    res = reconstruct_samples(sim.calls, _rollout())
    check_invariants(sim.calls, res.samples)
    (s,) = res.samples
    assert (s.is_final_chain, s.weight, s.reward_score, s.num_turns) == (True, 1.0, 0.5, 5)
    assert s.prompt_ids == sim.calls[0].prompt_token_ids
    assert res.metrics.merge_rate == 1.0 and res.metrics.break_causes == {}


def test_compaction_starts_a_new_chain_and_is_named(sim: Simulator) -> None:
    main = sim.new_agent(None)
    _turns(sim, main, 6)
    sim.compact(main)
    _turns(sim, main, 2)
    res = reconstruct_samples(sim.calls, _rollout())
    check_invariants(sim.calls, res.samples)
    assert res.metrics.break_causes == {"compaction": 1}
    assert [s.extra_fields["call_indices"] for s in res.samples] == [[0, 1, 2, 3, 4, 5], [6, 7]]
    assert [s.weight for s in res.samples] == [0.5, 0.5]
    assert [s.reward_score for s in res.samples] == [0.5, 0.5], "every chain shares the rollout reward"


def test_reserialized_model_output_is_a_sampled_mismatch(sim: Simulator) -> None:
    main = sim.new_agent(None)
    sim.answer(main, sim.call(main), reserialize=True)
    _turns(sim, main, 1)
    res = reconstruct_samples(sim.calls, _rollout())
    assert res.metrics.break_causes == {"prefix_mismatch:sampled": 1}


def test_openclaw_style_moved_context_message_breaks_every_call(sim: Simulator) -> None:
    main = sim.new_agent(None)
    for _ in range(4):
        main.ephemeral = sim.content()
        sim.answer(main, sim.call(main))
    res = reconstruct_samples(sim.calls, _rollout())
    check_invariants(sim.calls, res.samples)
    assert res.metrics.break_causes == {"prefix_mismatch:context": 3}
    assert res.metrics.merge_rate == 0.0


def test_sub_agent_gets_its_own_chain_and_main_chain_is_last(sim: Simulator) -> None:
    main, sub = sim.new_agent("main"), sim.new_agent("sub", parent="main")
    sim.answer(main, sim.call(main))
    _turns(sim, sub, 3)
    sim.answer(main, sim.call(main))
    res = reconstruct_samples(sim.calls, _rollout())
    check_invariants(sim.calls, res.samples)
    assert [s.agent_id for s in res.samples] == ["sub", "main"]
    assert res.samples[-1].is_final_chain and res.metrics.break_causes == {"sub_agent": 1}
    assert res.metrics.chains == res.metrics.agents == 2 and res.metrics.merge_rate == 1.0


def test_side_calls_and_errors_are_excluded_and_counted(sim: Simulator) -> None:
    main = sim.new_agent(None)
    sim.answer(main, sim.call(main))
    sim.call(main, side=True)
    sim.call(main, error=True)  # client went away; the harness retries
    _turns(sim, main, 2)
    res = reconstruct_samples(sim.calls, _rollout())
    check_invariants(sim.calls, res.samples)
    assert res.metrics.excluded == {"side_call": 1, "error": 1}
    assert res.metrics.chains == 1


def test_unflagged_title_call_is_new_context_and_main_chain_still_merges(sim: Simulator) -> None:
    main = sim.new_agent(None)
    sim.answer(main, sim.call(main))
    sim.call(main, prompt=sim.prompt(sim.new_agent(None)))
    _turns(sim, main, 2)
    res = reconstruct_samples(sim.calls, _rollout())
    check_invariants(sim.calls, res.samples)
    assert res.metrics.break_causes == {"new_context": 1}
    assert res.samples[-1].extra_fields["call_indices"] == [0, 2, 3], "older chain continued"


def test_parallel_calls_with_the_same_prompt_are_both_trained_once(sim: Simulator) -> None:
    main = sim.new_agent(None)
    sim.call(main)
    sim.call(main)
    res = reconstruct_samples(sim.calls, _rollout())
    check_invariants(sim.calls, res.samples)
    assert len(res.samples) == 2 and res.metrics.break_causes == {"rewind": 1}


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        ({"infra_tainted": True}, "infra:tainted"),
        ({"status": RolloutStatus.INFRA_SANDBOX}, "infra:infra_error:sandbox"),
        ({"in_batch": False, "drop_reason": "timeout"}, "not_in_batch:timeout"),
        ({"in_batch": None}, "not_in_batch:undecided"),
        ({"group_valid": False}, "group_invalid:undecided"),
        ({"status": RolloutStatus.TIMEOUT, "reward": None}, "no_reward"),
        ({"status": None}, "unfinished"),
    ],
)
def test_untrainable_rollouts_produce_no_samples(sim: Simulator, kw: dict, reason: str) -> None:
    _turns(sim, sim.new_agent(None), 2)
    res = reconstruct_samples(sim.calls, _rollout(**kw))
    assert res.samples == () and res.dropped_reason == reason == res.metrics.dropped_reason


def test_an_infra_error_call_drops_the_rollout(sim: Simulator) -> None:
    main = sim.new_agent(None)
    _turns(sim, main, 2)
    bad = sim.call(main)
    bad.error = CallError(kind=CallErrorKind.ENGINE_HTTP, message="502", status=502)
    res = reconstruct_samples(sim.calls, _rollout())
    assert res.samples == () and res.dropped_reason == "infra:call_error:engine_http (call 2)"


def test_agent_failure_and_timeout_are_trained_with_their_status(sim: Simulator) -> None:
    _turns(sim, sim.new_agent(None), 2)
    res = reconstruct_samples(sim.calls, _rollout(status=RolloutStatus.TIMEOUT, reward=0.0))
    assert [(s.status, s.reward_score) for s in res.samples] == [("timeout", 0.0)]


def test_policy_versions_are_carried_per_chain(sim: Simulator) -> None:
    main = sim.new_agent(None)
    for v in (3, 4, 4):
        sim.answer(main, sim.call(main, version=v))
    (s,) = reconstruct_samples(sim.calls, _rollout()).samples
    assert (s.policy_version_min, s.policy_version_max) == (3, 4)


def test_metrics_aggregate_per_harness(sim: Simulator) -> None:
    main = sim.new_agent(None)
    _turns(sim, main, 6)
    sim.compact(main)
    _turns(sim, main, 1)
    ok = reconstruct_samples(sim.calls, _rollout()).metrics
    dropped = reconstruct_samples(sim.calls, _rollout(rollout_id="r1", infra_tainted=True)).metrics
    other = reconstruct_samples(sim.calls, _rollout(rollout_id="r2", harness="codex")).metrics
    agg = aggregate_by_harness([ok, dropped, other])
    h = agg["h"].as_dict()
    assert (h["rollouts"], h["dropped_rollouts"], h["chains"], h["merged_calls"]) == (2, 1, 2, 5)
    assert h["merge_rate"] == pytest.approx(5 / 6) and h["break_causes"] == {"compaction": 1}
    assert h["drop_reasons"] == {"infra:tainted": 1} and agg["codex"].rollouts == 1
    assert h["tokens_trained"] == sum(len(c.completion_token_ids) for c in sim.calls)
