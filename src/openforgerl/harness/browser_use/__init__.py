"""`browser-use` (PyPI `browser-use`): its own `Agent`, unmodified, run by `run_agent.py` in its pinned venv.

Quirks (measured with 0.13.14, see the README "GUI agents"):
- A library (its CLI is an interactive browser tool): `run_agent.py` builds `Agent` + `ChatOpenAI(base_url=
  gateway)` + `BrowserSession`. browser-use launches the system Chromium itself inside the sandbox over CDP
  (`/usr/lib/chromium/chromium`, headless, `chromium_sandbox=False`: bubblewrap maps root, and Chromium's own
  sandbox refuses to start) and drives the task's web apps (the verifier reads their state). It does not use
  the environment's screen or computer service: browser tasks only, no desktop.
- Chat Completions, non-streaming, `response_format` = strict JSON schema (`AgentOutput`: thinking,
  evaluation_previous_goal, memory, next_goal, `action` list); `temperature 0.2`, `frequency_penalty 0.3`,
  `max_completion_tokens 4096`. Clicks name element *indices* from its DOM listing (`[12]<button ...>`),
  not pixels; a screenshot rides in each state message (`use_vision`).
- One system message, then the state is rebuilt each step (the previous step's state message is replaced
  by history text), so the prompt is *not* append-only: every call starts a new chain.
- `use_judge` (an extra LLM call that grades the run) and cloud sync/telemetry are off
  (`ANONYMIZED_TELEMETRY=false`); `enable_default_extensions=False`, else it downloads uBlock & co.
- Errors: openai's own retries (`max_retries`, default 5 in browser-use; 2 here) inside one step, then
  `max_failures` consecutive failed steps (1 here) before it stops; `final_response_after_failure` off.
"""

from __future__ import annotations

from pathlib import Path

from openforgerl.harness._common import base_env
from openforgerl.harness.base import HarnessContext, HarnessLaunch
from openforgerl.harness.generic import gateway_env
from openforgerl.harness.install import PipPackage, install_pip
from openforgerl.records import WireProtocol

PACKAGE = PipPackage("browser-use", "browser-use==0.13.14")
RUN_AGENT = Path(__file__).with_name("run_agent.py")


class BrowserUseHarness:
    name = "browser-use"
    version = "0.13.14"
    protocol = WireProtocol.CHAT

    def __init__(
        self,
        wall_clock_s: float = 600.0,
        max_steps: int = 30,
        retries: int = 2,
        max_failures: int = 1,
        call_timeout_s: float = 120.0,
    ) -> None:
        self.settings = {
            "WALL_CLOCK_S": wall_clock_s,
            "MAX_STEPS": max_steps,
            "RETRIES": retries,
            "MAX_FAILURES": max_failures,
            "CALL_TIMEOUT_S": call_timeout_s,
        }

    def install(self, cache_dir: Path) -> None:
        install_pip(PACKAGE, cache_dir)

    def launch(self, ctx: HarnessContext, cache_dir: Path) -> HarnessLaunch:
        conversation = f"{ctx.home}/browser-use-conversation"
        env = {
            **base_env(ctx, PACKAGE.root(cache_dir) / "bin"),
            **gateway_env(ctx),
            "OPENFORGERL_INSTRUCTION": ctx.instruction,
            "ANONYMIZED_TELEMETRY": "false",
            "BROWSER_USE_CLOUD_SYNC": "false",
            "BROWSER_USE_VERSION_CHECK": "false",
            "BROWSER_USE_LOGGING_LEVEL": "warning",
            "BROWSER_USE_CONFIG_DIR": f"{ctx.home}/.config/browseruse",
            "OPENFORGERL_BROWSER_USE_CONVERSATION": conversation,
            **{f"OPENFORGERL_BROWSER_USE_{k}": str(v) for k, v in self.settings.items()},
        }
        argv = [str(PACKAGE.bin(cache_dir, "python")), "-I", str(RUN_AGENT)]
        return HarnessLaunch(argv=argv, env=env, outputs=[conversation])
