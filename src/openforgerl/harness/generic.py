"""`command`: any executable, configured only through environment variables.

The program gets both protocol base URLs, the key (under both vendors' names), the model name and the
instruction (`OPENFORGERL_INSTRUCTION`, and as the last argv item unless the argv holds `{instruction}`).
Use it for harnesses without an adapter, or for a user's own agent script.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from openforgerl.harness._common import base_env, with_hint
from openforgerl.harness.base import HarnessContext, HarnessLaunch
from openforgerl.records import WireProtocol

PLACEHOLDER = "{instruction}"


def gateway_env(ctx: HarnessContext) -> dict[str, str]:
    """The variables any OpenAI/Anthropic SDK reads by default, plus ours."""
    return {
        "OPENAI_BASE_URL": ctx.openai_base_url,
        "OPENAI_API_KEY": ctx.api_key,
        "ANTHROPIC_BASE_URL": ctx.anthropic_base_url,
        "ANTHROPIC_API_KEY": ctx.api_key,
        "OPENFORGERL_MODEL": ctx.model,
        "OPENFORGERL_INSTRUCTION": with_hint(ctx),
        "OPENFORGERL_WORKDIR": ctx.workdir,
    }


class CommandHarness:
    name = "command"
    version = "any"
    protocol = WireProtocol.CHAT  # informational: the program may speak any of the three

    def __init__(self, argv: Sequence[str], protocol: WireProtocol = WireProtocol.CHAT) -> None:
        self.argv = list(argv)
        self.protocol = protocol

    def install(self, cache_dir: Path) -> None:
        """Nothing to install: the executable is the user's."""

    def launch(self, ctx: HarnessContext, cache_dir: Path) -> HarnessLaunch:
        text = with_hint(ctx)
        if any(PLACEHOLDER in a for a in self.argv):
            argv = [a.replace(PLACEHOLDER, text) for a in self.argv]
        else:
            argv = [*self.argv, text]
        return HarnessLaunch(argv=argv, env={**base_env(ctx), **gateway_env(ctx)})
