"""Importers: foreign task sets → our task folders (or, for Harbor layouts, loaded in place).

- Harbor / claw-bench folders load directly (`openforgerl.tasks.format.load_task`, runtime in `harbor.py`).
- Every other format is a `TaskImporter` an environment registers under an `openforgerl.importers` entry
  point named after the format (pyproject.toml: `claw-eval`, `qwenclawbench` in `envs.claw.importers`,
  `tau2` in `envs.tau2.importer`, `webvoyager`, `online-mind2web`, `osworld` in `envs.gui.importing`), so
  this module names no environment. `import_any` picks the format (`detect_format` for `auto`) and runs
  its importer into folders under `out`; what cannot run offline is flagged in `[metadata.openforgerl]`
  (`requires_internet`, `requires_llm_judge`, `needs`, `unsupported`), never run silently;
  `openforgerl.tasks.flags` counts them by reason. `user_engine` (the URL of the engine that plays the
  simulated user) lifts `needs: user_simulator` from multi-turn tasks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from openforgerl.registry import Registry
from openforgerl.tasks.draft import TaskDraft

__all__ = [
    "ENTRY_POINTS",
    "IMPORTERS",
    "TaskImporter",
    "convert_each",
    "detect_format",
    "import_any",
    "importer_for",
    "write_drafts",
]

ENTRY_POINTS = "openforgerl.importers"
SHIPPED = ("claw-eval", "qwenclawbench", "tau2", "webvoyager", "online-mind2web", "osworld")
"""The formats the shipped environments register, in the order `--format`'s help lists them (names only:
a format installed by another package is listed after them)."""


def _no_summary(tags: list[list[str]]) -> str:
    return ""


@dataclass(frozen=True)
class TaskImporter:
    """One foreign task format, as `tasks import --format <name>` runs it."""

    run: Callable[[Path, Path, str | None], list[Path]]
    """(source, out, user_engine) -> the task folders written under `out`."""
    summary: Callable[[list[list[str]]], str] = _no_summary
    """The imported tasks' tags -> one more clause for the import's summary line ("" for none)."""


def _importer(loaded: object) -> TaskImporter:
    if not isinstance(loaded, TaskImporter):
        raise TypeError(f"the task importer entry point names {type(loaded).__name__}, not a TaskImporter")
    return loaded


IMPORTERS: Registry[TaskImporter] = Registry("task format", group=ENTRY_POINTS, adopt=_importer)
"""Format name -> its importer (looking one up imports only that environment's importer)."""


_LAYOUTS = [
    ("tau2", "tasks.json"),
    ("tau2", "*/tasks.json"),
    ("qwenclawbench", "task_*.md"),
    ("qwenclawbench", "tasks/task_*.md"),
    ("claw-eval", "task.yaml"),
    ("claw-eval", "*/task.yaml"),
    ("claw-eval", "tasks/*/task.yaml"),
    ("claw-eval", "**/task.yaml"),
    ("tau2", "**/tasks.json"),
    ("qwenclawbench", "**/task_*.md"),
]


def _unknown_format(source: Path) -> Exception:
    from openforgerl.errors import UserError

    if not source.exists():
        return UserError(f"no such file or folder: {source}")
    return UserError(
        f"cannot tell the task format of {source}: expected a tau2 `tasks.json`, QwenClawBench "
        "`tasks/task_*.md` or Claw-Eval `tasks/<id>/task.yaml` (or pass --format)"
    )


SNIFF_BYTES = 64 * 1024
_TOOL_DOCUMENT_KEYS = re.compile(rb'"(openapi|tools|jsonrpc|paths)"\s*:')


def _json_kind(source: Path) -> str:
    """From the file's first bytes only (a task set may be hundreds of MB): `tasks` for a JSON list (a tau2
    `tasks.json`), `tools` for an MCP / OpenAPI tool document, else `other`."""
    with open(source, "rb") as f:
        head = f.read(SNIFF_BYTES).lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"["):
        return "tasks"
    return "tools" if head.startswith(b"{") and _TOOL_DOCUMENT_KEYS.search(head) else "other"


