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


def main() -> None:
    """The console script: user mistakes become one `error:` line and exit 2 (see `errors.py`);
    `OPENFORGERL_DEBUG=1` keeps the traceback."""
    import errno
    import os
    import sys

    try:
        app()
    except Exception as exc:
        line = user_mistake(exc, errno)
        if line is None or os.environ.get("OPENFORGERL_DEBUG") == "1":
            raise
        print(f"error: {line}", file=sys.stderr)
        sys.exit(2)


def user_mistake(exc: BaseException, errno: object) -> str | None:
    """The one line for a mistake the user can fix, or None for a bug (which keeps its traceback)."""
    from openforgerl.errors import UserError

    if isinstance(exc, UserError):
        return str(exc)
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"no such file or folder: {exc.filename}"
    if isinstance(exc, OSError) and exc.errno == getattr(errno, "EADDRINUSE", 98):
        return f"{exc.strerror or exc}: another server already listens there; pick another --port"
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml is a base dependency
        return None
    if isinstance(exc, yaml.YAMLError):
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1}, column {where.column + 1})" if where is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        name = getattr(where, "name", None)
        source = f"{name}: " if isinstance(name, str) and not name.startswith("<") else ""
        return f"{source}not valid YAML{at}: {problem}"
    return None


if __name__ == "__main__":
    main()
