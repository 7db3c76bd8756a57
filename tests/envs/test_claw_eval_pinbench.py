"""Upstream Claw-Eval's Pinbench-adapted grader base (our `claw_eval.graders.pinbench_common`) and a task's
`sandbox_files` that name another task's fixture (resolved from the repository root, as upstream's runner).

The task (data/claw_eval_repo/tasks/T910_pinbench_brief) is ours, in upstream's repository layout. The
end-to-end test goes through `eval` with `zero` in real bubblewrap sandboxes; a scripted policy stands in
for the model's decisions only.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from scripted_eval import run_eval

from openforgerl.engines.chat_format import format_tool_call
from openforgerl.env.checks.evaluate import Evidence, evaluate
from openforgerl.env.checks.spec import load_spec
from openforgerl.tasks.format import load_task
from openforgerl.tasks.importing import import_any

REPO = Path(__file__).parent / "data" / "claw_eval_repo"
TASK = REPO / "tasks" / "T910_pinbench_brief"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
BRIEF = "- Revenue grew 12% on cloud demand.\n- Churn fell to 3%.\n- The Lisbon office opens in May."


def _said(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": "Brief me."}, {"role": "assistant", "content": text}]


def test_another_tasks_fixture_is_laid_out_and_the_base_grader_runs(tmp_path: Path) -> None:
    [folder] = import_any(TASK, tmp_path / "t")
    assert load_task(folder).flags == ["needs:transcript"]
    laid = folder / "environment/workspace/tasks/T909_shared/fixtures/brief.txt"
    assert laid.read_bytes() == (REPO / "tasks/T909_shared/fixtures/brief.txt").read_bytes()
    spec = load_spec(folder / "tests/checks.toml")

    def score(text: str, audit: list[dict[str, Any]] | None = None) -> float:
        ev = Evidence({}, audit or [], None, tests_dir=folder / "tests", transcript=_said(text))
        return evaluate(spec, ev).reward

    assert score(BRIEF) == 1.0
    assert score("Done.") == pytest.approx(0.8 * 0.02 + 0.2)  # keywords 0, pattern 0, length 5/80
    half = "- Revenue grew 12% and that is all I found in the notes, nothing else of interest there."
    assert score(half) == pytest.approx(0.8 * round((0.5 + 1 + 1) / 3, 2) + 0.2)


def test_a_grader_that_needs_media_loads_is_flagged(tmp_path: Path) -> None:
    src = tmp_path / "repo" / "tasks"
    shutil.copytree(REPO / "tasks", src)
    grader = src / "T910_pinbench_brief/grader.py"
    grader.write_text(grader.read_text() + "    REQUIRE_IMAGE_LOAD = True\n")
    [folder] = import_any(src / "T910_pinbench_brief", tmp_path / "t")
    assert "unsupported:grader_media_events" in load_task(folder).flags


@needs_bwrap
def test_the_brief_through_eval_beats_a_no_op(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def run(out: Path, final: str) -> dict[str, Any]:
        def policy(turn: Any) -> str:
            if not turn.tools:
                return "title"
            seen = [str(m.get("content")) for m in turn.messages if m.get("role") == "tool"]
            if not seen and final != "Done.":
                return format_tool_call(
                    "bash", {"command": "cat /workspace/tasks/T909_shared/fixtures/brief.txt"}
                )
            assert not seen or "Lisbon" in seen[0]  # the other task's fixture is in the workspace
            return final

        import_any(TASK, out / "tasks")
        [record] = run_eval(out / "tasks", out / "r", monkeypatch, policy)
        return record

    done, idle = run(tmp_path / "done", BRIEF), run(tmp_path / "idle", "Done.")
    assert (done["status"], done["reward"]) == ("ok", 1.0)
    assert idle["status"] == "ok" and idle["reward"] == pytest.approx(0.8 * 0.02 + 0.2)
