"""Harness names -> adapters. Names are what configs, CLIs and `RolloutRecord.harness` use."""

from __future__ import annotations

from collections.abc import Callable
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

FACTORIES: dict[str, Callable[..., HarnessAdapter]] = {
    "codex": CodexHarness,
    "claude_code": ClaudeCodeHarness,
    "openclaw": OpenClawHarness,
    "openclaw-completions": lambda **kw: OpenClawHarness(api="openai-completions", **kw),
    "openclaw-responses": lambda **kw: OpenClawHarness(api="openai-responses", **kw),
    "openclaw-messages": lambda **kw: OpenClawHarness(api="anthropic-messages", **kw),
    "qwen_code": QwenCodeHarness,
    "opencode": OpencodeHarness,
    "mini_swe_agent": MiniSweAgentHarness,
    "zero": ZeroHarness,
    "zero-gui": ZeroGuiHarness,
    "ui-tars": UiTarsHarness,
    "browser-use": BrowserUseHarness,
    "command": CommandHarness,
}
ALIASES = {"claude": "claude_code", "claude-code": "claude_code", "qwen": "qwen_code", "qwen-code": "qwen_code",
           "mini": "mini_swe_agent", "mini-swe-agent": "mini_swe_agent"}
INSTALLABLE = ("codex", "claude_code", "qwen_code", "openclaw", "opencode", "mini_swe_agent", "ui-tars", "browser-use")


def register_harness(name: str, factory: Callable[..., HarnessAdapter], *, aliases: tuple[str, ...] = ()) -> None:
    """Serve `name` (configs' `harness`, `--harness`, `RolloutRecord.harness`) with `factory(**options)`."""
    FACTORIES[name] = factory
    ALIASES.update({alias: name for alias in aliases})


def harness_names() -> list[str]:
    return sorted(FACTORIES)


def get_harness(name: str, **options: Any) -> HarnessAdapter:
    """The adapter for `name` (aliases accepted); `options` go to its constructor (e.g. openclaw `api`)."""
    key = ALIASES.get(name, name)
    if key not in FACTORIES:
        from openforgerl.errors import UnknownNameError

        raise UnknownNameError(f"unknown harness {name!r}; known: {', '.join(harness_names())}")
    return FACTORIES[key](**options)
