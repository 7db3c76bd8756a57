"""Every user mistake gets one line naming what to fix, never a traceback (the real console script)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).with_name("openforgerl"))
TASK = ROOT / "src" / "openforgerl" / "envs" / "claw" / "suite" / "tasks" / "easy-todo-add-01"


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENFORGERL_DEBUG"}
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120, cwd=str(cwd), env=env)


def _files(tmp: Path) -> None:
    (tmp / "bad.yaml").write_text("model: tiny\nsteps: [1,\n")
    (tmp / "typo.yaml").write_text("model: tiny\nstepz: 3\n")
    (tmp / "empty").mkdir()
    (tmp / "calls.db").write_bytes(b"")


CASES = [
    (
        "unknown harness",
        ["rollout", "--tasks", str(TASK), "--harness", "frobnicate", "--n", "1"],
        "unknown harness 'frobnicate'",
    ),
    ("harness typo is not an install", ["harness", "frobnicate"], "unknown action 'frobnicate'"),
    (
        "unknown backend",
        ["rollout", "--tasks", str(TASK), "--backend", "frobnicate", "--n", "1"],
        "unknown backend",
    ),
    ("missing config file", ["train", "nope.yaml"], "no such file or folder: nope.yaml"),
    ("bad YAML", ["train", "bad.yaml"], "bad.yaml: not valid YAML (line 3"),
    ("mistyped config key", ["train", "typo.yaml"], "error: typo.yaml: unknown key stepz"),
    ("folder with no tasks", ["tasks", "validate", "empty"], "no task could be validated"),
    (
        "import of a folder in no known format",
        ["tasks", "import", "empty", "out"],
        "cannot tell the task format",
    ),
    ("import of a missing folder", ["tasks", "import", "nothere", "out"], "no such file or folder"),
    (
        "export suffix vs format",
        ["export", "--store", "calls.db", "--format", "jsonl", "--out", "rows.parquet"],
        "name it rows.jsonl",
    ),
    (
        "eval of a missing task folder",
        ["eval", "--tasks", "nothere", "--scripted-oracle", "1"],
        "no task folder at nothere",
    ),
    (
        "rollout of a missing task folder",
        ["rollout", "--tasks", "nothere", "--n", "1"],
        "no task folder at nothere",
    ),
    ("list of a missing task folder", ["tasks", "list", "nothere"], "no task folder at nothere"),
    (
        "missing podman image",
        [
            "rollout",
            "--tasks",
            str(TASK),
            "--backend",
            "podman",
            "--image",
            "openforgerl/not-built:0",
            "--n",
            "1",
        ],
        "is not present in podman's store",
    ),
    (
        "unknown builtin suite",
        ["tasks", "list", "builtin:nope"],
        "unknown task suite 'builtin:nope' (known: builtin:claw",
    ),
]


@pytest.mark.parametrize(("what", "args", "hint"), CASES, ids=[c[0] for c in CASES])
def test_user_mistake_is_one_clear_line(tmp_path: Path, what: str, args: list[str], hint: str) -> None:
    _files(tmp_path)
    out = _run(*args, cwd=tmp_path)
    text = out.stdout + out.stderr
    assert out.returncode in (1, 2), (what, out.returncode, text[-2000:])
    assert "Traceback" not in text, text[-3000:]
    assert hint in " ".join(text.split()), text[-2000:]  # rich may wrap a long line


def test_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = _run(
            "gateway",
            "--engine",
            "http://127.0.0.1:9",
            "--port",
            str(port),
            "--admin-port",
            "0",
            "--store",
            str(tmp_path / "c.db"),
            cwd=tmp_path,
        )
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-3000:]
    lines = [line for line in out.stderr.splitlines() if line.strip() and "error:" in line]
    assert len(lines) == 1 and "another server already listens there" in lines[0], out.stderr[-2000:]
    assert not (tmp_path / "c.db").exists(), "a start that fails on its port creates no call log"


def test_builtin_suites_work_wherever_a_task_folder_does(tmp_path: Path) -> None:
    """`builtin:claw` on the command line, as in a config: the same tasks as the shipped folder."""
    from openforgerl.envs.claw.suite import CLAW_SUITE
    from openforgerl.tasks.format import find_tasks

    out = _run("tasks", "list", "builtin:claw", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    listed = [line.split("\t")[0] for line in out.stdout.splitlines()]
    assert len(listed) == len(find_tasks(CLAW_SUITE)) > 50
    assert "claw/easy-todo-add-01" in listed


def test_engine_port_in_use_is_one_line_before_the_weights_load(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        out = _run("engine", "--model", "tiny", "--port", str(taken.getsockname()[1]), cwd=tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert "another server already listens there" in out.stderr
    assert "serving on" not in out.stderr and "budget" not in out.stderr, "it failed before loading the model"


def test_engine_help_is_whole_sentences(tmp_path: Path) -> None:
    out = subprocess.run(
        [CLI, "engine", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "120"},
    )
    text = " ".join(out.stdout.replace("│", " ").split())  # rich wraps option help inside a box
    assert out.returncode == 0 and "Serve a local model behind vLLM's token API." in text
    assert "--model" in text and "vision-language model) or `smollm2`" in text and "--memory-budget" in text


def test_the_documented_config_error_is_the_real_output(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    documented = page.split("stops with one line:\n\n```\n", 1)[1].split("\n```", 1)[0]
    (tmp_path / "c.yaml").write_text("model: tiny\nrollout: {grup_size: 4}\n")
    out = _run("train", "c.yaml", cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == documented, (out.stderr, documented)


def test_calibrate_without_an_admin_token_is_one_line(tmp_path: Path) -> None:
    """`tasks calibrate --gateway URL` with no admin token names the fix before any rollout starts."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENFORGERL_DEBUG", "OPENFORGERL_ADMIN_TOKEN")}
    out = subprocess.run(
        [CLI, "tasks", "calibrate", str(TASK), "--gateway", "http://127.0.0.1:9", "--k", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(tmp_path),
        env=env,
    )
    text = out.stdout + out.stderr
    assert out.returncode == 2 and "Traceback" not in text, text[-3000:]
    assert "no admin token for http://127.0.0.1:9" in " ".join(text.split()), text
