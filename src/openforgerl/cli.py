"""The one `openforgerl` entry point. Each stage owns its subcommand in `<stage>/command.py`."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)

# subcommand -> module holding a typer-style function named `command`
COMMANDS: dict[str, str] = {
    "gateway": "openforgerl.gateway.command",
    "engine": "openforgerl.engines.local.command",
    "rollout": "openforgerl.orchestrator.command",
    "eval": "openforgerl.eval.command",
    "export": "openforgerl.export.command",
    "train": "openforgerl.train.command",
    "tasks": "openforgerl.envs.command",
    "harness": "openforgerl.harness.command",
    "analyze": "openforgerl.analytics.command",
    "view": "openforgerl.viewer.command",
}


def _register() -> None:
    for name, module in COMMANDS.items():
        mod = importlib.import_module(module)
        target = mod.command
        if isinstance(target, typer.Typer):
            app.add_typer(target, name=name)
        else:
            app.command(name, help=(target.__doc__ or "").strip().split("\n")[0])(target)


_register()

if __name__ == "__main__":
    app()
