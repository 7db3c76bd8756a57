"""One verdict, one writer: only a rollout the orchestrator judged (through the gateway's outcome
route) is ever trained or exported; the gateway's infra taint wins over a reported "ok"; an
outcome that never reached the gateway drops the rollout everywhere; deadlines nest by config."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from openforgerl.engines.scripted import ScriptedEngine
from openforgerl.export.pipeline import ExportFormat, export_rows, reconstruct_log
from openforgerl.gateway.server import RunningGateway, start_gateway
from openforgerl.orchestrator.config import OrchestratorConfig, call_deadline_s
from openforgerl.orchestrator.gateway_client import GatewayClient, GatewayClientError
from openforgerl.orchestrator.rollout import RolloutRunner
from openforgerl.records import CallErrorKind, RolloutOutcome, RolloutRecord, RolloutStatus
from openforgerl.store.sqlite import SQLiteCallStore
from openforgerl.trajectory import ReconstructionOptions, trainable


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[tuple[RunningGateway, Path]]:
    db = tmp_path / "calls.db"
    store = SQLiteCallStore(db)
    gateway = await start_gateway(ScriptedEngine(lambda turn: "abracadabra"), store)
    yield gateway, db
    await gateway.aclose()
    await store.aclose()


async def _rollout_with_a_call(gateway: RunningGateway, **spec: Any) -> str:
    opened = await gateway.open_rollout(task_id="t", harness="h", group_id="g", **spec)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    headers = {"Authorization": f"Bearer {opened['api_key']}"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(opened["openai_base_url"] + "/chat/completions", json=body, headers=headers) as resp,
    ):
        assert resp.status == 200, await resp.text()
    return opened["rollout_id"]


async def _admin(gateway: RunningGateway, path: str, body: dict[str, Any]) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession(headers=gateway.admin_headers()) as http,
        http.post(f"{gateway.admin_url}{path}", json=body) as resp,
    ):
        assert resp.status == 200, await resp.text()
        return dict(await resp.json())


def _exported(db: Path) -> set[str]:
    reader = SQLiteCallStore(db)
    try:
        results = list(reconstruct_log(reader, ReconstructionOptions()))
    finally:
        reader.close()
    return {row["rollout_id"] for row in export_rows(results, ExportFormat.PARQUET, classic=False)}


async def test_only_a_judged_rollout_is_exported(gw: tuple[RunningGateway, Path]) -> None:
    gateway, db = gw
    forged = await _rollout_with_a_call(gateway)  # reward 1.0, closed, but no orchestrator verdict
    await _admin(gateway, f"/rollouts/{forged}/reward", {"reward": 1.0})
    await _admin(gateway, f"/rollouts/{forged}/close", {})
    judged = await _rollout_with_a_call(gateway)
    await _admin(
        gateway,
        f"/rollouts/{judged}/outcome",
        {"status": "ok", "reward": 1.0, "in_batch": True, "group_valid": True},
    )
    timed_out = await _rollout_with_a_call(gateway)  # kept, but without a reward: never a sample
    await _admin(
        gateway,
        f"/rollouts/{timed_out}/outcome",
        {"status": "timeout", "in_batch": True, "group_valid": True},
    )
    small = await _rollout_with_a_call(gateway)  # a group below its minimum size
    await _admin(
        gateway,
        f"/rollouts/{small}/outcome",
        {
            "status": "ok",
            "reward": 1.0,
            "in_batch": False,
            "group_valid": False,
            "drop_reason": "group_below_min_size(1<2)",
        },
    )
    assert _exported(db) == {judged}


async def test_the_gateways_infra_taint_wins_over_a_reported_ok(gw: tuple[RunningGateway, Path]) -> None:
    gateway, db = gw
    rid = await _rollout_with_a_call(gateway)
    state = await gateway.gateway.registry.state(rid)
    await gateway.gateway.registry.taint(state, CallErrorKind.ENGINE_DEADLINE)
    stored = await _admin(
        gateway,
        f"/rollouts/{rid}/outcome",
        {"status": "ok", "reward": 1.0, "in_batch": True, "group_valid": True},
    )
    record = RolloutRecord.model_validate(stored)
    assert record.status is RolloutStatus.INFRA_ENGINE, "engine deadline -> infra_error:engine (one table)"
    assert not trainable(record) and _exported(db) == set()


class _RefusingGateway:
    async def report_outcome(self, rollout_id: str, outcome: RolloutOutcome) -> RolloutRecord:
        raise GatewayClientError("POST /outcome: HTTP 503")


async def test_an_unrecorded_verdict_drops_the_rollout_everywhere() -> None:
    runner = RolloutRunner(_RefusingGateway(), None, OrchestratorConfig(), ("127.0.0.1", 1))  # type: ignore[arg-type]
    kept = RolloutRecord(rollout_id="r", status=RolloutStatus.OK, reward=1.0, in_batch=True, group_valid=True)
    assert trainable(kept)
    back = await runner.report(kept)
    assert back.in_batch is False and back.drop_reason == "outcome_not_recorded" and not trainable(back)


async def test_the_orchestrator_reports_through_the_admin_client(gw: tuple[RunningGateway, Path]) -> None:
    gateway, _ = gw
    rid = await _rollout_with_a_call(gateway)
    async with GatewayClient(gateway.access) as client:
        runner = RolloutRunner(client, None, OrchestratorConfig(), ("127.0.0.1", 1))  # type: ignore[arg-type]
        record = RolloutRecord(
            rollout_id=rid,
            task_id="t",
            status=RolloutStatus.AGENT_FAILED,
            reward=0.0,
            in_batch=True,
            group_valid=True,
            metadata={"attempt": 0},
        )
        back = await runner.report(record)
    stored = await gateway.gateway.store.get_rollout(rid)
    assert stored is not None and stored.closed
    assert (stored.status, stored.reward, stored.in_batch, stored.group_valid) == (
        RolloutStatus.AGENT_FAILED,
        0.0,
        True,
        True,
    )
    assert (back.status, back.in_batch, back.metadata["attempt"]) == (RolloutStatus.AGENT_FAILED, True, 0)


def test_call_deadlines_nest_inside_the_rollout_budget(tmp_path: Path) -> None:
    from openforgerl.compose.verl_worker import loop_config
    from openforgerl.config import Config, ConfigError, load_config

    quickstart = Config.from_yaml(Path(__file__).parents[2] / "examples/quickstart.yaml")
    assert quickstart.rollout.budget_s is not None
    assert quickstart.call_deadline_s < quickstart.rollout.budget_s
    assert call_deadline_s(300.0) < 300.0 and call_deadline_s(None) == 600.0
    assert call_deadline_s(60.0, 30.0) == 30.0
    with pytest.raises(ConfigError, match="must be shorter than the rollout budget"):
        load_config({"rollout": {"budget_s": 60}, "gateway": {"call_deadline_s": 120}})
    with pytest.raises(ConfigError, match="must be shorter than the rollout budget"):
        loop_config({"rollout": {"budget_s": 300}, "gateway": {"call_deadline_s": 600}})
    assert loop_config({"rollout": {"budget_s": 300}}).call_deadline_s < 300
    bad = tmp_path / "bad.yaml"
    bad.write_text("rollout: {budget_s: 60}\ngateway: {call_deadline_s: 120}\n")
    with pytest.raises(ConfigError) as info:
        Config.from_yaml(bad)
    assert "\n" not in str(info.value) and "call_deadline_s (120 s) must be shorter" in str(info.value)
