"""Qwen Code (`@qwen-code/qwen-code`), headless via `qwen --yolo "task"`.

Quirks (measured):
- OpenAI Chat Completions, `stream:true` with `include_usage`; `--auth-type openai`
  plus base URL/key/model flags.
- Sends no session or rollout header: the rollout is identified by the URL path only.
- Tool results are content-part arrays; tool-call arguments are re-serialised compactly in history.
- 2-6 s to the first call. 5xx/429/drops retried, 400 fatal. A stall *after* headers hangs (> 150 s):
  `model.generationConfig.timeout` bounds each request, the orchestrator's wall clock bounds the run.
- Every headless prompt (argv, stdin or stream-json alike) goes through Qwen Code's `@<path>` file-reference
  parser (inherited from the Gemini CLI): an `@` not preceded by `\\` starts a path, and an unresolved path is
  joined back with a space, so `heidi@team.dev` reaches the model as `heidi @team.dev` (a path that exists
  in the workdir is inlined as file content instead). No escape keeps the text intact (`\\@` stops the
  parse but the backslash stays), so the instruction is passed verbatim and the rewrite is the CLI's
  (pinned by tests/harness/test_real_model.py).
- A prompt over the model's context is answered 400 (`config_error:context`); Qwen Code then sends a
  chat-compression call ("…generate the <state_snapshot>", no tools), then ends (measured with SmolLM2).
- Settings live in `$HOME/.qwen/settings.json` (usage statistics, telemetry and auto-update off there).
"""

from __future__ import annotations

from pathlib import Path

from openforgerl.harness._common import base_env, json_bytes, mcp_json, with_hint
from openforgerl.harness.base import HarnessContext, HarnessLaunch
from openforgerl.harness.install import NpmPackage, install_npm
from openforgerl.records import WireProtocol

PACKAGE = NpmPackage("qwen-code", "@qwen-code/qwen-code@0.15.10")


def settings(ctx: HarnessContext, request_timeout_ms: int) -> dict[str, object]:
    return {
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"enableAutoUpdate": False},
        "model": {"generationConfig": {"timeout": request_timeout_ms, "maxRetries": 3}},
        "mcpServers": {n: {**s, "trust": True} for n, s in mcp_json(ctx.mcp_servers).items()},
    }


class QwenCodeHarness:
    name = "qwen_code"
    version = "0.15.10"
    protocol = WireProtocol.CHAT

    def __init__(self, request_timeout_ms: int = 120_000) -> None:
        self.request_timeout_ms = request_timeout_ms

    def install(self, cache_dir: Path) -> None:
        install_npm(PACKAGE, cache_dir)

    def launch(self, ctx: HarnessContext, cache_dir: Path) -> HarnessLaunch:
        argv = [
            str(PACKAGE.bin(cache_dir, "qwen")),
            "--auth-type",
            "openai",
            "--openai-base-url",
            ctx.openai_base_url,
            "--openai-api-key",
            ctx.api_key,
            "-m",
            ctx.model,
            "--yolo",
            with_hint(ctx),
        ]
        env = {**base_env(ctx), "QWEN_TELEMETRY_ENABLED": "false", "QWEN_CODE_NO_RELAUNCH": "1"}
        files = {f"{ctx.home}/.qwen/settings.json": json_bytes(settings(ctx, self.request_timeout_ms))}
        return HarnessLaunch(argv=argv, env=env, files=files, outputs=[f"{ctx.home}/.qwen/tmp"])
