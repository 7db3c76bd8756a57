"""Exported multimodal samples through veRL's own code (verl 0.9.1 in `.venv-verl`, CPU).

Real traffic (local engine serving `tiny-vl` behind the gateway, screenshots as chat `image_url`
parts) is exported with `openforgerl export` twice: JSONL with blob references (the default) and veRL
Parquet with `--inline-images`. In the veRL venv each row's images are loaded as PIL images (from the
call log's blobs, resp. from the row) into veRL's own `AgentLoopOutput`, which then goes through
`AgentLoopWorker._agent_loop_postprocess` + `_postprocess` with veRL's own Qwen3-VL processor
(`verl.utils.tokenizer.hf_processor` on the tiny-vl directory, which binds `Qwen3VLModel.get_rope_index`):
veRL collapses each pad run, re-runs the processor and computes M-RoPE positions. Checked: veRL's
`image_grid_thw` equals the engine's recorded grids, its `pixel_values` equal the engine's processor's
(`engines/local/vlm.py`) bit for bit, positions are [1, 4, P+R], and refs and inline rows agree.

veRL's `Qwen3VLProcessor` cannot load without torchvision (its video processor); the script drops the
video processor from `Qwen3VLProcessor.get_attributes` first (measured).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner
from vlm_traffic import record_gui_rollouts, screenshot

from openforgerl.engines.local.model import resolve_model_path
from openforgerl.export import pil_images, read_jsonl_rows, read_parquet_rows
from openforgerl.store.sqlite import SQLiteCallStore

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = ROOT / ".venv-verl" / "bin" / "python"
TINY_VL = resolve_model_path("tiny-vl")
PROMPT_LEN, RESPONSE_LEN = 512, 512

_VERL = """
import asyncio, json, sys
from types import SimpleNamespace
import torch
from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor
Qwen3VLProcessor.get_attributes = classmethod(lambda cls: ["image_processor", "tokenizer"])  # no torchvision
import verl
from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput, AgentLoopWorker
from verl.utils.tokenizer import hf_processor
from openforgerl.export import pil_images, read_jsonl_rows, read_parquet_rows
from openforgerl.store.sqlite import SQLiteCallStore

refs_path, inline_path, model_dir, prompt_len, response_len = sys.argv[1:6]
processor = hf_processor(model_dir)
assert processor is not None and hasattr(processor, "get_rope_index"), "veRL built no VL processor"

def outputs(rows, read_blob):
    out = []
    for row in rows:
        mm = {"images": pil_images(row["multi_modal_data"], read_blob)}
        out.append(AgentLoopOutput(**{**row, "multi_modal_data": mm}, metrics=AgentLoopMetrics()))
    return out

worker = object.__new__(AgentLoopWorker)
worker.rollout_config = SimpleNamespace(prompt_length=int(prompt_len), response_length=int(response_len))
worker.tokenizer = processor.tokenizer
worker.processor = processor
worker.reward_loop_worker_handles = None
worker.distillation_enabled = False
worker.mm_processor_kwargs = None

async def batch(outs):
    padded = [await worker._agent_loop_postprocess(o, validate=False, raw_prompt=[]) for o in outs]
    return padded, worker._postprocess(padded, input_non_tensor_batch=None)

def report(outs):
    padded, proto = asyncio.run(batch(outs))
    mmi = proto.non_tensor_batch["multi_modal_inputs"]
    return {
        "grids": [m["image_grid_thw"].tolist() for m in mmi],
        "pixel_shapes": [list(m["pixel_values"].shape) for m in mmi],
        "pixel_sums": [float(m["pixel_values"].double().sum()) for m in mmi],
        "pixel_abs_sums": [float(m["pixel_values"].double().abs().sum()) for m in mmi],
        "images_seqlens": [m["images_seqlens"].tolist() for m in mmi],
        "position_ids_shape": list(proto.batch["position_ids"].shape),
        "mrope_differs": [bool((p.position_ids[0, 1] != p.position_ids[0, 0]).any()) for p in padded],
        "input_ids_shape": list(proto.batch["input_ids"].shape),
    }

store = None
def read_blob(sha):
    global store
    return store.read_blob(sha)

