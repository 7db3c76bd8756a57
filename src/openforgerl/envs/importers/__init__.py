"""Importers: foreign task sets → our task folders (or, for Harbor layouts, loaded in place).

- Harbor / claw-bench folders load directly (`openforgerl.tasks.format.load_task`, runtime in `harbor.py`).
- Claw-Eval `task.yaml` folders, QwenClawBench `task_*.md` files and tau2 `tasks.json` are converted
  by `import_any` into folders under `out`; what cannot run offline is flagged in
  `[metadata.openforgerl]` (`requires_internet`, `requires_llm_judge`, `needs`, `unsupported`), never run
  silently; `openforgerl.tasks.flags` counts them by reason. `user_engine` (the URL of the engine that
  plays the simulated user) lifts `needs: user_simulator` from multi-turn tasks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from openforgerl.envs.claw.drafts import write_claw_task
from openforgerl.tasks.draft import TaskDraft, write_task

__all__ = ["detect_format", "import_any"]


_LAYOUTS = [("tau2", "tasks.json"), ("tau2", "*/tasks.json"), ("qwenclawbench", "task_*.md"),
            ("qwenclawbench", "tasks/task_*.md"), ("claw-eval", "task.yaml"), ("claw-eval", "*/task.yaml"),
            ("claw-eval", "tasks/*/task.yaml"),
            ("claw-eval", "**/task.yaml"), ("tau2", "**/tasks.json"), ("qwenclawbench", "**/task_*.md")]


def _unknown_format(source: Path) -> Exception:
    from openforgerl.errors import UserError

    if not source.exists():
        return UserError(f"no such file or folder: {source}")
    return UserError(f"cannot tell the task format of {source}: expected a tau2 `tasks.json`, QwenClawBench "
                     "`tasks/task_*.md` or Claw-Eval `tasks/<id>/task.yaml` (or pass --format)")


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
        raise UserError(f"{source} is a tool document (MCP tools/list or OpenAPI), not a task set: make tasks "
                        f"from it with `openforgerl tasks synthesize --env {source} --out DIR`")
    if kind == "other":
        raise UserError(f"{source}: not a tau2 `tasks.json` (a JSON list of tasks); pass --format if it is "
                        "another task format")
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


def _each(fmt: str, sources: list[Path], convert: Callable[[Path], list[TaskDraft]]) -> list[TaskDraft]:
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
            raise UserError(f"{src}: not a valid {fmt} task file ({type(exc).__name__}{': ' if what else ''}"
                            f"{what[:200]})") from None
    return drafts


def _drafts(source: Path, fmt: str, user_engine: str | None = None) -> list[TaskDraft]:
    if fmt == "claw-eval":
        from openforgerl.envs.importers.claw_eval import convert_claw_eval, find_claw_eval_tasks

        dirs = [source] if (source / "task.yaml").is_file() else find_claw_eval_tasks(source)
        return _each(fmt, dirs, lambda d: [convert_claw_eval(d, user_engine)])
    if fmt == "qwenclawbench":
        from openforgerl.envs.importers.qwenclawbench import convert_qwenclawbench

        tasks = source / "tasks"
        files = [source] if source.is_file() else sorted((tasks if tasks.is_dir() else source).rglob("task_*.md"))
        return _each(fmt, files, lambda f: [convert_qwenclawbench(f, _assets_for(f))])
    if fmt == "tau2":
        from openforgerl.envs.importers.tau2 import convert_tau2

        files = [source] if source.is_file() else sorted(source.rglob("tasks.json"))
        return _each(fmt, files, lambda f: convert_tau2(f, user_engine=user_engine))
    from openforgerl.errors import UnknownNameError

    raise UnknownNameError(f"unknown format {fmt!r} (claw-eval | qwenclawbench | tau2 | webvoyager | "
                           "online-mind2web | osworld | auto)")


def _assets_for(md: Path) -> Path | None:
    """QwenClawBench keeps assets in `<data>/assets/` next to `<data>/tasks/`."""
    for parent in md.parents:
        if (parent / "assets").is_dir():
            return parent / "assets"
    return None


def _folder(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name.split("/", 1)[-1]).strip("-")


def import_any(source: Path, out: Path, fmt: str = "auto", *, user_engine: str | None = None) -> list[Path]:
    """Convert every task found under `source` into a folder under `out`; returns the folders."""
    from openforgerl.envs.gui.importing import GUI_FORMATS, import_gui

    if fmt in GUI_FORMATS:  # webvoyager | online-mind2web | osworld (GUI task folders)
        return import_gui(source, out, fmt)
    drafts = _drafts(source, detect_format(source) if fmt == "auto" else fmt, user_engine)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for d in drafts:
        d.name = d.name if "/" in d.name else f"imported/{d.name}"
        folder = _folder(d.name)
        # a draft of another environment family (tau2: `[environment] kind`) brings its own verifier and
        # oracle; only Claw drafts get the Claw test.sh and CLI solve.sh
        write = write_task if d.environment else write_claw_task
        written.append(write(_renamed(d, folder), out))
    return written


def _renamed(d: TaskDraft, folder: str) -> TaskDraft:
    """write_task uses the last path part of the name as the folder; keep the full id in the name."""
    d.extra_meta = dict(d.extra_meta)
    prefix = d.name.rsplit("/", 1)[0]
    d.name = f"{prefix}/{folder}"
    return d
