"""The adapter that launches `zero` inside a sandbox: the same Python that runs openforgerl, no install."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from openforgerl.harness._common import base_env
from openforgerl.harness.base import HarnessContext, HarnessLaunch
from openforgerl.harness.generic import gateway_env
from openforgerl.records import WireProtocol


class ZeroHarness:
    name = "zero"
    version = "1"
    protocol = WireProtocol.CHAT

    def __init__(
        self,
        wall_clock_s: float = 600.0,
        max_turns: int = 30,
        call_timeout_s: float = 300.0,
        builtins: str = "write_file,read_file,bash",
        python: str = sys.executable,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> None:
        self.wall_clock_s = wall_clock_s
        self.max_turns = max_turns
        self.call_timeout_s = call_timeout_s
        self.builtins = builtins
        self.python = python
        self.sampling = {"--max-tokens": max_tokens, "--temperature": temperature}

    def install(self, cache_dir: Path) -> None:
        """Nothing to install: zero ships with openforgerl."""

    def launch(self, ctx: HarnessContext, cache_dir: Path) -> HarnessLaunch:
        tools_path = f"{ctx.home}/zero-tools.json"
        transcript = f"{ctx.home}/zero-transcript.jsonl"
        spec = {"tools": list(ctx.tools), "service_url": ctx.tool_service_url}
        argv = [
            self.python,
            "-m",
            "openforgerl.harness.zero",
            ctx.instruction,
            "--model",
            ctx.model,
            "--tools-json",
            tools_path,
            "--workdir",
            ctx.workdir,
            "--builtins",
            self.builtins,
            "--max-turns",
            str(min(self.max_turns, ctx.max_turns or self.max_turns)),
            "--wall-clock",
            str(self.wall_clock_s),
            "--call-timeout",
            str(self.call_timeout_s),
            "--transcript",
            transcript,
        ]
        argv += [arg for flag, v in self.sampling.items() if v is not None for arg in (flag, str(v))]
        # zero runs the task's tools itself, so it gets the environment the task gives its MCP servers
        # (e.g. the tool service URL) when the context names no service URL.
        mcp_env = {k: v for s in ctx.mcp_servers for k, v in s.env.items()}
        env = {**mcp_env, **base_env(ctx), **gateway_env(ctx)}
        files = {tools_path: json.dumps(spec).encode()}
        return HarnessLaunch(argv=argv, env=env, files=files, outputs=[transcript])
