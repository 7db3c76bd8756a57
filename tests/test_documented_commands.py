"""Every command the README documents runs as written, at least to its first real step.

Each case runs the installed `openforgerl` console script of this venv (what a user types after
`bash scripts/setup.sh`) in a subprocess, with the arguments shown in the README; long jobs are cut to
their first step (`train --steps 1`), servers to their first answered request. The last test reads the
README's command table and fails when a documented subcommand has no case here.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "src" / "openforgerl" / "envs" / "claw" / "suite" / "tasks"
TASK = SUITE / "easy-todo-add-01"
CLI = str(Path(sys.executable).with_name("openforgerl"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
requires_bwrap = pytest.mark.skipif(not Path("/usr/bin/bwrap").exists(), reason="bubblewrap not installed")


def run(
    *args: str, timeout: float = 600, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(cwd or ROOT),
        env={**os.environ, **(env or {})},
    )


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post_json(url: str, body: dict, timeout: float = 120) -> dict:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def _wait_ready(url: str, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"server exited {proc.returncode}: {proc.stdout.read()[-3000:] if proc.stdout else ''}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(url)


@pytest.mark.parametrize("model", ["tiny", "smollm2"])
def test_engine_serves_its_first_answer(model: str) -> None:
    """`openforgerl engine --model tiny|smollm2 --port P`; SmolLM2's answer is content, not reasoning."""
    if model == "smollm2" and os.environ.get("OPENFORGERL_SMOLLM2") != "1":
        from openforgerl.engines.local.smollm2 import cache_dir

        if not (cache_dir() / "config.json").exists():
            pytest.skip("SmolLM2 not converted (OPENFORGERL_SMOLLM2=1 converts it)")
    port = _free_port()
    proc = subprocess.Popen(
        [CLI, "engine", "--model", model, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        _wait_ready(f"http://127.0.0.1:{port}/v1/models", proc, timeout=600)
        out = _post_json(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            {
                "model": model,
                "max_tokens": 12,
                "temperature": 0.0,
                "return_token_ids": True,
                "messages": [{"role": "user", "content": "What is the capital of France?"}],
            },
        )
        choice = out["choices"][0]
        assert choice["token_ids"] and out["prompt_token_ids"]
        if model == "smollm2":
            assert choice["message"]["content"] and not choice["message"].get("reasoning")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


@requires_bwrap
def test_train_quickstart_runs_its_first_step(tmp_path: Path) -> None:
    """The README's main job, `openforgerl train examples/quickstart.yaml`, cut to one step."""
    out = run(
        "train", "examples/quickstart.yaml", "--steps", "1", "--out-dir", str(tmp_path / "qs"), timeout=850
    )
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-3000:])
    rows = [json.loads(line) for line in (tmp_path / "qs" / "metrics.jsonl").read_text().splitlines()]
    assert any(row.get("step") == 1 for row in rows)


@requires_bwrap
def test_rollout_with_the_default_engine(tmp_path: Path) -> None:
    out = run("rollout", "--tasks", str(TASK), "--harness", "zero", "--n", "2", "--out", str(tmp_path / "r"))
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-3000:])
    assert any((tmp_path / "r").iterdir())


@requires_bwrap
def test_eval_with_the_scripted_oracle(tmp_path: Path) -> None:
    out = run(
        "eval",
        "--tasks",
        str(TASK),
        "--harness",
        "zero",
        "--trials",
        "2",
        "--scripted-oracle",
        "1.0",
        "--out",
        str(tmp_path / "e"),
    )
    assert out.returncode == 0, (out.stdout[-3000:], out.stderr[-3000:])
    report = json.loads((tmp_path / "e" / "report.json").read_text())
    assert report
    # off a terminal, a line per finished trial (a bar would be drawn only once, at the end)
    progress = [line for line in out.stderr.splitlines() if line.startswith("trials ")]
    assert [line.split()[1] for line in progress] == ["1/2", "2/2"], out.stderr[-2000:]
    assert all("elapsed" in line and "eta" in line for line in progress)


