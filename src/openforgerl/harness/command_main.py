"""`python -m openforgerl.harness.command_main ...`: the harness CLI without the top-level `openforgerl` app
(used by scripts/install_harnesses.sh, so CI can install before anything else is wired)."""

import typer

from openforgerl.harness.command import command

if __name__ == "__main__":
    typer.run(command)
