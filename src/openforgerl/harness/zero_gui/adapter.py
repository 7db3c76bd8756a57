"""The adapter that launches `zero-gui` inside a sandbox: the same Python that runs openforgerl, no install.

It talks to the task's computer service (`HarnessContext.tool_service_url`, what `GuiTaskRuntime` sets),
or to `http://127.0.0.1:8765` when the context names none.
"""

from __future__ import annotations

import sys
from pathlib import Path

from openforgerl.harness._common import base_env
from openforgerl.harness.base import HarnessContext, HarnessLaunch
from openforgerl.harness.generic import gateway_env
from openforgerl.records import WireProtocol

DEFAULT_COMPUTER_URL = "http://127.0.0.1:8765"


class ZeroGuiHarness:
    name = "zero-gui"
    version = "1"
    protocol = WireProtocol.CHAT

    def __init__(
        self,
        wall_clock_s: float = 600.0,
        max_turns: int = 30,
        call_timeout_s: float = 300.0,
        keep_screenshots: int = 3,
        prune_chunk: int = 3,
        on_malformed: str = "feedback",
        kind: str = "",
        python: str = sys.executable,
        max_tokens: int | None = None,
        temperature: float | None = None,
        prompt: str = "full",
    ) -> None:
        self.wall_clock_s = wall_clock_s
        self.max_turns = max_turns
        self.call_timeout_s = call_timeout_s
        self.keep_screenshots = keep_screenshots
        self.prune_chunk = prune_chunk
        self.on_malformed = on_malformed
        self.kind = kind
        self.python = python
        if prompt not in ("full", "compact"):
            raise ValueError(f"zero-gui prompt must be 'full' or 'compact' (got {prompt!r})")
        self.prompt = prompt
        self.sampling = {"--max-tokens": max_tokens, "--temperature": temperature}

    def install(self, cache_dir: Path) -> None:
        """Nothing to install: zero-gui ships with openforgerl."""

    def launch(self, ctx: HarnessContext, cache_dir: Path) -> HarnessLaunch:
        transcript = f"{ctx.home}/zero-gui-transcript.jsonl"
        argv = [
            self.python,
            "-m",
            "openforgerl.harness.zero_gui",
            ctx.instruction,
            "--model",
            ctx.model,
            "--computer-url",
            ctx.tool_service_url or DEFAULT_COMPUTER_URL,
            "--kind",
            self.kind,  # "": the service's
            "--keep-screenshots",
            str(self.keep_screenshots),
            "--prune-chunk",
            str(self.prune_chunk),
            "--on-malformed",
            self.on_malformed,
            "--prompt",
            self.prompt,
            "--max-turns",
            str(self.max_turns),
            "--wall-clock",
            str(self.wall_clock_s),
            "--call-timeout",
            str(self.call_timeout_s),
            "--transcript",
            transcript,
        ]
        argv += [arg for flag, v in self.sampling.items() if v is not None for arg in (flag, str(v))]
        return HarnessLaunch(argv=argv, env={**base_env(ctx), **gateway_env(ctx)}, outputs=[transcript])
