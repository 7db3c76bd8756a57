"""`openforgerl rollout --backend podman` with default settings: the harness adapters and the task's Python
point at the rollout image's paths (nothing of the host's venv or `.tools/` is inside the container), so a
real CLI scores 1 on a Claw task with no path flags."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sbx_helpers import needs_root
from test_podman_rollouts import SUITE, TASK, rollout_image  # noqa: F401  (the session fixture)

from openforgerl.sandbox.podman import IMAGE_PYTHON, IMAGE_TOOLS, in_image_paths


def test_image_paths_only_where_the_sandbox_runs_the_image() -> None:
    assert in_image_paths("podman", None) == (IMAGE_PYTHON, IMAGE_TOOLS)
    assert in_image_paths("kubernetes", None) == (IMAGE_PYTHON, IMAGE_TOOLS)
    assert in_image_paths("podman", "/srv/tools") == (IMAGE_PYTHON, None)  # an explicit --tools-dir wins
    assert in_image_paths("local", None) == (None, None)  # the local sandbox shows the host's own


@pytest.mark.podman
@needs_root
@pytest.mark.timeout(900)
@pytest.mark.parametrize("harness", ["zero", "codex"])
def test_rollout_cli_on_podman_needs_no_path_flags(harness: str, rollout_image: str, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "run"
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "openforgerl"),
            "rollout",
            "--tasks",
            str(SUITE / TASK),
            "--backend",
            "podman",
            "--image",
            rollout_image,
            "--engine",
            "scripted",
            "--harness",
            harness,
            "--n",
            "1",
            "--min-group-size",
            "1",
            "--retries",
            "0",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    (record,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert (record["status"], record["reward"]) == ("ok", 1.0), (record["metadata"], done.stdout[-2000:])
    assert record["metadata"]["calls"] >= 2 and done.returncode == 0
