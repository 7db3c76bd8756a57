"""Hostile task and tool documents through the real CLI: one line naming the problem, exit 2, no traceback.

`tasks synthesize --env FILE` reads an MCP / OpenAPI tool document; `tasks import FILE` reads a task set and
sniffs what a single `.json` is from its first bytes. Each hostile document below printed a Python traceback
before (a RecursionError, a TypeError, an AttributeError, and a minute of parsing 100 MB); the controls show
the same commands still import a valid document.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TAU2_TASKS = ROOT / "tests" / "envs" / "data" / "tau2" / "airline" / "tasks.json"
NOTE_TOOL = {
    "name": "notes_add",
    "description": "Add a note.",
    "inputSchema": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
}
VALID_MCP = {
    "tools": [
        NOTE_TOOL,
        {
            "name": "notes_list",
            "description": "List notes.",
            "inputSchema": {"type": "object", "properties": {}},
        },
    ]
}


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENFORGERL_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "openforgerl.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=str(cwd),
        env=env,
    )


def _write_big(path: Path, size: int = 100 * 2**20) -> None:
    """A well-formed MCP tools/list of `size` bytes: every tool valid, only the whole too large."""
    one = json.dumps({**NOTE_TOOL, "description": "Add a note. " + "x" * 4000})
    count = size // (len(one) + 1) + 1
    path.write_text('{"tools": [' + ",".join([one] * count) + "]}")


def _hostile(tmp: Path) -> dict[str, Path]:
    docs = {
        "nested 5000 deep": '{"tools": ' + "[" * 5000 + "]" * 5000 + "}",
        "tools is not a list": json.dumps({"tools": {"notes_add": NOTE_TOOL}}),
        "properties is a list": json.dumps(
            {"tools": [{**NOTE_TOOL, "inputSchema": {"properties": ["title"]}}]}
        ),
    }
    out = {}
    for what, text in docs.items():
        out[what] = tmp / f"{what.replace(' ', '_')}.json"
        out[what].write_text(text)
    out["100 MB"] = tmp / "big.json"
    _write_big(out["100 MB"])
    return out


SYNTH_HINTS = {
    "nested 5000 deep": "nested more than 64 levels",
    "tools is not a list": "tools: expected a list",
    "properties is a list": "tools[0].inputSchema.properties: expected an object, got a list",
    "100 MB": "100.0 MiB; tool documents over 32 MiB are refused",
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return _hostile(tmp_path_factory.mktemp("hostile"))


def _one_error_line(out: subprocess.CompletedProcess[str]) -> str:
    text = out.stdout + out.stderr
    assert out.returncode == 2, (out.returncode, text[-2000:])
    assert "Traceback" not in text, text[-3000:]
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), text[-2000:]
    return lines[0]


@pytest.mark.parametrize("what", list(SYNTH_HINTS))
def test_synthesize_refuses_a_hostile_tool_document_in_one_line(
    hostile: dict[str, Path], tmp_path: Path, what: str
) -> None:
    line = _one_error_line(
        _cli(
            "tasks",
            "synthesize",
            "--env",
            str(hostile[what]),
            "--out",
            str(tmp_path / "o"),
            "--n",
            "2",
            cwd=tmp_path,
        )
    )
    assert hostile[what].name in line and SYNTH_HINTS[what] in line, line
    assert not (tmp_path / "o").exists()  # refused before anything is written


@pytest.mark.parametrize("what", list(SYNTH_HINTS))
def test_import_points_a_tool_document_at_synthesize_in_one_line(
    hostile: dict[str, Path], tmp_path: Path, what: str
) -> None:
    line = _one_error_line(_cli("tasks", "import", str(hostile[what]), str(tmp_path / "o"), cwd=tmp_path))
    assert "is a tool document" in line and "tasks synthesize --env" in line, line


@pytest.mark.parametrize("what", list(SYNTH_HINTS))
def test_import_as_tau2_of_a_hostile_document_is_one_line(
    hostile: dict[str, Path], tmp_path: Path, what: str
) -> None:
    line = _one_error_line(
        _cli("tasks", "import", str(hostile[what]), str(tmp_path / "o"), "--format", "tau2", cwd=tmp_path)
    )
    assert f"{hostile[what].name}: not a valid tau2 task file" in line, line


def test_import_of_a_deeply_nested_task_list_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "tasks.json").write_text("[" * 5000 + "]" * 5000)
    line = _one_error_line(_cli("tasks", "import", "tasks.json", "o", cwd=tmp_path))
    assert "not a valid tau2 task file (RecursionError" in line, line


def test_control_a_valid_tool_document_synthesizes(tmp_path: Path) -> None:
    (tmp_path / "tools.json").write_text(json.dumps(VALID_MCP))
    out = _cli("tasks", "synthesize", "--env", "tools.json", "--out", "o", "--n", "2", cwd=tmp_path)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert "wrote 2 tasks" in out.stdout and (tmp_path / "o" / "synth_report.json").is_file()


def test_control_a_valid_task_set_imports(tmp_path: Path) -> None:
    out = _cli("tasks", "import", str(TAU2_TASKS), "o", cwd=tmp_path)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert "wrote" in out.stdout and any((tmp_path / "o").iterdir())


def test_control_the_size_limit_is_what_refuses_the_big_document(tmp_path: Path) -> None:
    """The 100 MB document is refused for its size alone: the same tools in a small file synthesize."""
    _write_big(tmp_path / "small.json", size=64 * 1024)
    out = _cli("tasks", "synthesize", "--env", "small.json", "--out", "o", "--n", "2", cwd=tmp_path)
    assert out.returncode == 0 and "wrote 2 tasks" in out.stdout, (out.stdout + out.stderr)[-3000:]