def _json_format(source: Path) -> str:
    from openforgerl.errors import UserError

    kind = _json_kind(source)
    if kind == "tools":
        raise UserError(
            f"{source} is a tool document (MCP tools/list or OpenAPI), not a task set: make tasks "
            f"from it with `openforgerl tasks synthesize --env {source} --out DIR`"
        )
    if kind == "other":
        raise UserError(
            f"{source}: not a tau2 `tasks.json` (a JSON list of tasks); pass --format if it is "
            "another task format"
        )
    return "tau2"


def detect_format(source: Path) -> str:
    """By the upstream layouts first (a tau2 domains folder, QwenClawBench `tasks/task_*.md`, Claw-Eval
    `tasks/<id>/task.yaml`), then anywhere below: a QwenClawBench asset may well be a `tasks.json`.
    A single `.json` file is sniffed from its first bytes: a tool document is pointed at `synthesize`."""
    if source.is_file():
        if source.suffix == ".json":
            return _json_format(source)
        if source.suffix == ".md":
            return "qwenclawbench"
        raise _unknown_format(source)
    for fmt, pattern in _LAYOUTS:
        if any(source.glob(pattern)):
            return fmt
    raise _unknown_format(source)


# What a converter raises on a document of the wrong shape (a list where it reads an object, a missing
# key, text that does not parse, nesting past the parser's recursion limit): the file's fault, not ours.
_MALFORMED = (KeyError, IndexError, TypeError, AttributeError, ValueError, RecursionError)


def convert_each(
    fmt: str, sources: list[Path], convert: Callable[[Path], list[TaskDraft]]
) -> list[TaskDraft]:
    """Every source's drafts; a malformed one is a `UserError` naming the file and what was wrong."""
    import yaml

    from openforgerl.errors import UserError

    drafts: list[TaskDraft] = []
    for src in sources:
        try:
            drafts += convert(src)
        except UserError:
            raise
        except (*_MALFORMED, yaml.YAMLError) as exc:
            what = str(exc).splitlines()[0] if str(exc) else ""
            raise UserError(
                f"{src}: not a valid {fmt} task file ({type(exc).__name__}{': ' if what else ''}{what[:200]})"
            ) from None
    return drafts


def _folder(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name.split("/", 1)[-1]).strip("-")


def importer_for(source: Path, fmt: str = "auto") -> TaskImporter:
    """The importer of `fmt` (`auto`: the format `detect_format` finds under `source`)."""
    from openforgerl.errors import UnknownNameError

    name = detect_format(source) if fmt == "auto" else fmt
    if name not in IMPORTERS:
        known = [*SHIPPED, *(n for n in IMPORTERS.names() if n not in SHIPPED), "auto"]
        raise UnknownNameError(f"unknown format {fmt!r} ({' | '.join(known)})")
    return IMPORTERS.get(name)


def import_any(source: Path, out: Path, fmt: str = "auto", *, user_engine: str | None = None) -> list[Path]:
    """Convert every task found under `source` into a folder under `out`; returns the folders."""
    return importer_for(source, fmt).run(source, out, user_engine)


def write_drafts(drafts: list[TaskDraft], out: Path, write: Callable[[TaskDraft, Path], Path]) -> list[Path]:
    """Each draft written under `out` by `write` (the environment's writer), in a folder named after it."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for d in drafts:
        d.name = d.name if "/" in d.name else f"imported/{d.name}"
        written.append(write(_renamed(d, _folder(d.name)), out))
    return written


def _renamed(d: TaskDraft, folder: str) -> TaskDraft:
    """write_task uses the last path part of the name as the folder; keep the full id in the name."""
    d.extra_meta = dict(d.extra_meta)
    prefix = d.name.rsplit("/", 1)[0]
    d.name = f"{prefix}/{folder}"
    return d
