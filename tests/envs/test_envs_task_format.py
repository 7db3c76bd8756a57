"""Loading task folders: good ones load, bad ones say which file, which field and why."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from openforgerl.env.contract import TaskRuntime
from openforgerl.envs.claw.oracle_policy import load_actions
from openforgerl.envs.claw.runtime import ClawTaskRuntime, claw_tool_names
from openforgerl.envs.claw.suite import claw_runtimes
from openforgerl.tasks.format import TaskFormatError, find_tasks, load_task
from openforgerl.tasks.loader import load_runtime

SUITE = Path(__file__).resolve().parents[2] / "src/openforgerl/envs/claw/suite/tasks"


def _copy(tmp_path: Path, name: str = "mail-reply-01") -> Path:
    return Path(shutil.copytree(SUITE / name, tmp_path / name))


def test_suite_task_loads() -> None:
    task = load_task(SUITE / "mail-reply-01")
    assert task.task_id == "claw/mail-reply-01"
    assert task.meta.services == ["mail"] and task.meta.split in ("train", "test")
    tools = claw_tool_names(task)
    assert "mail_reply" in tools and "write_file" in tools and "todo_add" not in tools
    assert task.budget_s == 300.0 and not task.flags


@pytest.mark.parametrize(
    ("edit", "file", "field", "why"),
    [
        (lambda r: (r / "task.toml").unlink(), "task.toml", "", "missing"),
        (lambda r: (r / "task.toml").write_text("[task\n"), "task.toml", "", "not valid TOML"),
        (
            lambda r: _sub(r / "task.toml", 'split = "train"', 'split = "dev"'),
            "task.toml",
            "metadata.openforgerl.split",
            "'train' or 'test'",
        ),
        (
            lambda r: _sub(r / "task.toml", 'services = ["mail"]', 'services = ["fax"]'),
            "task.toml",
            "metadata.openforgerl.services",
            "unknown service",
        ),
        (
            lambda r: _sub(
                r / "task.toml", "[metadata.openforgerl]", '[metadata.openforgerl]\ncolour = "red"'
            ),
            "task.toml",
            "metadata.openforgerl.colour",
            "Extra inputs",
        ),
        (lambda r: (r / "instruction.md").write_text("  \n"), "instruction.md", "", "empty"),
        (lambda r: (r / "tests" / "checks.toml").unlink(), "tests/checks.toml", "", "missing"),
        (
            lambda r: _sub(r / "tests" / "checks.toml", 'kind = "record"', 'kind = "vibes"'),
            "tests/checks.toml",
            "checks.0",
            "tag",
        ),
    ],
)
def test_bad_folders_name_file_field_and_reason(
    tmp_path: Path, edit, file: str, field: str, why: str
) -> None:
    root = _copy(tmp_path)
    edit(root)
    with pytest.raises(TaskFormatError) as err:
        load_task(root)
    assert err.value.path == root / file
    assert err.value.field.startswith(field)
    assert why in str(err.value)


def _sub(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_fault_with_unknown_tool_is_rejected(tmp_path: Path) -> None:
    root = _copy(tmp_path, "mail-reply-01-error-retry")
    _sub(root / "task.toml", 'tool = "mail_reply"', 'tool = "mail_teleport"')
    with pytest.raises(TaskFormatError, match=r"metadata\.openforgerl\.faults\.0\.tool"):
        load_task(root)


def test_runtime_surfaces(tmp_path: Path) -> None:
    rt = load_runtime(SUITE / "easy-mail-send-01-error-retry")
    assert isinstance(rt, ClawTaskRuntime)
    files = rt.files()
    assert ".claw/fixtures/mail.json" in files
    config = __import__("json").loads(files[".claw/config.json"])
    assert config["tools"] == ["write_file", "todo_add", "mail_send"]
    assert config["faults"][0]["tool"] == "mail_send"
    assert [t["function"]["name"] for t in rt.function_tools()] == ["write_file", "todo_add", "mail_send"]
    mcp = rt.mcp_servers()[0]
    assert mcp.args[-1] == "write_file,todo_add,mail_send" and mcp.env["OPENFORGERL_CLAW_URL"] == rt.url
    assert "mail send --to TO --subject SUBJECT --body BODY" in rt.shell_tools_hint()
    assert "--fixtures" in rt.service_argv() and rt.tool_service_url == rt.url
    assert isinstance(rt, TaskRuntime)


def test_quickstart_subset() -> None:
    sft = claw_runtimes(tag="sft", difficulty="easy")
    assert len(sft) == 33 and {len(load_actions(rt)) for rt in sft} == {1}
    assert {rt.task.meta.split for rt in claw_runtimes(split="test")} == {"test"}


def test_find_tasks() -> None:
    assert find_tasks(SUITE / "mail-reply-01") == [SUITE / "mail-reply-01"]
    assert len(find_tasks(SUITE)) >= 60
