"""Upstream Claw-Eval's `env_snapshot` (commands, files, grader-only files, local ground truth) taken by the
host on a copy of the agent's final workdir (envs/claw/snapshot.py) and given to the task's grader.py.

The task (data/claw_eval_snapshot/T908_ledger_total) is ours, in upstream's format, and uses every snapshot
field. The end-to-end tests go through `eval` with `zero` in real bubblewrap sandboxes; a scripted policy
stands in for the model's decisions only.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from scripted_eval import bash_steps, run_eval

from openforgerl.env.checks.evaluate import Evidence, evaluate
from openforgerl.env.checks.spec import load_spec
from openforgerl.env.contract import VerifierError
from openforgerl.envs.claw.snapshot import SnapshotSpec, collect_env_snapshot, glob_paths
from openforgerl.tasks.format import load_task
from openforgerl.tasks.importing import import_any

DATA = Path(__file__).parent / "data" / "claw_eval_snapshot"
TASK = "T908_ledger_total"
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
CHECK = "cmd:python /workspace/fixtures/check_total.py"
SOLVE = (
    "mkdir -p /workspace/out && echo 1234 > /workspace/out/total.txt "
    "&& echo 'The ledger sums to 1234.' > /workspace/out/notes.md"
)


def _task(tmp_path: Path) -> Path:
    [folder] = import_any(DATA / TASK, tmp_path / "tasks")
    return folder


# ------------------------------------------------------------------ import


def test_the_snapshot_fields_are_imported_for_the_host_and_the_verifier_only(tmp_path: Path) -> None:
    folder = _task(tmp_path)
    task = load_task(folder)
    assert task.flags == ["needs:transcript"]  # its grader runs: no grader_env_snapshot_* flag any more
    [check] = load_spec(folder / "tests/checks.toml").checks
    assert check.kind == "claw_eval_grader"
    manifest = json.loads((folder / "tests/claw_eval/env_snapshot.json").read_text())
    assert manifest == {
        "commands": [
            "python /workspace/fixtures/check_total.py",
            "test -f /workspace/out/total.txt && echo EXISTS || echo MISSING",
        ],
        "files": ["/workspace/out/*.txt", "/workspace/out/notes.md"],
        "timeout_s": 5,
        "sandbox_grader_files": ["fixtures/check_total.py"],
    }
    tests = folder / "tests/claw_eval"
    assert (tests / "sandbox_grader_files/fixtures/check_total.py").read_bytes() == (
        DATA / TASK / "fixtures/check_total.py"
    ).read_bytes()
    assert (tests / "local_grader_files/fixtures/expected_total.txt").read_text() == "1234\n"
    agent_side = [
        p.relative_to(folder / "environment").as_posix() for p in (folder / "environment").rglob("*")
    ]
    assert agent_side == ["workspace", "workspace/fixtures", "workspace/fixtures/ledger.csv"]


def test_a_missing_grader_only_file_flags_the_task(tmp_path: Path) -> None:
    src = Path(shutil.copytree(DATA / TASK, tmp_path / "src" / TASK))
    (src / "fixtures/expected_total.txt").unlink()
    task = load_task(_task_from(src, tmp_path))
    assert "unsupported:grader_file_missing:local_grader_files/fixtures/expected_total.txt" in task.flags


def _task_from(src: Path, tmp_path: Path) -> Path:
    [folder] = import_any(src, tmp_path / "out")
    return folder


# ------------------------------------------------------------------ the verifier's side


def _grade(folder: Path, snapshot: dict[str, Any] | None) -> Any:
    spec = load_spec(folder / "tests/checks.toml")
    return evaluate(
        spec, Evidence({}, [], None, tests_dir=folder / "tests", transcript=[], env_snapshot=snapshot)
    )


def test_the_grader_gets_upstreams_dict_with_the_local_ground_truth(tmp_path: Path) -> None:
    folder = _task(tmp_path)
    good = {
        CHECK: {"exit_code": 0, "stdout": '{"correct": true}\n', "stderr": ""},
        "file:/workspace/out/total.txt": {
            "content": "1234\n",
            "mime_type": "text/plain",
            "encoding": "utf-8",
        },
        "file:/workspace/out/notes.md": {
            "content": "sum 1234",
            "mime_type": "text/markdown",
            "encoding": "utf-8",
        },
    }
    assert _grade(folder, good).reward == 1.0
    assert _grade(folder, None).reward == pytest.approx(0.2)  # robustness only
    (folder / "tests/claw_eval/local_grader_files/fixtures/expected_total.txt").write_text("999\n")
    assert _grade(folder, good).reward == pytest.approx(0.8 * 0.8 + 0.2)  # the host's file is the truth


def test_glob_stays_in_the_workspace_and_keeps_upstreams_order() -> None:
    listing = ["out", "out/a.txt", "out/b.txt", "out/.hidden.txt", "out/sub", "out/sub/c.txt", "top.txt"]
    assert glob_paths(listing, "/workspace/out/*.txt") == ["/workspace/out/a.txt", "/workspace/out/b.txt"]
    assert glob_paths(listing, "/workspace/**/*.txt") == [
        "/workspace/out/a.txt",
        "/workspace/out/b.txt",
        "/workspace/out/sub/c.txt",
        "/workspace/top.txt",
    ]
    assert glob_paths(listing, "/etc/*") == [] and glob_paths(listing, "/workspace/../etc/*") == []


def test_a_backend_that_cannot_copy_the_workdir_is_infra() -> None:
    with pytest.raises(VerifierError, match="cannot take"):
        asyncio.run(collect_env_snapshot(object(), SnapshotSpec(commands=("true",))))


@needs_bwrap
def test_commands_run_on_a_copy_time_out_as_upstreams_and_leave_the_workdir_alone(tmp_path: Path) -> None:
    from openforgerl.sandbox.base import SandboxSpec
    from openforgerl.sandbox.local import LocalBackend

    async def main() -> tuple[dict[str, Any], bytes]:
        backend = LocalBackend(tmp_path / "sbx")
        try:
            sbx = await backend.open_sandbox(SandboxSpec(rollout_id="snap", files={"out/total.txt": b"7\n"}))
            spec = SnapshotSpec(
                commands=(
                    "cat /workspace/out/total.txt; echo x > /workspace/out/total.txt",
                    "sleep 30",
                    "exit 3",
                    "curl -s http://127.0.0.1:1 || echo offline",
                ),
                files=("/workspace/out/*.txt", "/workspace/missing.txt", "/etc/passwd"),
                timeout_s=1,
                grader_files={"fixtures/g.py": b"print(1)\n"},
            )
            snap = await collect_env_snapshot(sbx, spec)
            left = await sbx.read_file("/workdir/out/total.txt")
            await sbx.aclose()
            return snap, left
        finally:
            await backend.aclose()

    snap, left = asyncio.run(main())
    first = snap["cmd:cat /workspace/out/total.txt; echo x > /workspace/out/total.txt"]
    assert first == {"exit_code": 0, "stdout": "7\n", "stderr": ""}
    assert snap["cmd:sleep 30"] == {"exit_code": -1, "stdout": "", "stderr": "Timed out after 1s"}
    assert snap["cmd:exit 3"]["exit_code"] == 3
    assert snap["file:/workspace/out/total.txt"] == {
        "content": "x\n",
        "mime_type": "text/plain",
        "encoding": "utf-8",
    }
    assert snap["file:/workspace/missing.txt"] == {"error": "File not found: /workspace/missing.txt"}
    assert "error" in snap["file:/etc/passwd"]
    assert left == b"7\n"  # the commands ran on a copy


# ------------------------------------------------------------------ through eval


def _eval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: list[str], seen: list[str] | None = None
) -> dict[str, Any]:
    """`eval` with `zero` on T908: the policy runs `steps` as bash calls, then says it is done."""
    _task(tmp_path)
    records = run_eval(tmp_path / "tasks", tmp_path / "r", monkeypatch, bash_steps(steps, seen))
    return records[-1] if len(records) == 1 else {"all": records}


@needs_bwrap
def test_doing_the_task_scores_above_a_no_op_through_the_real_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = _eval(tmp_path / "done", monkeypatch, [SOLVE])
    idle = _eval(tmp_path / "idle", monkeypatch, [])
    wrong = _eval(tmp_path / "wrong", monkeypatch, [SOLVE.replace("echo 1234", "echo 1000")])
    assert done["status"] == "ok" and done["reward"] == 1.0
    assert idle["status"] == "ok" and idle["reward"] == pytest.approx(0.2)
    assert wrong["reward"] == pytest.approx(0.8 * 0.2 + 0.2)  # notes only


@needs_bwrap
def test_a_snapshot_our_sandbox_cannot_take_is_infra_never_a_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openforgerl.sandbox.base import SandboxError
    from openforgerl.sandbox.local import LocalSandbox

    async def broken(self: LocalSandbox) -> None:
        raise SandboxError("bwrap setup failed 4 times")

    monkeypatch.setattr(LocalSandbox, "open_workdir_copy", broken)
    records = _eval(tmp_path, monkeypatch, [SOLVE])["all"]  # infra is retried, never scored
    assert len(records) > 1 and all(
        r["status"] == "infra_error:verifier" and r["reward"] is None for r in records
    )


def test_the_multimodal_helpers_read_the_snapshot_as_upstreams(monkeypatch: pytest.MonkeyPatch) -> None:
    from openforgerl.envs.claw.verify.claw_eval_grader import COMPAT_ROOT

    monkeypatch.syspath_prepend(str(COMPAT_ROOT))
    from claw_eval.graders.multimodal_common import MultimodalGraderMixin as M
    from claw_eval.models.trace import ToolDispatch

    probe = "cmd:ffprobe -v quiet -print_format json -show_format /workspace/clip.mp4"
    snap = {
        "file:/workspace/a.csv": {"content": "x", "mime_type": "text/csv", "encoding": "utf-8"},
        "file:/workspace/b.png": {"error": "File not found: /workspace/b.png"},
        probe: {"exit_code": 0, "stdout": '{"format": {"duration": "4.0"}}', "stderr": ""},
        "cmd:wc -c x": {"exit_code": 1, "stdout": "12 x\n", "stderr": ""},
    }
    assert M.check_file_exists(snap, "/workspace/a.csv") and not M.check_file_exists(snap, "/workspace/b.png")
    assert M.check_file_exists(snap, "/workspace/never.txt") and not M.check_file_exists(
        {}, "/workspace/a.csv"
    )
    assert M.check_file_format(snap, "/workspace/a.csv", "TEXT/CSV") and not M.check_file_format(
        None, "/x", "text"
    )
    assert M.get_ffprobe_metadata(snap, probe) == {"format": {"duration": "4.0"}}
    assert M.get_ffprobe_metadata(snap, "cmd:wc -c x") is None and M.get_ffprobe_metadata(None, probe) is None
    assert (
        M.get_snapshot_stdout(snap, "wc -c x") == "12 x\n" and M.get_snapshot_exit_code(snap, "wc -c x") == 1
    )
    assert M.get_snapshot_exit_code(snap, "missing") is None
    assert M.compute_text_similarity("a  b", "a b") == 1.0 and M.compute_text_similarity("", "") == 1.0
    assert M.compute_text_similarity("abc", "") == 0.0
    assert (
        M.extract_number_from_text("about -3.5 km, then 4") == -3.5
        and M.extract_number_from_text("none") is None
    )
    calls = [
        ToolDispatch(
            tool_use_id="1",
            tool_name="Read",
            endpoint_url="",
            request_body={},
            response_status=200,
            response_body=None,
        ),
        ToolDispatch(
            tool_use_id="2",
            tool_name="Read",
            endpoint_url="",
            request_body={},
            response_status=500,
            response_body=None,
        ),
    ]
    assert M.check_tool_usage(calls, "Read") and not M.check_tool_usage(calls, "Read", min_calls=2)


# ------------------------------------------------------------------ the vision judge (evaluate_visual)

RED_PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGM4IcIFAAKOAOdVkVssAAAAAElFTkSuQmCC"


def _serve_judge(reply: Callable[[dict[str, Any]], str]) -> Any:
    import contextlib
    import threading

    from aiohttp import web
    from judge_helpers import free_port

    @contextlib.contextmanager
    def served() -> Any:
        bodies: list[dict[str, Any]] = []
        port, loop, ready, box = free_port(), asyncio.new_event_loop(), threading.Event(), {}

        async def chat(request: Any) -> Any:
            body = await request.json()
            bodies.append(body)
            return web.json_response(
                {"choices": [{"message": {"role": "assistant", "content": reply(body)}}]}
            )

        async def start() -> None:
            app = web.Application(client_max_size=64 << 20)
            app.router.add_post("/v1/chat/completions", chat)
            box["runner"] = web.AppRunner(app)
            await box["runner"].setup()
            await web.TCPSite(box["runner"], "127.0.0.1", port).start()
            ready.set()

        thread = threading.Thread(
            target=lambda: (
                asyncio.set_event_loop(loop),
                loop.run_until_complete(start()),
                loop.run_forever(),
            ),
            daemon=True,
        )
        thread.start()
        assert ready.wait(30)
        try:
            yield f"http://127.0.0.1:{port}/v1", bodies
        finally:
            asyncio.run_coroutine_threadsafe(box["runner"].cleanup(), loop).result(10)
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)

    return served()


def _visual_eval(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    steps: list[str],
    judge_url: str,
    task: str = "T911_chart_visual",
) -> dict[str, Any]:
    """`eval` of one imported task with `zero`: the policy runs `steps` as bash calls, then answers."""
    import_any(DATA / task, tmp_path / "tasks")
    [record] = run_eval(
        tmp_path / "tasks", tmp_path / "r", monkeypatch, bash_steps(steps), "--judge-engine", judge_url
    )
    return record


@needs_bwrap
def test_the_vision_judge_sees_the_agents_chart_and_the_reference_through_the_real_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import base64

    reference = base64.b64encode((DATA / "T911_chart_visual/fixtures/reference.png").read_bytes()).decode()
    draw = f"echo {RED_PIXEL} | base64 -d > /workspace/chart.png"
    with _serve_judge(lambda body: '{"score": 0.75, "reasoning": "close to the reference"}') as (url, bodies):
        drawn = _visual_eval(tmp_path / "drawn", monkeypatch, [draw], url)
        idle = _visual_eval(tmp_path / "idle", monkeypatch, [], url)
    assert drawn["status"] == "ok" and drawn["reward"] == pytest.approx(0.8 * (0.2 + 0.8 * 0.75) + 0.2)
    assert idle["status"] == "ok" and idle["reward"] == pytest.approx(0.2)  # no chart: no judge call
    [body] = bodies
    system, user = body["messages"]
    assert system["content"].startswith("You are a STRICT visual evaluation judge.")
    urls = [p["image_url"]["url"] for p in user["content"] if p["type"] == "image_url"]
    assert urls == [f"data:image/png;base64,{reference}", f"data:image/png;base64,{RED_PIXEL}"]
    texts = " ".join(p["text"] for p in user["content"] if p["type"] == "text")
    assert (
        "### Reference (1 images)" in texts
        and "### Candidate (1 images)" in texts
        and "single red pixel" in texts
    )


@needs_bwrap
def test_a_chart_that_leaves_the_vision_judge_scoreless_is_a_zero_not_infra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def reply(body: dict[str, Any]) -> str:
        candidate = any("Candidate" in p.get("text", "") for p in body["messages"][1]["content"])
        return "I refuse to score this picture." if candidate else '{"score": 0.9, "reasoning": "fine"}'

    draw = f"echo {RED_PIXEL} | base64 -d > /workspace/chart.png"
    with _serve_judge(reply) as (url, bodies):
        record = _visual_eval(tmp_path, monkeypatch, [draw], url)
    assert record["status"] == "ok" and record["reward"] == pytest.approx(0.8 * 0.2 + 0.2)
    assert len(bodies) == 3  # two tries with the chart, one without it (which scores: the chart's doing)


def _has_browser() -> bool:
    import importlib.util

    from openforgerl.env.computer.chromium import chromium_path

    try:
        chromium_path()
    except FileNotFoundError:
        return False
    return importlib.util.find_spec("playwright") is not None


@needs_bwrap
@pytest.mark.skipif(not _has_browser(), reason="no Chromium or Playwright")
def test_a_webpage_recorded_in_the_snapshot_sandbox_goes_to_the_vision_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grader-only script launches Playwright's Chromium unmodified (the host's Chromium through
    `snapshot.browser_shim`); the webpage base asks the judge twice over every frame."""

    page = "<html><body><div style='background:red;color:white'>Sale</div></body></html>"

    def run(out: Path, steps: list[str], url: str) -> dict[str, Any]:
        return _visual_eval(out, monkeypatch, steps, url, task="T912_webpage_banner")

    def reply(body: dict[str, Any]) -> str:
        visual = any("Candidate screenshots" in p.get("text", "") for p in body["messages"][1]["content"])
        return (
            '{"score": 0.8, "reasoning": "a red banner"}'
            if visual
            else '{"score": 0.4, "reasoning": "steady"}'
        )

    with _serve_judge(reply) as (url, bodies):
        built = run(tmp_path / "built", [f'echo "{page}" > /workspace/output.html'], url)
        idle = run(tmp_path / "idle", [], url)
    assert built["status"] == "ok" and built["reward"] == pytest.approx(
        0.8 * round(0.75 * 0.8 + 0.25 * 0.4, 2) + 0.2
    )
    assert idle["status"] == "ok" and idle["reward"] == pytest.approx(
        0.2
    )  # no page, no frames, no judge call
    assert len(bodies) == 2
    for body in bodies:
        images = [p["image_url"]["url"] for p in body["messages"][1]["content"] if p["type"] == "image_url"]
        assert len(images) == 3 and all(
            u.startswith("data:image/png;base64,iVBOR") for u in images
        )  # ref + 2 frames
