"""opencode (`opencode-ai`), headless via `opencode run`.

Quirks (measured):
- Chat Completions through `@ai-sdk/openai-compatible`, `stream:true`; provider in `opencode.json`
  (`OPENCODE_CONFIG`), model ref `<provider>/<model>`.
- The first call is a **title-generation side call** on the same model (system "You are a title generator",
  no tools). The gateway marks it `side_call`; it is never trained.
- Headers `x-session-id` / `x-session-affinity` (`ses_…`).
- `opencode run` joins its message arguments with spaces and wraps any argument containing a space in
  double quotes (escaping inner `"`): one argv element `do it` reached the model as `"do it"`. Passing the
  words one by one after `--` crashed on a word that is a number (`G.includes is not a function`: yargs
  makes `24` a number; tau2's airline policy has "24 hours"). So the instruction goes in on stdin, which
  `opencode run` reads as the message when it has none: it reached the model byte for byte (quotes,
  repeated spaces, newlines, numbers and leading `-` words, measured). The file is written with the
  launch and redirected by `sh`, which `exec`s opencode (the same process tree as before).
- At startup it may fetch npm packages into `~/.npm` / `~/.cache/opencode`; the default-plugin, LSP and
  models.dev fetches are switched off here so an offline sandbox does not wait on them.
"""

from __future__ import annotations

from pathlib import Path

from openforgerl.env.contract import McpServer
from openforgerl.harness._common import base_env, json_bytes, with_hint
from openforgerl.harness.base import HarnessContext, HarnessLaunch
from openforgerl.harness.install import NpmPackage, install_npm
from openforgerl.records import WireProtocol

PACKAGE = NpmPackage("opencode", "opencode-ai@1.18.33")
PROVIDER = "openforgerl"

OPENCODE_ENV = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_TERMINAL_TITLE": "1",
}


MCP_START_MS = 120_000


def _mcp(servers: list[McpServer]) -> dict[str, object]:
    # `timeout` (ms): how long a server may take to list its tools before opencode drops it
    return {
        s.name: {
            "type": "local",
            "command": [s.command, *s.args],
            "environment": dict(s.env),
            "enabled": True,
            "timeout": MCP_START_MS,
        }
        for s in servers
    }


def config(ctx: HarnessContext) -> dict[str, object]:
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "openforgerl gateway",
        "options": {"baseURL": ctx.openai_base_url, "apiKey": ctx.api_key},
        "models": {ctx.model: {"name": ctx.model}},
    }
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {PROVIDER: provider},
        "model": f"{PROVIDER}/{ctx.model}",
        "small_model": f"{PROVIDER}/{ctx.model}",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"*": "allow"},
        "mcp": _mcp(list(ctx.mcp_servers)),
    }


def stdin_argv(opencode: str, model: str, message_file: str) -> list[str]:
    """`opencode run --model M < message_file`, with opencode `exec`ed by sh (see the module docstring)."""
    return ["/bin/sh", "-c", 'exec "$0" run --model "$1" < "$2"', opencode, model, message_file]


class OpencodeHarness:
    name = "opencode"
    version = "1.18.33"
    protocol = WireProtocol.CHAT
    lists_task_tools = True  # every request lists the task's tools (orchestrator checks the first)

    def install(self, cache_dir: Path) -> None:
        install_npm(PACKAGE, cache_dir)

    def launch(self, ctx: HarnessContext, cache_dir: Path) -> HarnessLaunch:
        cfg, message = f"{ctx.home}/opencode.json", f"{ctx.home}/opencode-message.txt"
        argv = stdin_argv(str(PACKAGE.bin(cache_dir, "opencode")), f"{PROVIDER}/{ctx.model}", message)
        env = {**base_env(ctx), **OPENCODE_ENV, "OPENCODE_CONFIG": cfg}
        files = {cfg: json_bytes(config(ctx)), message: with_hint(ctx).encode()}
        return HarnessLaunch(
            argv=argv, env=env, files=files, outputs=[f"{ctx.home}/.local/share/opencode/storage"]
        )
