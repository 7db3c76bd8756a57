"""`pip install openforgerl` without extras, into a clean venv: every command that needs no model works.

The venv is created here from nothing (no system site-packages), the package installed non-editable from
this checkout with only its base dependencies, constrained to locks/project.txt. torch and transformers
must be absent; `gateway`, `export`, `rollout`, `eval`, `tasks`, `harness` start; `engine` and `train`
print one line naming the extra. Then the base install does real work: the gateway it serves records a
call made through it to an external engine (our local engine, run by this test process), `export` turns
the call log into rows, and `tasks list` reads the bundled suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "src" / "openforgerl" / "envs" / "claw" / "suite" / "tasks"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("base") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "-c", str(ROOT / "locks" / "project.txt"), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=800,
    )
    return venv


def _cli(venv: Path, *args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(venv / "bin" / "openforgerl"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=kw.get("cwd", "/"),
    )


def test_base_install_has_no_torch_or_transformers(base_venv: Path) -> None:
    probe = "import importlib.util as u; print([m for m in ('torch', 'transformers') if u.find_spec(m)])"
    out = subprocess.run([str(base_venv / "bin" / "python"), "-c", probe], capture_output=True, text=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "command", ["gateway", "export", "rollout", "eval", "tasks", "harness", "engine", "train"]
)
def test_every_command_starts(base_venv: Path, command: str) -> None:
    out = _cli(base_venv, command, "--help")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["engine", "--model", "tiny"], "engine"),
        (["train", str(ROOT / "examples" / "quickstart.yaml")], "train"),
    ],
)
def test_model_commands_name_their_extra_in_one_line(base_venv: Path, args: list[str], extra: str) -> None:
    out = _cli(base_venv, *args)
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"pip install 'openforgerl[{extra}]'" in lines[0], out.stderr[-2000:]


def test_tasks_and_harness_listing(base_venv: Path) -> None:
    tasks = _cli(base_venv, "tasks", "list", str(SUITE))
    assert tasks.returncode == 0 and "easy-mail-send-01" in tasks.stdout, tasks.stderr[-2000:]
    harnesses = _cli(base_venv, "harness", "list")
    assert harnesses.returncode == 0 and "codex" in harnesses.stdout, harnesses.stderr[-2000:]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(url)


def test_gateway_and_export_from_the_base_install(base_venv: Path, tmp_path: Path) -> None:
    """The base gateway in front of an external engine records a real call; base `export` reads it."""
    from openai import OpenAI

    from openforgerl.engines.local.background import BackgroundServer

    engine = BackgroundServer.start("tiny")
    port, admin_port = _free_port(), _free_port()
    store, token_file = tmp_path / "calls.db", tmp_path / "admin.token"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    gateway = subprocess.Popen(
        [
            str(base_venv / "bin" / "openforgerl"),
            "gateway",
            "--engine",
            engine.url,
            "--port",
            str(port),
            "--admin-port",
            str(admin_port),
            "--store",
            str(store),
            "--admin-token-file",
            str(token_file),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait(f"http://127.0.0.1:{port}/healthz")
        token = token_file.read_text().strip()
        req = urllib.request.Request(
            f"http://127.0.0.1:{admin_port}/rollouts",
            data=b'{"task_id": "t"}',
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            opened = json.loads(r.read())
        client = OpenAI(
            base_url=opened["openai_base_url"], api_key=opened["api_key"], max_retries=0, timeout=120
        )
        out = client.chat.completions.create(
            model="tiny", max_tokens=8, messages=[{"role": "user", "content": "Add a todo 'milk'."}]
        )
        assert out.choices[0].finish_reason in ("stop", "length", "tool_calls")
    finally:
        gateway.terminate()
        gateway.wait(timeout=30)
        engine.close()
    rows = tmp_path / "rows.jsonl"
    exported = _cli(base_venv, "export", "--store", str(store), "--format", "jsonl", "--out", str(rows))
    assert exported.returncode == 0, exported.stderr[-3000:]
    assert rows.exists()
