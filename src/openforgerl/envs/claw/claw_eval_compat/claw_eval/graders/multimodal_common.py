"""`MultimodalGraderMixin`: the helpers upstream's multimodal task graders (video, document) call on the
`env_snapshot`, the dispatches and the agent's text (ours, written from upstream's documented interface).

Every helper is a static method; an absent snapshot or entry gives the "nothing there" answer (False, None,
"" or 0.0), never an exception:
- `check_file_exists(snap, path)`: a non-empty snapshot whose `file:<path>` entry has no `error` (as
  upstream's, a path it has no entry for counts as there);
- `check_file_format(snap, path, mime)`: `mime` (case-insensitive) is part of that entry's `mime_type`;
- `get_ffprobe_metadata(snap, key)`: the JSON an ffprobe command printed (`key` is the whole `cmd:...`);
- `get_snapshot_stdout(snap, cmd)` / `get_snapshot_exit_code(snap, cmd)`: of `cmd:<cmd>`;
- `compute_text_similarity(a, b)`: difflib's ratio of the two texts, whitespace collapsed (1.0 when both
  are empty, 0.0 when one is);
- `check_tool_usage(dispatches, tool, min_calls)`: at least that many successful (< 400) calls;
- `extract_number_from_text(text)`: the first number in it, as a float.
"""

from __future__ import annotations

import json
import re
from difflib import SequenceMatcher
from typing import Any

from ..models.trace import ToolDispatch

_NUMBER = re.compile(r"[-+]?\d*\.?\d+")


def _entry(snap: dict[str, Any] | None, key: str) -> dict[str, Any]:
    found = (snap or {}).get(key)
    return found if isinstance(found, dict) else {}


class MultimodalGraderMixin:
    @staticmethod
    def check_file_exists(env_snapshot: dict[str, Any] | None, path: str) -> bool:
        # as upstream's: a path the snapshot never named counts as there (every declared path has an entry)
        return bool(env_snapshot) and "error" not in _entry(env_snapshot, f"file:{path}")

    @staticmethod
    def check_file_format(env_snapshot: dict[str, Any] | None, path: str, expected_mime: str) -> bool:
        if not env_snapshot:
            return False
        return expected_mime.lower() in str(_entry(env_snapshot, f"file:{path}").get("mime_type", "")).lower()

    @staticmethod
    def get_ffprobe_metadata(env_snapshot: dict[str, Any] | None, cmd_key: str) -> Any:
        out = _entry(env_snapshot, cmd_key).get("stdout") or ""
        try:
            return json.loads(out) if out else None
        except (ValueError, TypeError):
            return None

    @staticmethod
    def compute_text_similarity(reference: str, candidate: str) -> float:
        if not reference or not candidate:
            return 1.0 if not reference and not candidate else 0.0
        return SequenceMatcher(None, " ".join(reference.split()), " ".join(candidate.split())).ratio()

    @staticmethod
    def check_tool_usage(dispatches: list[ToolDispatch], tool_name: str, min_calls: int = 1) -> bool:
        return sum(d.tool_name == tool_name and d.response_status < 400 for d in dispatches) >= min_calls

    @staticmethod
    def get_snapshot_stdout(env_snapshot: dict[str, Any] | None, cmd: str) -> Any:
        return _entry(env_snapshot, f"cmd:{cmd}").get("stdout", "") if env_snapshot else ""

    @staticmethod
    def get_snapshot_exit_code(env_snapshot: dict[str, Any] | None, cmd: str) -> int | None:
        code = _entry(env_snapshot, f"cmd:{cmd}").get("exit_code")
        return None if code is None else int(code)

    @staticmethod
    def extract_number_from_text(text: str) -> float | None:
        found = _NUMBER.search(text)
        return float(found.group()) if found else None
