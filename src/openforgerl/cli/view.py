"""`openforgerl view RUN [RUN2] [--port P] [--export DIR]`: browse rollouts on
127.0.0.1, or export a static bundle."""

from __future__ import annotations

from pathlib import Path

import typer

__all__ = ["command"]


def command(
    runs: list[Path] = typer.Argument(..., help="one run directory, or two to compare side by side"),
    port: int = typer.Option(7580, help="port on 127.0.0.1 (never another interface)"),
    export: Path | None = typer.Option(None, help="write a static HTML bundle here instead of serving"),
    tokenizer: str = typer.Option(
        "tiny", help="tokenizer for the token view: a tokenizer.json, a model folder or 'tiny'"
    ),
    page_size: int = typer.Option(100, help="rollouts per table page"),
) -> None:
    """Web viewer for runs: rollout table, call timeline, token view, side-by-side, GUI screenshots."""
    from openforgerl.viewer.site import Site

    if not 1 <= len(runs) <= 2:
        raise typer.BadParameter("give one or two run directories")
    for run in runs:
        if not run.is_dir():
            raise typer.BadParameter(f"{run} is not a folder")
    site = Site.open(runs, tokenizer=tokenizer, page_size=page_size)
    if export is not None:
        from openforgerl.viewer.export import export_site

        n = export_site(site, export)
        typer.echo(f"wrote {n} pages under {export}")
        return
    from openforgerl.viewer.app import serve

    typer.echo(f"serving {', '.join(map(str, runs))} on http://127.0.0.1:{port}/")
    serve(site, port)
