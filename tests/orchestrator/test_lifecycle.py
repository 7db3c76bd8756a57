"""End-to-end rollouts: real gateway, real bwrap sandboxes, a real SDK client as the harness."""

from __future__ import annotations

import json
import os

from orch_helpers import agent_harness, procs_with, proof_task

from openforgerl.engines.scripted import Faults, Turn
from openforgerl.harness.generic import CommandHarness
from openforgerl.records import RolloutStatus
from openforgerl.trajectory import untrainable_reason


async def test_ok_group_records_calls_reward_and_results(make_env) -> None:
    env = await make_env()
    result = await env.run([proof_task()], agent_harness("ok"), group_size=2, min_group_size=2)
    (group,) = result.groups
    assert group.valid and len(group.kept) == 2
    for rec in group.records:
        assert rec.status is RolloutStatus.OK and rec.reward == 1.0, rec.metadata
        assert rec.reward_components == {"exists": 1.0, "match": 1.0}
        calls = await env.store.list_calls(rec.rollout_id)
        assert len(calls) == 1 and calls[0].completion_token_ids and calls[0].error is None
        stored = await env.store.get_rollout(rec.rollout_id)
        assert stored.status is RolloutStatus.OK and stored.reward == 1.0 and stored.closed
        assert stored.group_id == group.group_id
    lines = [json.loads(x) for x in env.results.read_text().splitlines()]
    assert sorted(x["sample_index"] for x in lines) == [0, 1]
    assert all(x["in_batch"] and x["group_valid"] for x in lines)
    assert [d for d in os.listdir(env.backend.root) if d != ".trash"] == []
    await env.backend.aclose()
    assert not (env.backend.root / ".trash").exists()


async def test_agent_failure_is_scored_not_dropped(make_env) -> None:
    env = await make_env(policy=lambda t: "no idea")
    result = await env.run([proof_task()], agent_harness("fail"))
    (rec,) = result.records
    assert rec.status is RolloutStatus.AGENT_FAILED
    assert rec.reward == 0.0 and rec.in_batch and rec.metadata["harness_returncode"] == 2


async def test_runaway_harness_killed_at_budget_with_children(make_env, monkeypatch) -> None:
    marker = f"ofrl-runaway-{os.getpid()}"
    env = await make_env()
    harness = agent_harness("runaway")
    harness.argv = ["env", f"RUNAWAY_MARKER={marker}", *harness.argv]
    task = proof_task(budget_s=3.0)
    result = await env.run([task], harness)
    (rec,) = result.records
    assert rec.status is RolloutStatus.TIMEOUT and rec.metadata["harness_timed_out"]
    assert not rec.in_batch and rec.drop_reason == "timeout"
    assert procs_with(marker) == []
    zero = await env.run([task], harness, timeout_policy="zero")
    (rec,) = zero.records
    assert rec.status is RolloutStatus.TIMEOUT and rec.reward == 0.0 and rec.in_batch
    assert procs_with(marker) == []


async def test_engine_5xx_is_infra_and_refilled(make_env) -> None:
    env = await make_env(faults=Faults(http_errors=1, http_status=500))
    result = await env.run([proof_task()], agent_harness("ok"), group_size=2, min_group_size=2, retries=2)
    (group,) = result.groups
    statuses = sorted(str(r.status) for r in group.records)
    assert statuses == ["infra_error:engine", "ok", "ok"]
    infra = next(r for r in group.records if r.status.is_infra)
    assert not infra.in_batch and infra.drop_reason == "infra"
    assert infra.reward is None and infra.infra_tainted
    assert group.valid and len(group.kept) == 2
    assert {r.metadata["attempt"] for r in group.records if r.sample_index == infra.sample_index} == {0, 1}


async def test_engine_5xx_without_retries_drops_the_group(make_env) -> None:
    env = await make_env(faults=Faults(http_errors=10, http_status=503))
    result = await env.run([proof_task()], agent_harness("ok"), group_size=2, min_group_size=2, retries=0)
    (group,) = result.groups
    assert not group.valid and group.kept == []
    assert {str(r.status) for r in group.records} == {"infra_error:engine"}


