"""The veRL agent loop's pure parts, without veRL: dataset rows -> tasks, rollouts -> returned rows,
loop mode / options from veRL's config, and server-address discovery."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest

from openforgerl.compose.verl_loop import loop_mode, reconstruction_options, server_addresses
from openforgerl.compose.verl_worker import loop_config, normalize_url, pick_record
from openforgerl.config import Config, ConfigError, load_config
from openforgerl.envs.claw.suite import CLAW_SUITE
from openforgerl.records import RolloutRecord, RolloutStatus
from openforgerl.tasks.format import load_task
from openforgerl.train.verl.outputs import is_dropped_row, rollout_rows
from openforgerl.train.verl.rows import RowError, RowSpec, build_row, resolve_task_dir, task_index
from openforgerl.trajectory import ReconstructionOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "trajectory"))
from trajectory_sim import Simulator

TASK = CLAW_SUITE / "easy-mail-send-01"


def _rollout(rollout_id: str = "r0", **update: object):
    """Main agent (4 turns) + a sub-agent (2 turns) + a compaction: three chains."""
    sim = Simulator(random.Random(3), rollout_id=rollout_id)
    main, sub = sim.new_agent("main"), sim.new_agent("sub", parent="main")
    for agent, turns in ((main, 4), (sub, 2)):
        for _ in range(turns):
            sim.answer(agent, sim.call(agent))
    sim.compact(main)
    sim.answer(main, sim.call(main, version=1))
    rec = RolloutRecord(
        rollout_id=rollout_id,
        task_id="t",
        harness="sim",
        group_id="g",
        status=RolloutStatus.OK,
        reward=1.0,
        in_batch=True,
        group_valid=True,
    )
    return sim.calls, rec.model_copy(update=update)


def test_row_round_trip_through_build_row_and_parse() -> None:
    task = load_task(TASK)
    row = build_row(task, harness="codex", index=7)
    assert row["agent_name"] == "openforgerl" and row["prompt"] == [
        {"role": "user", "content": task.instruction}
    ]
    spec = RowSpec.parse({**row, "index": 7, "uid": "u"})
    assert spec == RowSpec(task.task_id, str(TASK), "codex", 7)
    assert resolve_task_dir(spec, []) == TASK


def test_parse_accepts_numpy_wrapped_extra_info_and_defaults_the_harness() -> None:
    info = np.array({"task_id": "claw/easy-mail-send-01"}, dtype=object)
    spec = RowSpec.parse({"extra_info": info}, default_harness="zero")
    assert spec.harness == "zero" and spec.task_dir is None
    index = task_index([CLAW_SUITE])
    assert resolve_task_dir(spec, [CLAW_SUITE], index) == TASK


def test_relative_task_dir_is_searched_under_the_roots() -> None:
    spec = RowSpec.parse({"extra_info": {"task_dir": "easy-mail-send-01"}})
    assert resolve_task_dir(spec, [CLAW_SUITE]) == TASK


def test_bad_rows_fail_loudly() -> None:
    with pytest.raises(RowError, match="neither"):
        RowSpec.parse({"extra_info": {"harness": "zero"}})
    with pytest.raises(RowError, match="not found"):
        resolve_task_dir(RowSpec("nope/none", None, "zero"), [CLAW_SUITE], task_index([CLAW_SUITE]))


def test_v1_rows_put_the_final_chain_last_and_carry_veRLs_step() -> None:
    calls, rec = _rollout()
    rows = rollout_rows(rec, calls, mode="v1", options=ReconstructionOptions(), global_steps=12)
    assert len(rows) == 3
    assert [r["extra_fields"]["is_final_chain"] for r in rows] == [False, False, True]
    assert {r["extra_fields"]["min_global_steps"] for r in rows} == {12}
    assert all(r["reward_score"] == 1.0 for r in rows)
    assert all(len(r["response_ids"]) == len(r["response_mask"]) == len(r["response_logprobs"]) for r in rows)


def test_classic_row_is_the_final_chain() -> None:
    calls, rec = _rollout()
    v1 = rollout_rows(rec, calls, mode="v1", options=ReconstructionOptions())
    row = rollout_rows(rec, calls, mode="classic", options=ReconstructionOptions())
    assert row["response_ids"] == v1[-1]["response_ids"] and not is_dropped_row(row)
    assert row["extra_fields"]["chains_not_exported"] == 2


@pytest.mark.parametrize(
    "update",
    [
        {"status": RolloutStatus.INFRA_ENGINE, "in_batch": False, "drop_reason": "infra"},
        {"infra_tainted": True},
        {"status": RolloutStatus.TIMEOUT, "in_batch": False, "drop_reason": "timeout"},
        {"status": RolloutStatus.TIMEOUT, "reward": None},
        {"in_batch": None},
        {"in_batch": False, "group_valid": False, "drop_reason": "group_below_min_size(1<2)"},
    ],
)
def test_dropped_rollouts_are_empty_in_v1_and_flagged_placeholders_in_classic(update: dict) -> None:
    calls, rec = _rollout(**update)
    assert rollout_rows(rec, calls, mode="v1", options=ReconstructionOptions()) == []
    row = rollout_rows(rec, calls, mode="classic", options=ReconstructionOptions(), pad_token_id=5)
    assert is_dropped_row(row) and row["extra_fields"]["dropped"] is True
    assert row["response_mask"] == [0] and row["prompt_ids"] == [5] and row["extra_fields"]["drop_reason"]


def test_pick_record_prefers_the_kept_attempt() -> None:
    failed = RolloutRecord(rollout_id="a", in_batch=False)
    kept = RolloutRecord(rollout_id="b", in_batch=True)
    assert pick_record([failed, kept]).rollout_id == "b"
    assert pick_record([failed]).rollout_id == "a"


def test_mode_and_options_follow_veRLs_config() -> None:
    cfg = {
        "trainer": {"use_v1": False},
        "actor_rollout_ref": {"rollout": {"prompt_length": 100, "response_length": 200, "name": "sglang"}},
    }
    assert loop_mode(Config(), cfg) == "classic"
    assert loop_mode(load_config({"verl": {"mode": "v1"}}), cfg) == "v1"
    assert loop_mode(Config(), {}) == "v1"
    opts = reconstruction_options(
        load_config({"reconstruction": {"overflow": "split"}}), cfg, image_token_id=7
    )
    assert (opts.max_prompt_len, opts.max_response_len, opts.overflow.value) == (100, 200, "split")
    assert opts.image_token_id == 7
    own = reconstruction_options(load_config({"reconstruction": {"max_response_len": 50}}), cfg)
    assert (own.max_prompt_len, own.max_response_len) == (100, 50), "a length the config sets wins"


def test_loop_config_keeps_our_sections_only() -> None:
    s = loop_config(
        {
            "name": "openforgerl",
            "_target_": "x",
            "verl": {"mode": "classic", "task_roots": ["/a"]},
            "rollout": {"retries": 0},
            "tools": object(),
        }
    )
    assert s.verl.mode == "classic" and s.verl.task_roots == ["/a"] and s.rollout.retries == 0
    with pytest.raises(ConfigError, match=r"unknown key verl\.mdoe \(did you mean verl\.mode\?\)"):
        loop_config({"verl": {"mdoe": "v1"}})
    with pytest.raises(ConfigError, match="one name"):
        loop_config({"harness": {"zero": 0.5, "codex": 0.5}})
    assert normalize_url("10.0.0.2:8000") == "http://10.0.0.2:8000"
    assert normalize_url("[::1]:8000/") == "http://[::1]:8000"
    assert normalize_url("https://h/v1") == "https://h/v1"


class _Remote:
    def __init__(self, value: list[str]) -> None:
        self.value = value

    def remote(self):
        async def get() -> list[str]:
            return self.value

        return get()


class _Balancer:
    def __init__(self, servers: list[str]) -> None:
        self.get_all_servers = _Remote(servers)


class _Client:  # shape of veRL's LLMServerClient: only the balancer handle
    def __init__(self, servers: list[str]) -> None:
        self._load_balancer = _Balancer(servers)


class _Manager:  # shape of veRL's LLMServerManager
    def get_addresses(self) -> list[str]:
        return ["1.2.3.4:5"]


async def test_server_addresses_from_client_or_manager() -> None:
    assert await server_addresses(_Client(["10.0.0.1:8000", "10.0.0.2:8000"])) == [
        "10.0.0.1:8000",
        "10.0.0.2:8000",
    ]
    assert await server_addresses(_Manager()) == ["1.2.3.4:5"]
    assert await server_addresses(object()) == []


async def test_backend_factory(tmp_path: Path) -> None:
    from openforgerl.sandbox.local import LocalBackend
    from openforgerl.sandbox.registry import BACKENDS, UnknownBackend, make_backend

    backend = await make_backend("local", tmp_path / "sbx")
    assert isinstance(backend, LocalBackend) and backend.root == (tmp_path / "sbx").resolve()
    await backend.aclose()
    assert set(BACKENDS) == {"local", "podman", "kubernetes"}
    with pytest.raises(UnknownBackend, match="unknown backend 'nope'"):
        await make_backend("nope", tmp_path)


def test_the_shipped_agent_loop_entry_is_a_valid_config() -> None:
    import yaml

    [entry] = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "examples/verl/agent_loop.yaml").read_text()
    )
    config = loop_config(entry)
    assert (config.harness, config.sandbox.backend, config.rollout.retries) == ("zero", "local", 1)
    assert config.orchestrator(group_size=1, min_group_size=1).retry_budget == 1
