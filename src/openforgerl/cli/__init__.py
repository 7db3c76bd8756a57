"""The one `openforgerl` entry point. Each subcommand is its own module, `openforgerl/cli/<subcommand>.py`."""

# The top layer: these modules parse options and call into the stages, and nothing below imports them
# (tests/test_layers.py holds that; a stage's `__main__`, its `python -m` door, is an entry point too).

from __future__ import annotations

import importlib

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)

# subcommands, each in `openforgerl.cli.<name>` as a typer-style function (or a typer app) named `command`
COMMANDS = ("gateway", "engine", "rollout", "eval", "export", "train", "tasks", "harness", "analyze", "view")


def _register() -> None:
    for name in COMMANDS:
        mod = importlib.import_module(f"{__name__}.{name}")
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
    from openforgerl.env.errors import TaskFormatError
    from openforgerl.errors import UserError

    if isinstance(exc, (UserError, TaskFormatError)):  # a task folder's: it names the file and the field
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
