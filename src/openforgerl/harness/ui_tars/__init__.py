"""`ui-tars`: ByteDance's `@ui-tars/sdk` (npm), its `GUIAgent` unmodified, driving our computer service.

Quirks (measured with 1.2.3, see the README "GUI agents"):
- A library, not a CLI: the SDK's documented extension point is an `Operator` (`screenshot()`/`execute()`);
  ours (`driver.DRIVER_JS`) calls the task's computer service (`tool_service_url`, `GET /screenshot`,
  `POST /act`). The agent loop, prompt, image handling and action parser are the SDK's.
- Chat Completions, **non-streaming**, `openai` v5 with `maxRetries: 0`, a fixed 30 s per-call timeout, and
  `thinking: {type: "disabled"}`, `seed/stop/...: null` in every body; `temperature 0`, `top_p 0.7`,
  `max_tokens` 1000 (65535 for `uiTarsVersion` 1.5). No model retries by default: one 5xx ends the run.
- No system message: the system prompt and the instruction are the first user message; then one user
  message per screenshot and the model's text as assistant messages. The history keeps the last 5
  screenshots and drops the oldest screenshot message each turn after that (one `image_pruned` chain
  break per call from the 6th screenshot on). Every call decodes and re-encodes every kept screenshot
  with Jimp (pure JS, ~0.15 s per 1280x720 PNG on a loaded 2-core box); the output is deterministic, so a
  re-sent screenshot is the same blob.
- The model speaks UI-TARS action text (`Thought: ... Action: click(start_box='(x,y)')`); with the default
  version (1.0) boxes are in 0-1000 units of the screenshot, converted by the SDK's own parser.
- The operator opens one connection per request: with Node's `fetch` (keep-alive) an idle kept-alive socket
  blocks the single-threaded computer service until it times out (measured: 8 s lost per step).
- 1.2.3's `GUIAgent` requires `uuid` but does not declare it: installed pinned beside it (`NODE_PATH`).
- The `@ui-tars/operator-*` packages (nut-js, browser, adb) drive the local machine; none is used.
"""

from __future__ import annotations

from pathlib import Path

from openforgerl.harness._common import base_env
from openforgerl.harness.base import HarnessContext, HarnessLaunch
from openforgerl.harness.generic import gateway_env
from openforgerl.harness.install import NpmPackage, install_node24, install_npm, node24_bin_dir
from openforgerl.harness.ui_tars.driver import DRIVER_JS
from openforgerl.records import WireProtocol

PACKAGE = NpmPackage("ui-tars", "@ui-tars/sdk@1.2.3")
# The SDK's GUIAgent requires `uuid` without declaring it (1.2.3): pinned in its own prefix, on NODE_PATH.
UUID = NpmPackage("ui-tars-uuid", "uuid@11.1.0")
DEFAULT_COMPUTER_URL = "http://127.0.0.1:8765"


class UiTarsHarness:
    name = "ui-tars"
    version = "1.2.3"
    protocol = WireProtocol.CHAT

    def __init__(
        self,
        wall_clock_s: float = 600.0,
        max_loops: int = 25,
        ui_tars_version: str = "",
        max_tokens: int | None = None,
    ) -> None:
        self.wall_clock_s = wall_clock_s
        self.max_loops = max_loops
        self.ui_tars_version = ui_tars_version  # "" = the SDK's default (1.0: 0-1000 boxes); "1.5"
        self.max_tokens = max_tokens

    def install(self, cache_dir: Path) -> None:
        node = install_node24(cache_dir)
        install_npm(PACKAGE, cache_dir, node_bin=node)
        install_npm(UUID, cache_dir, node_bin=node)

    def launch(self, ctx: HarnessContext, cache_dir: Path) -> HarnessLaunch:
        script, transcript = f"{ctx.home}/ui-tars-run.cjs", f"{ctx.home}/ui-tars-transcript.jsonl"
        env = {
            **base_env(ctx, node24_bin_dir(cache_dir)),
            **gateway_env(ctx),
            "OPENFORGERL_INSTRUCTION": ctx.instruction,
            "OPENFORGERL_UI_TARS_PREFIX": str(PACKAGE.root(cache_dir)),
            "NODE_PATH": str(UUID.root(cache_dir) / "node_modules"),
            "OPENFORGERL_COMPUTER_URL": ctx.tool_service_url or DEFAULT_COMPUTER_URL,
            "OPENFORGERL_UI_TARS_TRANSCRIPT": transcript,
            "OPENFORGERL_UI_TARS_WALL_CLOCK_S": str(self.wall_clock_s),
            "OPENFORGERL_UI_TARS_MAX_LOOPS": str(self.max_loops),
            "OPENFORGERL_UI_TARS_VERSION": self.ui_tars_version,
            "NODE_OPTIONS": "--no-warnings",
        }
        if self.max_tokens is not None:
            env["OPENFORGERL_UI_TARS_MAX_TOKENS"] = str(self.max_tokens)
        argv = [str(node24_bin_dir(cache_dir) / "node"), script]
        return HarnessLaunch(argv=argv, env=env, files={script: DRIVER_JS.encode()}, outputs=[transcript])
