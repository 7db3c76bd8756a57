"""GUI task sets -> task folders: `GUI_FORMATS[fmt](source) -> [GuiDraft]`, written by `import_gui`; each
format is registered under its name as an `openforgerl.importers` entry point (`WEBVOYAGER`, ...).

Formats (source; what runs here):
- `webvoyager`: `WebVoyager_data.jsonl` (+ `reference_answer.json` next to it); none: live web + judge
  (flagged)
- `online-mind2web`: `Online_Mind2Web.json`; none: live web + WebJudge (flagged)
- `osworld`: `evaluation_examples/` (or one task `.json`); the text-file tasks; the rest flagged
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from openforgerl.envs.gui.suite.drafting import GuiDraft, write_gui_task
from openforgerl.tasks.importing import TaskImporter

__all__ = ["GUI_FORMATS", "MIND2WEB", "OSWORLD", "WEBVOYAGER", "import_gui"]


def _webvoyager(source: Path) -> list[GuiDraft]:
    from openforgerl.envs.gui.importers.webvoyager import convert_webvoyager

    files = [source] if source.is_file() else sorted(source.rglob("*.jsonl"))
    return [d for f in files for d in convert_webvoyager(f)]


def _mind2web(source: Path) -> list[GuiDraft]:
    from openforgerl.envs.gui.importers.mind2web import convert_mind2web

    files = [source] if source.is_file() else sorted(source.rglob("*Mind2Web*.json"))
    return [d for f in files for d in convert_mind2web(f)]


def _osworld(source: Path) -> list[GuiDraft]:
    from openforgerl.envs.gui.importers.osworld import convert_osworld, find_osworld_tasks

    return [convert_osworld(p) for p in find_osworld_tasks(source)]


GUI_FORMATS: dict[str, Callable[[Path], list[GuiDraft]]] = {
    "webvoyager": _webvoyager,
    "online-mind2web": _mind2web,
    "osworld": _osworld,
}


def import_gui(source: Path, out: Path, fmt: str) -> list[Path]:
    """Convert every task of `fmt` under `source` into a folder under `out`."""
    try:
        convert = GUI_FORMATS[fmt]
    except KeyError:
        raise ValueError(f"unknown GUI task format {fmt!r}; known: {', '.join(GUI_FORMATS)}") from None
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for d in convert(source):
        prefix, _, rest = d.name.partition("/")
        d.name = f"{prefix}/{re.sub(r'[^A-Za-z0-9._-]+', '-', rest).strip('-')}"
        written.append(write_gui_task(d, out))
    return written


def _importer(fmt: str) -> TaskImporter:
    def run(source: Path, out: Path, user_engine: str | None) -> list[Path]:
        return import_gui(source, out, fmt)  # a GUI task has no simulated user: user_engine is unused

    return TaskImporter(run)


WEBVOYAGER = _importer("webvoyager")
MIND2WEB = _importer("online-mind2web")
OSWORLD = _importer("osworld")