async def test_a_harness_retrying_a_broken_engine_is_ended_at_the_taint_not_the_budget(make_env) -> None:
    """Every engine call fails and the harness asks again forever. The first 503 taints the rollout, which
    is then dropped whatever happens next: the orchestrator ends the harness on the gateway's word instead of
    running it to its 120 s budget (and the status is the one the call log gives, as at the budget)."""
    env = await make_env(faults=Faults(http_errors=1_000_000, http_status=503))
    (rec,) = (await env.run([proof_task(budget_s=120.0)], agent_harness("retry-forever"))).records
    assert rec.status is RolloutStatus.INFRA_ENGINE and not rec.in_batch and rec.reward is None, rec.metadata
    assert rec.metadata["harness_ended"] == "infra taint in the call log"
    assert rec.metadata["timings"]["harness_s"] < 30, rec.metadata["timings"]
    calls = await env.store.list_calls(rec.rollout_id)
    assert calls and all(c.is_infra_error for c in calls)
    assert procs_with("retry-forever") == []  # its process tree went with the cut


async def test_engine_deadline_is_infra_engine(make_env) -> None:
    env = await make_env(faults=Faults(hang_before_headers=1), call_deadline_s=1.0)
    (rec,) = (await env.run([proof_task()], agent_harness("ok"))).records
    assert rec.status is RolloutStatus.INFRA_ENGINE, rec.metadata
    assert not rec.in_batch


async def test_sandbox_lost_is_infra(make_env) -> None:
    holder = {}

    def policy(turn: Turn) -> str:
        for sbx in list(holder["backend"]._open):
            if sbx.spec.rollout_id == turn.rollout_id:
                sbx.expire("test: node lost")
        return "abracadabra"

    env = await make_env(policy=policy)
    holder["backend"] = env.backend
    (rec,) = (await env.run([proof_task()], agent_harness("ok"))).records
    assert rec.status is RolloutStatus.INFRA_SANDBOX, rec.metadata
    assert "lost" in rec.metadata["error"]


async def test_verifier_crash_is_infra(make_env) -> None:
    env = await make_env()
    (rec,) = (await env.run([proof_task(crash_verifier=True)], agent_harness("ok"))).records
    assert rec.status is RolloutStatus.INFRA_VERIFIER and rec.reward is None
    stored = await env.store.get_rollout(rec.rollout_id)
    assert stored.status is RolloutStatus.INFRA_VERIFIER and stored.in_batch is False
    assert untrainable_reason(stored) == "infra:infra_error:verifier"


async def test_missing_harness_binary_is_harness_start(make_env) -> None:
    env = await make_env()
    (rec,) = (await env.run([proof_task()], CommandHarness(["/nonexistent/agent-cli"]))).records
    assert rec.status is RolloutStatus.INFRA_HARNESS_START
    assert not rec.in_batch


class CountingBackend:
    """The real LocalBackend, counting sandboxes open at once (to check the caps)."""

    name = "local"

    def __init__(self, inner) -> None:
        self.inner = inner
        self.booting = self.open = self.max_booting = self.max_open = 0

    async def open_sandbox(self, spec):
        self.booting += 1
        self.max_booting = max(self.max_booting, self.booting)
        try:
            sbx = await self.inner.open_sandbox(spec)
        finally:
            self.booting -= 1
        self.open += 1
        self.max_open = max(self.max_open, self.open)
        real_close = sbx.aclose

        async def aclose() -> None:
            self.open -= 1
            await real_close()

        sbx.aclose = aclose
        return sbx

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_running_and_boot_caps_are_separate(make_env) -> None:
    from openforgerl.orchestrator.batch import run_batch
    from openforgerl.orchestrator.config import OrchestratorConfig

    env = await make_env()
    backend = CountingBackend(env.backend)
    cfg = OrchestratorConfig(group_size=5, min_group_size=1, retries=0, max_running=3, max_booting=1)
    result = await run_batch(
        [proof_task()], agent_harness("ok"), gateway=env.gateway.access, backend=backend, config=cfg
    )
    assert [str(r.status) for r in result.records] == ["ok"] * 5
    assert backend.max_booting == 1
    assert 1 <= backend.max_open <= 3
