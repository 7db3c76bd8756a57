"""AgentLoopOutput rows: V1 list form, classic form, Parquet/JSONL round trips, HF datasets."""

from __future__ import annotations

from pathlib import Path

import datasets

from openforgerl.export import (
    AGENT_LOOP_FIELDS,
    classic_output,
    read_jsonl_rows,
    read_parquet_rows,
    v1_outputs,
    write_jsonl,
    write_parquet,
)
from openforgerl.trajectory import ReconstructionResult


def check_documented_contract(row: dict) -> None:
    """veRL's AgentLoopOutput field contract (rl_stacks.md §3.1), for when veRL itself is absent."""
    assert tuple(row) == AGENT_LOOP_FIELDS
    n = len(row["response_ids"])
    assert n > 0 and len(row["response_mask"]) == len(row["response_logprobs"]) == n
    assert set(row["response_mask"]) <= {0, 1}
    assert all(
        lp == 0.0 for lp, m in zip(row["response_logprobs"], row["response_mask"], strict=True) if m == 0
    )
    assert all(isinstance(t, int) for t in row["prompt_ids"] + row["response_ids"])
    assert isinstance(row["num_turns"], int) and isinstance(row["extra_fields"], dict)


def test_v1_list_has_every_chain_with_main_chain_last(results: list[ReconstructionResult]) -> None:
    rows = v1_outputs(results[0])
    assert len(rows) == 3
    for row in rows:
        check_documented_contract(row)
    extras = [r["extra_fields"] for r in rows]
    assert [e["is_final_chain"] for e in extras] == [False, False, True]
    assert extras[-1]["agent_id"] == "main" and extras[-1]["started_by"] == "compaction"
    assert {(e["group_uid"], e["rollout_id"], e["chains_in_rollout"], e["loss_weight"]) for e in extras} == {
        ("g1", "r0", 3, 1 / 3)
    }
    assert (extras[-1]["min_global_steps"], extras[-1]["max_global_steps"]) == (1, 1)
    assert sum(sum(r["response_mask"]) for r in rows) == results[0].metrics.tokens_trained


def test_v1_list_is_empty_for_a_dropped_rollout(results: list[ReconstructionResult]) -> None:
    assert v1_outputs(results[2]) == []


def test_classic_form_is_one_row_per_rollout_and_flags_drops(results: list[ReconstructionResult]) -> None:
    rows = [classic_output(r) for r in results]
    for row in rows:
        check_documented_contract(row)
    assert rows[0]["response_ids"] == list(results[0].samples[-1].response_ids)
    assert rows[0]["extra_fields"]["chains_not_exported"] == 2
    assert rows[1]["reward_score"] == 0.0 and not rows[1]["extra_fields"]["dropped"]
    dropped = rows[2]["extra_fields"]
    assert (dropped["dropped"], dropped["drop_reason"], sum(rows[2]["response_mask"])) == (
        True,
        "infra:tainted",
        0,
    )


def _all_rows(results: list[ReconstructionResult]) -> list[dict]:
    return [row for r in results for row in v1_outputs(r)]


def test_parquet_round_trip_is_exact_and_loads_in_hf_datasets(results, tmp_path: Path) -> None:
    rows = _all_rows(results)
    path = tmp_path / "rows.parquet"
    write_parquet(rows, path)
    assert read_parquet_rows(path) == rows
    ds = datasets.load_dataset("parquet", data_files=str(path), split="train")
    assert ds.column_names == list(AGENT_LOOP_FIELDS) and len(ds) == len(rows) == 6
    assert ds[5]["response_logprobs"] == rows[5]["response_logprobs"]
    assert ds[5]["extra_fields"]["rollout_id"] == "r1" and ds[5]["extra_fields"]["is_final_chain"]


def test_jsonl_round_trip_is_exact_and_loads_in_hf_datasets(results, tmp_path: Path) -> None:
    rows = [*_all_rows(results), classic_output(results[2])]
    path = tmp_path / "rows.jsonl"
    write_jsonl(rows, path)
    assert read_jsonl_rows(path) == rows
    ds = datasets.load_dataset("json", data_files=str(path), split="train")
    assert len(ds) == 7 and ds[6]["extra_fields"]["dropped"] is True
    assert ds[0]["response_mask"] == rows[0]["response_mask"]
