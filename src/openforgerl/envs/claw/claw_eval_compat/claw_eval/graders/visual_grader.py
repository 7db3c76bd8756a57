"""`VisualGraderMixin`: the helpers upstream's visual task graders call (ours, written from upstream's
documented interface).

- `collect_screenshots_from_snapshot(snap, pattern="/workspace/grading_frames/")`: the base64 contents of
  the snapshot's `file:` entries whose path contains `pattern` and that were read as base64, in path order;
- `compute_ssim_score(snap, cmd)`: the first number `cmd:<cmd>` printed, as a float (None: none);
- `judge_visual_similarity(judge, ref, gen, rubric, context="")`: `judge.evaluate_visual(...)` with the
  reference and candidate images, or None when there is no judge, it cannot judge images, or there is no
  image at all. Our verifier's judge answers it from the host (`--judge-engine`, upstream's visual prompt).
"""

from __future__ import annotations

import re
from typing import Any

_NUMBER = re.compile(r"([0-9]+\.?[0-9]*)")


class VisualGraderMixin:
    @staticmethod
    def collect_screenshots_from_snapshot(
        env_snapshot: dict[str, Any] | None, pattern: str = "/workspace/grading_frames/"
    ) -> list[str]:
        found = []
        for key, entry in (env_snapshot or {}).items():
            path = key[len("file:") :] if key.startswith("file:") else None
            if (
                path is not None
                and pattern in path
                and isinstance(entry, dict)
                and entry.get("encoding") == "base64"
                and entry.get("content")
            ):
                found.append((path, str(entry["content"])))
        return [content for _, content in sorted(found)]

    @staticmethod
    def compute_ssim_score(env_snapshot: dict[str, Any] | None, cmd: str) -> float | None:
        entry = (env_snapshot or {}).get(f"cmd:{cmd}")
        out = str(entry.get("stdout") or "").strip() if isinstance(entry, dict) else ""
        found = _NUMBER.search(out)
        return float(found.group(1)) if found else None

    @staticmethod
    def judge_visual_similarity(
        judge: Any, ref_images_b64: list[str], gen_images_b64: list[str], rubric: str, context: str = ""
    ) -> Any:
        if judge is None or not hasattr(judge, "evaluate_visual") or not (ref_images_b64 or gen_images_b64):
            return None
        return judge.evaluate_visual(
            rubric=rubric,
            reference_images_b64=ref_images_b64,
            candidate_images_b64=gen_images_b64,
            context=context,
        )
