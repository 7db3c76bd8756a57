"""One registry, three surfaces (function tools, CLI, MCP), aligned with the tiny model's SFT data."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

from openforgerl.env.world import OPS
from openforgerl.env.world_tools import TOOLS, function_tools, get_tool, tools_for
from openforgerl.envs.claw.cli import build_parser, usage_lines

ROOT = Path(__file__).resolve().parents[2]


def test_every_tool_has_an_operation_and_a_cli_command() -> None:
    assert {t.name for t in TOOLS} == set(OPS)
    parser = build_parser()
    for tool in TOOLS:
        argv = [tool.service, tool.command]
        for p in tool.params:
            if p.required:
                argv += [f"--{p.name.replace('_', '-')}", "x"]
        ns = parser.parse_args(argv)
        assert ns.tool == tool.name


def test_sft_tool_schemas_equal_the_tiny_model_training_data() -> None:
    script = ROOT / "scripts" / "build_tiny_model.py"
    if not script.is_file():
        pytest.skip("scripts/build_tiny_model.py not present")
    sft = runpy.run_path(str(script), run_name="sft_tools")["TOOLS"]
    for name in ("write_file", "todo_add", "mail_send"):
        ours = get_tool(name)
        assert ours is not None
        assert ours.openai_tool() == sft[name], name
    for name in ("read_file", "todo_list", "mail_list"):  # the SFT distractors exist with the same names
        ours = get_tool(name)
        assert ours is not None
        required = set(ours.input_schema()["required"])
        assert required == set(sft[name]["function"]["parameters"]["required"])


def test_check_args_explains_the_problem() -> None:
    send = get_tool("mail_send")
    assert send is not None
    assert send.check_args({"to": "a", "subject": "s", "body": "b"}) is None
    assert "missing required argument(s): body" in (send.check_args({"to": "a", "subject": "s"}) or "")
    assert "unknown argument 'cc'" in (
        send.check_args({"to": "a", "subject": "s", "body": "b", "cc": "x"}) or ""
    )
    create = get_tool("calendar_create")
    assert create is not None
    assert "must be of type array" in (
        create.check_args({"title": "t", "start": "s", "end": "e", "attendees": "bob"}) or ""
    )


def test_tools_for_services_and_names() -> None:
    assert {t.service for t in tools_for(services=["mail"])} == {"mail"}
    assert [t.name for t in tools_for(names=["todo_add", "write_file"])] == ["todo_add", "write_file"]
    with pytest.raises(KeyError):
        tools_for(names=["nope"])
    fns = function_tools(tools_for(names=["mail_send"]))
    assert fns[0]["function"]["parameters"]["required"] == ["to", "subject", "body"]


def test_usage_lines_show_required_and_optional_flags() -> None:
    line = usage_lines(tools_for(names=["calendar_create"]))[0]
    assert line.startswith("openforgerl-claw calendar create --title TITLE --start START --end END")
    assert "[--attendees ATTENDEES ...]" in line