@requires_bwrap
def test_analyze_and_view_a_run(tmp_path: Path) -> None:
    """`openforgerl analyze RUN` and `openforgerl view RUN --export DIR` on an eval run directory."""
    ran = run(
        "eval",
        "--tasks",
        str(TASK),
        "--harness",
        "zero",
        "--trials",
        "2",
        "--scripted-oracle",
        "1.0",
        "--out",
        str(tmp_path / "e"),
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    analyzed = run("analyze", str(tmp_path / "e"), "--out", str(tmp_path / "a"))
    assert analyzed.returncode == 0, analyzed.stderr[-3000:]
    assert json.loads((tmp_path / "a" / "analytics.json").read_text())
    viewed = run("view", str(tmp_path / "e"), "--export", str(tmp_path / "v"))
    assert viewed.returncode == 0, viewed.stderr[-3000:]
    assert any((tmp_path / "v").rglob("*.html"))


def test_tasks_synthesize(tmp_path: Path) -> None:
    out = run("tasks", "synthesize", "--env", "claw", "--n", "20", "--out", str(tmp_path / "s"))
    assert out.returncode == 0, out.stderr[-3000:]
    assert len([p for p in (tmp_path / "s").rglob("task.toml")]) == 20


@requires_bwrap
def test_tasks_list_and_validate() -> None:
    listed = run("tasks", "list", str(SUITE))
    assert listed.returncode == 0 and "easy-todo-add-01" in listed.stdout
    validated = run("tasks", "validate", str(TASK))
    assert validated.returncode == 0, (validated.stdout[-3000:], validated.stderr[-3000:])


def test_harness_list() -> None:
    out = run("harness", "list")
    assert out.returncode == 0 and "claude_code" in out.stdout and "zero" in out.stdout


def test_export_of_an_empty_store_is_a_clear_result(tmp_path: Path) -> None:
    from openforgerl.store.sqlite import SQLiteCallStore

    SQLiteCallStore(tmp_path / "calls.db").close()
    out = run(
        "export",
        "--store",
        str(tmp_path / "calls.db"),
        "--format",
        "jsonl",
        "--out",
        str(tmp_path / "x.jsonl"),
    )
    assert out.returncode == 0, out.stderr[-3000:]


def test_gateway_starts_and_answers_health() -> None:
    port, admin_port = _free_port(), _free_port()
    proc = subprocess.Popen(
        [
            CLI,
            "gateway",
            "--engine",
            "http://127.0.0.1:9",
            "--port",
            str(port),
            "--admin-port",
            str(admin_port),
            "--store",
            "/tmp/openforgerl-doc-gw.db",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        _wait_ready(f"http://127.0.0.1:{port}/healthz", proc, timeout=60)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def test_verl_example_scripts(tmp_path: Path) -> None:
    """examples/verl: the dataset builder runs; the launcher's overrides (DRY_RUN) default to the classic
    trainer (no TransferQueue), set Qwen3's parsers and lengths that fit Codex and Claude Code."""
    built = subprocess.run(
        [sys.executable, "examples/verl/build_dataset.py", "--out", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert any((tmp_path / "d").glob("*.parquet"))

    def overrides(**env: str) -> dict[str, str]:
        out = subprocess.run(
            ["bash", "examples/verl/run_grpo.sh"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "DRY_RUN": "1", **env},
            check=True,
        )
        return dict(line.split("=", 1) for line in out.stdout.splitlines())

    default = overrides()
    assert default["trainer.use_v1"] == "false"
    assert default["++actor_rollout_ref.rollout.engine_kwargs.vllm.reasoning_parser"] == "qwen3"
    assert (
        int(default["actor_rollout_ref.rollout.prompt_length"]) >= 29_000 + 4_096
    )  # Claude Code's ~29k prompt
    assert overrides(MODE="v1")["trainer.use_v1"] == "true"
    assert int(overrides(HARNESS="codex")["actor_rollout_ref.rollout.prompt_length"]) >= 14_000 + 4_096


COVERED = {"gateway", "engine", "rollout", "eval", "export", "train", "tasks", "harness", "analyze", "view"}


def test_every_documented_subcommand_has_a_case_here() -> None:
    readme = (ROOT / "README.md").read_text()
    documented = set(re.findall(r"^\| `openforgerl (\w+)", readme, flags=re.MULTILINE))
    assert documented, "the README's command table moved"
    assert documented <= COVERED, f"documented but not run here: {sorted(documented - COVERED)}"


@requires_bwrap
def test_a_prompt_longer_than_the_context_is_a_config_error(tmp_path: Path) -> None:
    """`engine --max-model-len 256` behind `gateway`, `rollout --gateway`: zero's first prompt (~600 ids)
    does not fit, so the rollout ends `config_error:context` (not trained, not retried) and the CLI warns."""
    port, gw_port, admin_port = _free_port(), _free_port(), _free_port()
    token = tmp_path / "admin.token"
    engine = subprocess.Popen(
        [CLI, "engine", "--model", "tiny", "--port", str(port), "--max-model-len", "256"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    gateway = subprocess.Popen(
        [
            CLI,
            "gateway",
            "--engine",
            f"http://127.0.0.1:{port}",
            "--port",
            str(gw_port),
            "--admin-port",
            str(admin_port),
            "--store",
            str(tmp_path / "calls.db"),
            "--admin-token-file",
            str(token),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        _wait_ready(f"http://127.0.0.1:{port}/v1/models", engine, timeout=300)
        _wait_ready(f"http://127.0.0.1:{gw_port}/healthz", gateway, timeout=60)
        out = run(
            "rollout",
            "--tasks",
            str(TASK),
            "--harness",
            "zero",
            "--n",
            "2",
            "--gateway",
            f"http://127.0.0.1:{admin_port}",
            "--model-name",
            "tiny",
            "--out",
            str(tmp_path / "r"),
            env={"OPENFORGERL_ADMIN_TOKEN": token.read_text().strip()},
        )
    finally:
        for proc in (gateway, engine):
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)
    assert out.returncode == 1, (out.stdout[-3000:], out.stderr[-3000:])  # 1: nothing went into the batch
    records = [json.loads(line) for line in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2  # not retried
    assert {r["status"] for r in records} == {"config_error:context"}
    assert not any(r["in_batch"] for r in records)
    shown = out.stdout + out.stderr
    assert "config_error:context" in shown and "longer than the engine's" in shown.split("warning")[-1]
