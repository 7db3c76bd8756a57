"""mini-swe-agent (PyPI `mini-swe-agent`), headless via `mini -y --exit-immediately`.

Quirks (measured):
- Chat Completions through litellm -> openai-python, **non-streaming**, one native `bash` tool.
- `LITELLM_LOCAL_MODEL_COST_MAP=True`, else litellm fetches a price map from GitHub (about 4 s lost, and
  it fails in an offline sandbox); `MSWEA_COST_TRACKING=ignore_errors` because our model has no price.
- It finishes when the model runs `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`; `-o` writes the trajectory.
- Every error, 400 included, is retried (SDK x2 then tenacity): `MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT`
  caps it. It reads stdin for confirmations, so stdin is /dev/null.
- No session header and no MCP: task tools reach it through the shell hint only.
"""

from __future__ import annotations

from pathlib import Path

from openforgerl.harness._common import base_env, with_hint
from openforgerl.harness.base import HarnessContext, HarnessLaunch
from openforgerl.harness.install import PipPackage, install_pip
from openforgerl.records import WireProtocol

PACKAGE = PipPackage("mini-swe-agent", "mini-swe-agent==2.4.6")
SUBMIT_COMMAND = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


def mini_env(ctx: HarnessContext, retries: int) -> dict[str, str]:
    return {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "MSWEA_CONFIGURED": "true",
        "MSWEA_COST_TRACKING": "ignore_errors",
        "MSWEA_SILENT_STARTUP": "1",
        "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": str(retries),
        "MSWEA_GLOBAL_CONFIG_DIR": f"{ctx.home}/.config/mini-swe-agent",
        "OPENAI_API_KEY": ctx.api_key,
    }


class MiniSweAgentHarness:
    name = "mini_swe_agent"
    version = "2.4.6"
    protocol = WireProtocol.CHAT

    def __init__(self, retries: int = 3, request_timeout_s: int = 120) -> None:
        self.retries = retries
        self.request_timeout_s = request_timeout_s

    def install(self, cache_dir: Path) -> None:
        install_pip(PACKAGE, cache_dir)

    def launch(self, ctx: HarnessContext, cache_dir: Path) -> HarnessLaunch:
        traj = f"{ctx.home}/mini-trajectory.json"
        mini = [
            str(PACKAGE.bin(cache_dir, "mini")),
            "-y",
            "--exit-immediately",
            "-m",
            f"openai/{ctx.model}",
            "-c",
            "mini.yaml",
            "-c",
            f"model.model_kwargs.api_base={ctx.openai_base_url}",
            "-c",
            f"model.model_kwargs.timeout={self.request_timeout_s}",
            "-c",
            f"environment.cwd={ctx.workdir}",
            "-l",
            "0",
            "-t",
            with_hint(ctx),
            "-o",
            traj,
        ]
        argv = ["/bin/sh", "-c", 'exec "$@" </dev/null', "mini", *mini]
        env = {**base_env(ctx, PACKAGE.root(cache_dir) / "bin"), **mini_env(ctx, self.retries)}
        return HarnessLaunch(argv=argv, env=env, outputs=[traj])
