"""`openforgerl harness install [NAMES]`: install the pinned harness CLIs into the tools dir.

`openforgerl harness list` prints the known harnesses with their pinned version and install state.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from openforgerl.harness.install import tools_dir
from openforgerl.harness.registry import INSTALLABLE, get_harness, harness_names

ACTIONS = ("install", "list")


def install_all(names: list[str], cache_dir: Path) -> None:
    for name in names or list(INSTALLABLE):
        start = time.monotonic()
        adapter = get_harness(name)
        adapter.install(cache_dir)
        typer.echo(f"{adapter.name} {adapter.version}: ready in {time.monotonic() - start:.1f}s")


def list_harnesses() -> None:
    for name in harness_names():
        adapter = get_harness(name, argv=["true"]) if name == "command" else get_harness(name)
        typer.echo(f"{name:22s} {adapter.version:10s} {adapter.protocol.value}")


def command(
    args: Annotated[list[str] | None, typer.Argument(help="install [NAMES...] | list")] = None,
    tools: Annotated[Path | None, typer.Option("--tools-dir", help="default $OPENFORGERL_TOOLS")] = None,
) -> None:
    """Install (pinned, cached, idempotent) or list the harness CLIs."""
    words = list(args or ["install"])
    if words[0] not in ACTIONS:  # `harness frobnicate` is a typo of an action, not "install frobnicate"
        from openforgerl.errors import UserError

        raise UserError(
            f"unknown action {words[0]!r}: use `openforgerl harness install [NAMES...]` or "
            "`openforgerl harness list`"
        )
    action = words.pop(0)
    if action == "list":
        list_harnesses()
        return
    install_all(words, tools_dir(tools))
