"""Synthesis reaches Claw's tool environments and task writer through entry points, not imports."""

from __future__ import annotations

from pathlib import Path

import pytest

from openforgerl.synth.loading import load_env
from openforgerl.synth.plugins import TOOL_ENVS, WRITER, WRITERS, TaskWriter, _tool_env, _writer


def test_the_claw_tool_environments_and_writer_come_from_the_claw_environment() -> None:
    assert {"claw", "claw-family"} <= set(TOOL_ENVS.names())
    for name in ("claw", "claw-family"):
        assert TOOL_ENVS.get(name).__module__ == "openforgerl.envs.claw.synth"
        assert load_env(name).name == name
    writer = WRITERS.get(WRITER)
    assert writer.write.__module__ == "openforgerl.envs.claw.drafts"
    texts, golds = writer.shipped()
    assert texts and golds


def test_an_unknown_env_is_the_same_one_line_as_ever(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^--env 'clow': not 'claw', 'claw-family' or a file$"):
        load_env("clow")


def test_entry_points_of_the_wrong_shape_are_refused() -> None:
    with pytest.raises(TypeError, match="names int, not a function"):
        _tool_env(3)
    with pytest.raises(TypeError, match="names function, not a TaskWriter"):
        _writer(load_env)
    shipped = WRITERS.get(WRITER)  # control: the right shapes are adopted as they are
    assert _writer(shipped) is shipped and isinstance(shipped, TaskWriter)
    assert _tool_env(load_env) is load_env
