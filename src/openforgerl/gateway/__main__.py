"""`python -m openforgerl.gateway ...` (same as `openforgerl gateway ...`)."""

import typer

from openforgerl.gateway.command import command

typer.run(command)
