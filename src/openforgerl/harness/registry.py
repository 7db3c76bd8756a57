"""Harness names -> adapters. Names are what configs, CLIs and `RolloutRecord.harness` use."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from openforgerl.harness.base import HarnessAdapter
from openforgerl.harness.browser_use import BrowserUseHarness
from openforgerl.harness.claude_code import ClaudeCodeHarness
from openforgerl.harness.codex import CodexHarness
from openforgerl.harness.generic import CommandHarness
from openforgerl.harness.mini_swe_agent import MiniSweAgentHarness
from openforgerl.harness.openclaw import OpenClawHarness
from openforgerl.harness.opencode import OpencodeHarness
from openforgerl.harness.qwen_code import QwenCodeHarness
from openforgerl.harness.ui_tars import UiTarsHarness
from openforgerl.harness.zero.adapter import ZeroHarness
from openforgerl.harness.zero_gui.adapter import ZeroGuiHarness
from openforgerl.registry import Registry

HARNESSES: Registry[Callable[..., HarnessAdapter]] = Registry("harness")
"""Harness name -> factory(**options) -> adapter."""

for _name, _factory, _aliases in (
    ("codex", CodexHarness, ()),
    ("claude_code", ClaudeCodeHarness, ("claude", "claude-code")),
    ("openclaw", OpenClawHarness, ()),
    ("openclaw-completions", partial(OpenClawHarness, api="openai-completions"), ()),
    ("openclaw-responses", partial(OpenClawHarness, api="openai-responses"), ()),
    ("openclaw-messages", partial(OpenClawHarness, api="anthropic-messages"), ()),
    ("qwen_code", QwenCodeHarness, ("qwen", "qwen-code")),
    ("opencode", OpencodeHarness, ()),
    ("mini_swe_agent", MiniSweAgentHarness, ("mini", "mini-swe-agent")),
    ("zero", ZeroHarness, ()),
    ("zero-gui", ZeroGuiHarness, ()),
    ("ui-tars", UiTarsHarness, ()),
    ("browser-use", BrowserUseHarness, ()),
    ("command", CommandHarness, ()),
):
    HARNESSES.register(_name, _factory, aliases=_aliases)
INSTALLABLE = (
    "codex",
    "claude_code",
    "qwen_code",
    "openclaw",
    "opencode",
    "mini_swe_agent",
    "ui-tars",
    "browser-use",
)


def register_harness(
    name: str, factory: Callable[..., HarnessAdapter], *, aliases: tuple[str, ...] = (), replace: bool = False
) -> None:
    """Serve `name` (configs' `harness`, `--harness`, `RolloutRecord.harness`) with `factory(**options)`;
    a name or alias already served is an error unless `replace`."""
    HARNESSES.register(name, factory, aliases=aliases, replace=replace)


def harness_names() -> list[str]:
    return sorted(HARNESSES.names())


def get_harness(name: str, **options: Any) -> HarnessAdapter:
    """The adapter for `name` (aliases accepted); `options` go to its constructor (e.g. openclaw `api`).
    An unknown name is an `UnknownNameError` naming the nearest harness."""
    return HARNESSES.get(name)(**options)
