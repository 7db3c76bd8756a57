"""Our export through veRL's own code (verl 0.9.1 in the throwaway venv from scripts/install_verl.sh;
veRL pulls ray/hydra/tensordict, which stay out of the main environment).

Two levels: (1) every row builds veRL's ``AgentLoopOutput`` and its ``as_dict()`` tensors; (2) the
rows go through veRL's classic padding/batching (``AgentLoopWorker._agent_loop_postprocess`` then
``_postprocess``) into the ``DataProto`` the PPO/GRPO trainer consumes. The worker is built without
Ray, setting only the attributes those two methods read (prompt/response lengths, tokenizer, no
processor, no reward workers, no distillation)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from openforgerl.export import classic_output, v1_outputs, write_jsonl
from openforgerl.trajectory import ReconstructionResult

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = ROOT / ".venv-verl" / "bin" / "python"
TOKENIZER = ROOT / "src" / "openforgerl" / "assets" / "tiny" / "tokenizer.json"
PROMPT_LEN, RESPONSE_LEN = 256, 512

_VERL = """
import asyncio, json, sys
from types import SimpleNamespace
import verl
from transformers import PreTrainedTokenizerFast
from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput, AgentLoopWorker

rows_path, tokenizer_path = sys.argv[1], sys.argv[2]
prompt_len, response_len = int(sys.argv[3]), int(sys.argv[4])
rows = [json.loads(line) for line in open(rows_path)]
outputs = [AgentLoopOutput(**row, metrics=AgentLoopMetrics()) for row in rows]
as_dicts = [o.as_dict() for o in outputs]

worker = object.__new__(AgentLoopWorker)
worker.rollout_config = SimpleNamespace(prompt_length=prompt_len, response_length=response_len)
worker.tokenizer = PreTrainedTokenizerFast(tokenizer_file=tokenizer_path, pad_token="<|endoftext|>")
worker.processor = None
worker.reward_loop_worker_handles = None
worker.distillation_enabled = False
worker.mm_processor_kwargs = None

async def batch():
    padded = [await worker._agent_loop_postprocess(o, validate=False, raw_prompt=[]) for o in outputs]
    return worker._postprocess(padded, input_non_tensor_batch=None)

proto = asyncio.run(batch())
b = proto.batch
print(json.dumps({
    "verl": verl.__version__,
    "as_dict": [{"prompts": d["prompts"].tolist(), "responses": d["responses"].tolist(),
                 "response_mask": d["response_mask"].tolist(),
                 "rollout_log_probs": d["rollout_log_probs"].tolist()} for d in as_dicts],
    "prompts": b["prompts"].tolist(), "responses": b["responses"].tolist(),
    "response_mask": b["response_mask"].tolist(), "rollout_log_probs": b["rollout_log_probs"].tolist(),
    "rm_scores_sum": b["rm_scores"].sum(dim=1).tolist(),
    "non_tensor_keys": sorted(proto.non_tensor_batch),
    "is_final_chain": proto.non_tensor_batch["is_final_chain"].tolist(),
}))
"""

needs_verl = pytest.mark.skipif(
    not VENV_PYTHON.exists(), reason="veRL venv missing: run scripts/install_verl.sh"
)


def _through_verl(rows: list[dict], tmp_path: Path) -> dict:
    path = tmp_path / "rows.jsonl"
    write_jsonl(rows, path)
    cmd = [str(VENV_PYTHON), "-c", _VERL, str(path), str(TOKENIZER), str(PROMPT_LEN), str(RESPONSE_LEN)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr[-4000:]
    built = json.loads(proc.stdout.strip().splitlines()[-1])
    assert built["verl"].startswith("0.9")
    return built


def _check_batch(rows: list[dict], built: dict) -> None:
    for i, row in enumerate(rows):
        n, p = len(row["response_ids"]), len(row["prompt_ids"])
        assert built["as_dict"][i]["prompts"] == row["prompt_ids"]
        assert built["as_dict"][i]["responses"] == row["response_ids"]
        assert built["prompts"][i][PROMPT_LEN - p :] == row["prompt_ids"], "left-padded prompt"
        assert built["responses"][i][:n] == row["response_ids"], "right-padded response"
        assert built["response_mask"][i] == row["response_mask"] + [0] * (RESPONSE_LEN - n)
        assert built["rollout_log_probs"][i][:n] == pytest.approx(
            row["response_logprobs"], abs=1e-6
        )  # float32
        assert built["rm_scores_sum"][i] == pytest.approx(row["reward_score"])
    assert {"group_uid", "rollout_id", "is_final_chain", "min_global_steps", "__num_turns__"} <= set(
        built["non_tensor_keys"]
    )
    assert "uid" not in built["non_tensor_keys"], "veRL's trainer owns `uid`"


@needs_verl
def test_v1_rows_batch_in_verl(results: list[ReconstructionResult], tmp_path: Path) -> None:
    rows = [row for r in results for row in v1_outputs(r)]
    assert all("reward_extra_info" in r["extra_fields"] for r in rows), "V1 copies it from the final output"
    built = _through_verl(rows, tmp_path)
    _check_batch(rows, built)
    assert built["is_final_chain"] == [r["extra_fields"]["is_final_chain"] for r in rows]


@needs_verl
def test_classic_rows_batch_in_verl(results: list[ReconstructionResult], tmp_path: Path) -> None:
    rows = [classic_output(r) for r in results]
    built = _through_verl(rows, tmp_path)
    _check_batch(rows, built)
    assert sum(built["response_mask"][2]) == 0, "the dropped rollout's placeholder trains nothing"