ref_rows = read_jsonl_rows(__import__("pathlib").Path(refs_path))
store = SQLiteCallStore(ref_rows[0]["multi_modal_data"]["images"][0]["blob_store"])
inline_rows = read_parquet_rows(__import__("pathlib").Path(inline_path))
print(json.dumps({"verl": verl.__version__, "refs": report(outputs(ref_rows, read_blob)),
                  "inline": report(outputs(inline_rows, None))}))
"""

needs_verl = pytest.mark.skipif(
    not VENV_PYTHON.exists(), reason="veRL venv missing: run scripts/install_verl.sh"
)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from openforgerl.cli import app

    work = tmp_path_factory.mktemp("mm-export")
    db = work / "calls.db"
    rollouts = [[screenshot(0), screenshot(1)], [screenshot(2), screenshot(2), screenshot(3, (64, 96))]]
    asyncio.run(record_gui_rollouts(db, rollouts))
    runner = CliRunner()
    checked = [
        "--image-token-id",
        "4104",
    ]  # the gateway records no processor identity for the local engine yet
    for fmt, out, extra in (
        ("jsonl", "refs.jsonl", checked),
        ("verl", "inline.parquet", ["--inline-images"]),
    ):
        res = runner.invoke(
            app, ["export", "--store", str(db), "--out", str(work / out), "--format", fmt, *extra]
        )
        assert res.exit_code == 0, res.output + repr(res.exception)
    return {"db": db, "refs": work / "refs.jsonl", "inline": work / "inline.parquet", "shots": rollouts}


def test_rows_hold_references_by_default_and_bytes_inline_on_request(exported: dict[str, Any]) -> None:
    refs, inline = read_jsonl_rows(exported["refs"]), read_parquet_rows(exported["inline"])
    assert [len(r["multi_modal_data"]["images"]) for r in refs] == [2, 3]
    for row in refs:
        for image in row["multi_modal_data"]["images"]:
            assert image["blob_uri"] == f"openforgerl-blob:sha256:{image['sha256']}"
            assert Path(image["blob_store"]) == exported["db"].resolve() and "data" not in image
            assert image["tokens"] == 6 and image["grid_thw"] in ([1, 4, 6], [1, 6, 4])
    assert [[i["sha256"] for i in r["multi_modal_data"]["images"]] for r in inline] == [
        [i["sha256"] for i in r["multi_modal_data"]["images"]] for r in refs
    ]
    store = SQLiteCallStore(exported["db"])
    try:
        from_refs = [pil_images(r["multi_modal_data"], store.read_blob) for r in refs]
    finally:
        store.close()
    from_inline = [pil_images(r["multi_modal_data"]) for r in inline]
    assert [[im.tobytes() for im in imgs] for imgs in from_refs] == [
        [im.tobytes() for im in imgs] for imgs in from_inline
    ]
    assert from_refs[1][2].size == (64, 96)


def _engine_processing(rows: list[dict[str, Any]], db: Path) -> list[tuple[list[list[int]], float, float]]:
    from transformers import AutoConfig

    from openforgerl.engines.local.vlm import VisionProcessor

    vp = VisionProcessor(TINY_VL, AutoConfig.from_pretrained(TINY_VL))
    store = SQLiteCallStore(db)
    try:
        out = []
        for row in rows:
            processed = vp.process(pil_images(row["multi_modal_data"], store.read_blob))
            pv = processed.pixel_values.double()
            out.append((processed.image_grid_thw.tolist(), float(pv.sum()), float(pv.abs().sum())))
        return out
    finally:
        store.close()


@needs_verl
def test_verl_builds_agent_loop_outputs_and_runs_its_qwen_vl_processing(exported: dict[str, Any]) -> None:
    cmd = [
        str(VENV_PYTHON),
        "-c",
        _VERL,
        str(exported["refs"]),
        str(exported["inline"]),
        str(TINY_VL),
        str(PROMPT_LEN),
        str(RESPONSE_LEN),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=280, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-4000:]
    built = json.loads(proc.stdout.strip().splitlines()[-1])
    assert built["verl"].startswith("0.9")
    rows = read_jsonl_rows(exported["refs"])
    engine = _engine_processing(rows, exported["db"])
    for key in ("refs", "inline"):
        got = built[key]
        assert got["grids"] == [[i["grid_thw"] for i in r["multi_modal_data"]["images"]] for r in rows]
        assert got["grids"] == [g for g, _, _ in engine]
        assert got["pixel_sums"] == pytest.approx([s for _, s, _ in engine], rel=1e-9, abs=1e-6)
        assert got["pixel_abs_sums"] == pytest.approx([a for _, _, a in engine], rel=1e-9)
        assert got["position_ids_shape"] == [len(rows), 4, PROMPT_LEN + RESPONSE_LEN]
        assert all(got["mrope_differs"])
        assert [sum(s) // 4 for s in got["images_seqlens"]] == [
            sum(i["tokens"] for i in r["multi_modal_data"]["images"]) for r in rows
        ]
    assert built["refs"] == built["inline"]
    print("\nveRL multi_modal_inputs:", json.dumps(built["refs"]))


def test_export_refuses_a_sample_whose_pads_do_not_match(exported: dict[str, Any]) -> None:
    from openforgerl.export import ExportImageError, check_sample_images
    from openforgerl.records import Sample

    rows = read_jsonl_rows(exported["refs"])
    row = rows[0]
    images = [{**i, "tokens": i["tokens"] + 1} for i in row["multi_modal_data"]["images"]]
    sample = Sample(
        prompt_ids=row["prompt_ids"],
        response_ids=row["response_ids"],
        response_mask=row["response_mask"],
        response_logprobs=row["response_logprobs"],
        multi_modal_data={"images": images},
        rollout_id="r",
        extra_fields={"image_processor": {"image_token_id": 4104, "merge_size": 2}},
    )
    with pytest.raises(ExportImageError, match="pads for"):
        check_sample_images(sample)
    assert torch.tensor(row["prompt_ids"] + row["response_ids"]).eq(4104).sum() == 12


def test_sample_parquet_keeps_image_refs_and_processor(exported: dict[str, Any], tmp_path: Path) -> None:
    from openforgerl.cli import app

    out = tmp_path / "samples.parquet"
    res = CliRunner().invoke(
        app, ["export", "--store", str(exported["db"]), "--out", str(out), "--format", "parquet"]
    )
    assert res.exit_code == 0, res.output + repr(res.exception)
    rows = read_parquet_rows(out)
    assert [len(r["multi_modal_data"]["images"]) for r in rows] == [2, 3]
    assert all(
        r["multi_modal_data"]["images"][0]["blob_uri"].startswith("openforgerl-blob:sha256:") for r in rows
    )
    metrics = json.loads(out.with_name(out.name + ".metrics.json").read_text())
    assert metrics["per_harness"]["gui-test"]["images_in_samples"] == 5


async def test_real_traffic_merges_with_images_and_breaks_as_image_pruned(tmp_path: Path) -> None:
    """Gateway-recorded calls: append-only screenshots merge into one chain; a last-2-images harness
    breaks its chain once per pruned screenshot, labelled `image_pruned`, each sample's pads checked."""
    from openforgerl.export import reconstruct_log
    from openforgerl.trajectory import ReconstructionOptions

    db = tmp_path / "calls.db"
    shots = [screenshot(i) for i in range(4)]
    await record_gui_rollouts(db, [shots], keep_last=None)
    await record_gui_rollouts(tmp_path / "pruned.db", [shots], keep_last=2)
    results = {}
    for name in ("calls.db", "pruned.db"):
        store = SQLiteCallStore(tmp_path / name)
        try:
            (results[name],) = list(reconstruct_log(store, ReconstructionOptions(image_token_id=4104)))
        finally:
            store.close()
    full, pruned = results["calls.db"], results["pruned.db"]
    assert len(full.samples) == 1 and full.metrics.merge_rate == 1.0
    assert len(full.samples[0].multi_modal_data["images"]) == 4
    # calls see images [0], [0,1], [1,2], [2,3]: calls 2 and 3 each dropped the oldest one
    assert pruned.metrics.break_causes == {"image_pruned": 2}
    assert [len(s.multi_modal_data["images"]) for s in pruned.samples] == [2, 2, 2]
    assert pruned.dropped_reason is None
