"""Our veRL agent loop end to end, as far as veRL runs on this CPU machine (see verl_driver.py).

In the veRL venv (scripts/install_verl.sh), one subprocess: veRL's Hydra config composed with
examples/verl/run_grpo.sh's overrides (V1 and classic), our loop registered by ``import verl`` via
``VERL_USE_EXTERNAL_MODULES``, built by ``hydra.utils.instantiate`` from examples/verl/agent_loop.yaml,
given veRL's ``LLMServerClient`` whose (in-process) ``GlobalRequestLoadBalancer`` knows one server: a
scripted engine over HTTP (the model's decisions are the only double: it replays each task's gold
actions). Real gateway, real bubblewrap sandboxes, the real ``zero`` harness, the Claw services and
verifiers. Then veRL's own classic batching and its ``grpo`` vs our ``openforgerl_grpo``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from openforgerl.engines.chat_format import ChatFormat
from openforgerl.engines.scripted import scripted_logprob
from openforgerl.envs.claw.suite import CLAW_SUITE

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = ROOT / ".venv-verl" / "bin" / "python"
RUN_SCRIPT = ROOT / "examples" / "verl" / "run_grpo.sh"
TASKS = [CLAW_SUITE / "easy-mail-send-01", CLAW_SUITE / "easy-todo-add-01"]

pytestmark = [
    pytest.mark.skipif(not VENV_PYTHON.exists(), reason="veRL venv missing: run scripts/install_verl.sh"),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
    pytest.mark.timeout(900),
]


def overrides(mode: str) -> list[str]:
    env = {**os.environ, "DRY_RUN": "1", "MODE": mode, "HARNESS": "zero"}  # the driver runs the zero harness
    out = subprocess.run(["bash", str(RUN_SCRIPT)], env=env, capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("verl-loop")
    spec = {
        "tasks": [str(t) for t in TASKS],
        "overrides_v1": overrides("v1"),
        "overrides_classic": overrides("classic"),
        "work": str(work),
    }
    env = {**os.environ, "VERL_USE_EXTERNAL_MODULES": "openforgerl.compose.verl_loop"}
    proc = subprocess.run(
        [str(VENV_PYTHON), str(Path(__file__).with_name("verl_driver.py")), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=840,
        env=env,
        cwd=str(ROOT),
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check_exact_tokens(out: dict[str, Any]) -> None:
    """Mask-1 runs are whole completions: each logprob is the scripted engine's for (token, position)."""
    ids, mask, lps = out["response_ids"], out["response_mask"], out["response_logprobs"]
    assert len(ids) == len(mask) == len(lps) and 0 in mask and 1 in mask
    start = None
    for j, (tok, m, lp) in enumerate(zip(ids, mask, lps, strict=True)):
        if m == 0:
            start = None
            assert lp == 0.0
            continue
        start = j if start is None else start
        assert lp == pytest.approx(scripted_logprob(tok, j - start), abs=1e-6)


def test_loop_and_estimator_register_when_verl_imports_our_module(report: dict[str, Any]) -> None:
    assert report["registered_at_import"] and report["estimator"]


def test_loop_talks_to_the_server_the_server_manager_knows(report: dict[str, Any]) -> None:
    assert len(report["engine_urls"]) == 1 and report["engine_urls"][0].startswith("http://127.0.0.1:")
    assert report["engine_calls"] == 4, (
        "two solved rollouts of two model calls each; faulted calls produce nothing"
    )


def test_v1_returns_a_list_of_verls_own_outputs_final_chain_last(report: dict[str, Any]) -> None:
    outs = report["v1"]
    assert len(outs) >= 1 and all(o["is_verl_output"] for o in outs)
    assert outs[0]["type"] == "verl.experimental.agent_loop.agent_loop.AgentLoopOutput"
    assert [o["extra_fields"]["is_final_chain"] for o in outs] == [False] * (len(outs) - 1) + [True]
    final = outs[-1]
    assert final["reward_score"] == 1.0 and final["num_turns"] >= 2
    fields = final["extra_fields"]
    assert fields["task_id"] == "claw/easy-mail-send-01" and fields["harness"] == "zero"
    assert fields["min_global_steps"] == fields["max_global_steps"] == 7, (
        "veRL's global_steps, for V1 staleness"
    )
    assert "reward_extra_info" in fields and final["generate_sequences"] > 0
    prompt = ChatFormat.load().decode(final["prompt_ids"])
    assert "mail" in prompt.lower()
    for out in outs:
        _check_exact_tokens(out)


def test_classic_returns_one_output(report: dict[str, Any]) -> None:
    out = report["classic"]
    assert out["is_verl_output"] and out["reward_score"] == 1.0
    assert out["extra_fields"]["task_id"] == "claw/easy-todo-add-01" and not out["extra_fields"]["dropped"]
    _check_exact_tokens(out)


def test_engine_fault_drops_the_rollout(report: dict[str, Any]) -> None:
    assert report["v1_fault"] == [], "V1: an infra-dropped rollout is an empty list (a real drop)"
    placeholder = report["classic_fault"]
    assert placeholder["is_verl_output"] and set(placeholder["response_mask"]) == {0}
    assert placeholder["extra_fields"]["dropped"] is True
    assert placeholder["extra_fields"]["drop_reason"].startswith("infra:"), placeholder["extra_fields"]


def test_classic_batch_and_mask_aware_estimator(report: dict[str, Any]) -> None:
    batch = report["batch"]
    assert batch["responses_shape"] == [3, 8192], "veRL pads to rollout.response_length"
    assert batch["mask_sums"][1] == 0 and batch["mask_sums"][0] > 0
    assert batch["dropped"] == [False, True, False]
    assert batch["rm_sums"] == [1.0, 0.0, 1.0]
    # veRL's grpo counts the placeholder's 0 in the group mean: both solved rollouts get a spurious
    # positive advantage. Ours excludes it: two equal rewards -> no signal.
    assert all(a > 0 for a in (batch["adv_verl_grpo"][0], batch["adv_verl_grpo"][2]))
    assert batch["adv_ours"] == [0.0, 0.0, 0.0]
