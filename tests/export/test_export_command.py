"""`openforgerl export` from a real SQLite call log."""

from __future__ import annotations

from pathlib import Path

import datasets
import orjson
import pytest
import typer
from export_sim import simulated_rollout
from typer.testing import CliRunner

from openforgerl.cli.export import command
from openforgerl.export import read_jsonl_rows, read_parquet_rows
from openforgerl.store import SQLiteCallStore
from openforgerl.testing.calls import stored


@pytest.fixture
async def log_path(tmp_path: Path) -> Path:
    path = tmp_path / "calls.db"
    store = SQLiteCallStore(path)
    for i, kw in enumerate([{}, {"infra_tainted": True}, {"harness": "codex"}]):
        calls, rollout = simulated_rollout(i, f"r{i}", **kw)
        for call in calls:
            await store.append_call(*stored(call))
        await store.put_rollout(rollout)
    orphan_calls, _ = simulated_rollout(9, "r-open")  # calls but no rollout record yet
    for call in orphan_calls:
        await store.append_call(*stored(call))
    await store.aclose()
    return path


def _run(*args: str) -> str:
    app = typer.Typer()
    app.command()(command)
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_export_verl_parquet_with_metrics(log_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "train.parquet"
    text = _run("--store", str(log_path), "--out", str(out), "--format", "verl")
    rows = read_parquet_rows(out)
    assert len(rows) == 6, "3 chains x 2 kept rollouts; the tainted one and the unfinished one are dropped"
    assert [r["extra_fields"]["rollout_id"] for r in rows if r["extra_fields"]["is_final_chain"]] == [
        "r0",
        "r2",
    ]
    assert {r["extra_fields"]["termination_status"] for r in rows} == {"ok"}
    report = orjson.loads((tmp_path / "train.parquet.metrics.json").read_bytes())
    sim = report["per_harness"]["sim"]
    assert (sim["rollouts"], sim["dropped_rollouts"], sim["chains"]) == (2, 1, 3)
    assert sim["break_causes"] == {"sub_agent": 1, "compaction": 1}
    assert report["per_harness"]["codex"]["rollouts"] == 1 and "merge_rate=" in text
    assert datasets.load_dataset("parquet", data_files=str(out), split="train").num_rows == 6


def test_export_classic_jsonl_with_truncation(log_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "classic.jsonl"
    _run(
        "--store",
        str(log_path),
        "--out",
        str(out),
        "--format",
        "jsonl",
        "--classic",
        "--max-prompt-len",
        "20",
        "--max-response-len",
        "30",
    )
    rows = read_jsonl_rows(out)
    assert len(rows) == 2 and [r["extra_fields"]["dropped"] for r in rows] == [False, False]
    assert all(len(r["prompt_ids"]) <= 20 and len(r["response_ids"]) <= 30 for r in rows)
    report = orjson.loads((tmp_path / "classic.jsonl.metrics.json").read_bytes())
    truncated = sum(m["prompt_tokens_truncated"] for m in report["rollouts"])
    assert truncated > 0, "truncation is counted, never silent"


def test_export_samples_parquet(log_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "samples.parquet"
    _run("--store", str(log_path), "--out", str(out), "--format", "parquet")
    rows = read_parquet_rows(out)
    assert len(rows) == 6 and {"group_id", "chain_index", "weight", "policy_version_max"} <= set(rows[0])
    assert {r["status"] for r in rows} == {"ok"} and None not in {r["reward_score"] for r in rows}


def test_missing_store_is_an_error(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(command)
    result = CliRunner().invoke(
        app, ["--store", str(tmp_path / "nope.db"), "--out", str(tmp_path / "o.parquet")]
    )
    assert result.exit_code != 0


def test_export_takes_the_configs_reconstruction_section_and_flags_win(
    log_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import openforgerl.export.pipeline as pipeline

    used = []
    reconstruct = pipeline.reconstruct_log
    monkeypatch.setattr(
        pipeline, "reconstruct_log", lambda log, options: used.append(options) or reconstruct(log, options)
    )
    config = tmp_path / "train.yaml"
    config.write_text(
        "reconstruction: {max_prompt_len: 20, max_response_len: 4000, overflow: drop, "
        "compaction_ratio: 0.25, related_prefix_tokens: 8}\n"
    )
    out = tmp_path / "classic.jsonl"
    _run(
        "--store",
        str(log_path),
        "--out",
        str(out),
        "--format",
        "jsonl",
        "--classic",
        "--config",
        str(config),
        "--max-response-len",
        "30",
        "--overflow",
        "truncate",
    )
    [options] = used
    assert (options.max_prompt_len, options.compaction_ratio, options.related_prefix_tokens) == (20, 0.25, 8)
    assert (options.max_response_len, options.overflow.value) == (30, "truncate")
    rows = read_jsonl_rows(out)  # truncated to the YAML's prompt and the flag's response length, none dropped
    assert len(rows) == 2 and [r["extra_fields"]["dropped"] for r in rows] == [False, False]
    assert all(len(r["prompt_ids"]) <= 20 and len(r["response_ids"]) <= 30 for r in rows)


async def test_export_says_why_each_dropped_rollout_was_dropped(tmp_path: Path) -> None:
    """A log whose rollouts nobody judged (opened and closed through the admin API without `in_batch`)
    exports 0 rows, and the command says why and what to send, not only `wrote 0 rows`."""
    path = tmp_path / "calls.db"
    store = SQLiteCallStore(path)
    for i, kw in enumerate([{"in_batch": None, "group_valid": None}] * 2 + [{"infra_tainted": True}]):
        calls, rollout = simulated_rollout(i, f"r{i}", **kw)
        for call in calls:
            await store.append_call(*stored(call))
        await store.put_rollout(rollout)
    await store.aclose()
    text = _run("--store", str(path), "--out", str(tmp_path / "rows.parquet"))
    assert "wrote 0 rows from 3 rollouts" in text
    assert "dropped 3 of 3 rollouts (not trainable):" in text
    assert "  2 not_in_batch:undecided: no orchestrator decided on it: send `in_batch: true`" in text
    assert "  1 infra:tainted: an infrastructure fault hit it" in text


def test_export_of_trainable_rollouts_prints_no_drop_lines(log_path: Path, tmp_path: Path) -> None:
    text = _run("--store", str(log_path), "--out", str(tmp_path / "rows.parquet"))
    assert "dropped 2 of 4 rollouts" in text  # control: the tainted and the unfinished one
    assert "not_in_batch" not in text
