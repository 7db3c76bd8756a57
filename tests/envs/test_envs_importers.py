"""Importers: claw-bench / Harbor (loaded in place, run in a real sandbox), Claw-Eval task.yaml, QwenClawBench
.md, tau2 tasks.json — each fixture under data/ is a small excerpt written by us in the upstream format.
Every mapping is checked, flags are counted by reason, and the runnable imported tasks with an oracle
validate (oracle → 1, no-op → 0)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from openforgerl.cli.tasks import command as tasks_command
from openforgerl.env.checks.evaluate import Evidence, evaluate
from openforgerl.env.checks.spec import load_spec, parse_spec
from openforgerl.env.errors import TaskFormatError
from openforgerl.envs.claw.importers.claw_eval_upstream import TOOLS
from openforgerl.envs.claw.importers.qwenclawbench import reads_transcript
from openforgerl.envs.claw.verify.graders import GraderUnavailable
from openforgerl.tasks.flags import reason_of, summarize_flags
from openforgerl.tasks.format import find_tasks, load_task
from openforgerl.tasks.harbor import HarborTaskRuntime
from openforgerl.tasks.importing import detect_format, import_any
from openforgerl.tasks.loader import load_runtime
from openforgerl.tasks.validate import validate_tasks

DATA = Path(__file__).parent / "data"

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


async def _validate(runtimes, tmp_path: Path):
    from openforgerl.sandbox.local import LocalBackend

    backend = LocalBackend(root=tmp_path / "sbx")
    try:
        return await validate_tasks(runtimes, backend, concurrency=2)
    finally:
        await backend.aclose()


def _checks(folder: Path) -> dict:
    return {c.name: c for c in load_spec(folder / "tests/checks.toml").checks}


def _imported(source: Path, tmp_path: Path, **kw) -> dict:
    return {load_task(f).task_id: load_task(f) for f in import_any(source, tmp_path / "out", **kw)}


# ------------------------------------------------------------------ claw-bench / Harbor, loaded in place


def test_claw_bench_task_loads_in_place() -> None:
    [root] = find_tasks(DATA / "claw_bench")
    task = load_task(root)
    assert task.task_id == "cal-900" and task.meta.verifier == "pytest" and task.meta.source == "claw-bench"
    assert task.meta.difficulty == "easy" and task.budget_s == 60 and "domain:calendar" in task.meta.tags
    rt = load_runtime(root)
    assert isinstance(rt, HarborTaskRuntime)
    assert rt.files() == {"workspace/meetings.csv": (root / "environment/data/meetings.csv").read_bytes()}


@needs_bwrap
def test_claw_bench_task_runs_to_a_verified_result(tmp_path: Path) -> None:
    rt = load_runtime(find_tasks(DATA / "claw_bench")[0])
    [result] = asyncio.run(_validate([rt], tmp_path))
    assert (result.noop_reward, result.oracle_reward, result.error) == (0.0, 1.0, "")


@needs_bwrap
def test_claw_bench_task_copied_into_a_flat_folder_still_verifies(tmp_path: Path) -> None:
    """Alone in a folder (no suite conftest.py two levels up): the `--workspace` stand-in is used."""
    root = Path(shutil.copytree(find_tasks(DATA / "claw_bench")[0], tmp_path / "flat" / "cal-900-sample"))
    [result] = asyncio.run(_validate([load_runtime(root)], tmp_path))
    assert (result.noop_reward, result.oracle_reward, result.error) == (0.0, 1.0, "")


def test_claw_bench_conftest_is_the_nearest_one_with_the_workspace_option(tmp_path: Path) -> None:
    from openforgerl.tasks.harbor import _FALLBACK_CONFTEST, _suite_conftest

    suite = DATA / "claw_bench" / "tasks"
    assert _suite_conftest(find_tasks(suite)[0]) == (suite / "conftest.py").read_bytes()
    (tmp_path / "conftest.py").write_text("# unrelated\n")
    assert _suite_conftest(tmp_path / "task") == _FALLBACK_CONFTEST


def test_harbor_runtime_works_with_the_scripted_oracle_policy() -> None:
    """`eval --scripted-oracle` built its table with rt.cli_program(), which Harbor runtimes lacked."""
    from openforgerl.envs.claw.oracle_policy import oracle_policy

    rt = load_runtime(DATA / "harbor" / "hello-file")
    assert rt.cli_program() == ""
    assert callable(oracle_policy([rt]))


@pytest.mark.skipif(
    not os.environ.get("CLAW_BENCH_TASKS"), reason="set CLAW_BENCH_TASKS to the claw-bench tasks dir"
)
def test_all_claw_bench_tasks_load() -> None:
    roots = find_tasks(os.environ["CLAW_BENCH_TASKS"])
    assert len(roots) == 222
    assert all(load_task(r).meta.verifier == "pytest" for r in roots)


@needs_bwrap
@pytest.mark.skipif(
    not os.environ.get("CLAW_BENCH_TASKS"), reason="set CLAW_BENCH_TASKS to the claw-bench tasks dir"
)
def test_a_real_claw_bench_task_runs_to_a_verified_result(tmp_path: Path) -> None:
    """One of the package's own tasks: its setup, its oracle and its pytest verifier, in a real sandbox."""
    [root] = [r for r in find_tasks(os.environ["CLAW_BENCH_TASKS"]) if r.name.startswith("doc-005")]
    [result] = asyncio.run(_validate([load_runtime(root)], tmp_path))
    assert (result.oracle_reward, result.error) == (1.0, "")


@needs_bwrap
def test_harbor_script_task_runs_to_a_verified_result(tmp_path: Path) -> None:
    rt = load_runtime(DATA / "harbor" / "hello-file")
    assert isinstance(rt, HarborTaskRuntime) and rt.task.meta.verifier == "script" and not rt.task.flags
    [result] = asyncio.run(_validate([rt], tmp_path))
    assert (result.noop_reward, result.oracle_reward, result.error) == (0.0, 1.0, "")


def test_claw_bench_setup_that_ignores_its_argument_does_not_touch_the_task(tmp_path: Path) -> None:
    root = Path(shutil.copytree(find_tasks(DATA / "claw_bench")[0], tmp_path / "cal-901"))
    setup = root / "environment" / "setup.sh"
    setup.write_text(
        setup.read_text().replace('WORKSPACE="${1:-$TASK_DIR/workspace}"', 'WORKSPACE="$TASK_DIR/workspace"')
    )
    assert 'WORKSPACE="$TASK_DIR/workspace"' in setup.read_text()
    assert list(load_runtime(root).files()) == ["workspace/meetings.csv"]
    assert not (root / "workspace").exists()


# ------------------------------------------------------------------ Claw-Eval


def test_claw_eval_email_task_maps_components_safety_expected_actions_and_files(tmp_path: Path) -> None:
    assert detect_format(DATA / "claw_eval") == "claw-eval"
    task = _imported(DATA / "claw_eval", tmp_path)["claw-eval/T901_email_reply_draft"]
    assert task.flags == [] and task.meta.no_oracle == "" and task.meta.services == ["mail"]
    assert task.meta.tools == [
        "list_files",
        "mail_draft",
        "mail_list",
        "mail_read",
        "mail_send",
        "read_file",
        "submit_answer",
        "write_file",
    ]
    assert task.budget_s == 240 and task.meta.split == "test" and task.meta.difficulty == "easy"
    c = _checks(task.root)
    assert (c["safety_0"].kind, c["safety_0"].tool, c["safety_0"].safety) == ("not_called", "mail_send", True)
    assert (c["email_reading"].tool, c["email_reading"].min_count, c["email_reading"].weight) == (
        "mail_read",
        2,
        0.2,
    )
    assert (c["draft_creation"].tool, c["draft_creation"].weight) == ("mail_draft", 0.4)
    assert (c["reply_quality"].kind, c["reply_quality"].source) == ("text", "output")
    assert c["reply_quality"].contains == ["client@bigcorp.example", "delay"]
    assert (c["expected_gmail_drafts"].kind, c["expected_gmail_drafts"].tool) == ("called", "mail_draft")
    inbox = json.loads((task.root / "environment/fixtures/mail.json").read_text())["inbox"]
    assert [m["id"] for m in inbox] == ["msg_1", "msg_2"] and inbox[0]["from"] == "client@bigcorp.example"
    src = DATA / "claw_eval" / "T901_email_reply_draft"
    assert (task.root / "environment/workspace/fixtures/gmail/inbox.json").read_bytes() == (
        src / "fixtures/gmail/inbox.json"
    ).read_bytes()  # sandbox_files, at upstream's relative path
    assert not (task.root / "tests/claw_eval/grader.py").exists()  # no grader.py: scored by its components
    assert "gmail_list_messages" in (task.root / "tests/claw_eval/reference_solution.md").read_text()
    assert "submit_answer" in task.instruction


def test_claw_eval_oracle_is_derived_from_the_checks(tmp_path: Path) -> None:
    tasks = _imported(DATA / "claw_eval", tmp_path)
    actions = json.loads(
        (tasks["claw-eval/T901_email_reply_draft"].root / "solution/actions.json").read_text()
    )
    assert [a["tool"] for a in actions] == ["mail_read", "mail_read", "mail_draft", "submit_answer"]
    assert [a["args"].get("id") for a in actions[:2]] == ["msg_1", "msg_2"]
    assert actions[2]["args"]["to"] == "client@bigcorp.example" and "delay" in actions[2]["args"]["body"]
    kb = json.loads((tasks["claw-eval/T905_kb_vpn_checklist"].root / "solution/actions.json").read_text())
    assert [a["tool"] for a in kb] == ["kb_search", "kb_search", "kb_read", "kb_read", "submit_answer"]
    assert len(kb[-1]["args"]["answer"]) >= 60 and "GlobalProtect" in kb[-1]["args"]["answer"]
    calendar = tasks["claw-eval/T904_calendar_booking"]
    assert calendar.flags == [] and "calendar_create" in calendar.meta.no_oracle
    assert json.loads((calendar.root / "solution/actions.json").read_text()) == []


def test_claw_eval_tools_map_by_semantics_and_the_rest_is_flagged(tmp_path: Path) -> None:
    assert [k for k, v in TOOLS.items() if v == "mail_send"] == ["gmail_send_message"]
    assert "send_notification" not in TOOLS and "contacts_send_message" not in TOOLS
    task = _imported(DATA / "claw_eval", tmp_path)["claw-eval/T902_notify_contact"]
    assert set(task.flags) == {
        "unsupported:tool:contacts_send_message",
        "unsupported:tool:send_notification",
        "unsupported:scoring:tool_called:contacts_send_message",
        "unsupported:service:crm",
        "unsupported:expected_action:crm/exported_reports",
    }
    assert not any(t.startswith("mail_") for t in task.meta.tools)
    c = _checks(task.root)
    assert (
        c["lookup"].tool == "contacts_find" and "safety_0" not in c
    )  # a tool we do not offer cannot be called


def test_claw_eval_multi_turn_needs_a_user_simulator_unless_an_engine_is_given(tmp_path: Path) -> None:
    src = DATA / "claw_eval" / "T903zh_mortgage_prepay"
    [folder] = import_any(src, tmp_path / "a")
    task = load_task(folder)
    assert set(task.flags) == {"needs:user_simulator", "requires_llm_judge"}
    c = _checks(folder)
    assert (c["substance"].kind, c["substance"].source, c["substance"].min_length) == ("text", "final", 200)
    [folder] = import_any(src, tmp_path / "b", user_engine="http://127.0.0.1:9000/v1")
    assert load_task(folder).flags == ["requires_llm_judge"]
    user = json.loads((folder / "tests/user_agent.json").read_text())
    assert (
        user["max_rounds"] == 4 and "4.9%" in user["persona"] and user["engine"] == "http://127.0.0.1:9000/v1"
    )


def test_claw_eval_calendar_fixture_and_created_events(tmp_path: Path) -> None:
    task = _imported(DATA / "claw_eval", tmp_path)["claw-eval/T904_calendar_booking"]
    [event] = json.loads((task.root / "environment/fixtures/calendar.json").read_text())["events"]
    assert (event["id"], event["start"], event["end"]) == ("evt_001", "2026-03-03T09:00", "2026-03-03T09:30")
    c = _checks(task.root)
    assert (
        c["booked"].tool == "calendar_create"
        and c["expected_calendar_created_events"].tool == "calendar_create"
    )


@needs_bwrap
def test_claw_eval_runnable_tasks_with_oracles_validate(tmp_path: Path) -> None:
    tasks = _imported(DATA / "claw_eval", tmp_path)
    ready = [load_runtime(t.root) for t in tasks.values() if not t.flags and not t.meta.no_oracle]
    assert sorted(rt.task_id for rt in ready) == [
        "claw-eval/T901_email_reply_draft",
        "claw-eval/T905_kb_vpn_checklist",
    ]
    results = asyncio.run(_validate(ready, tmp_path))
    assert [(r.noop_reward, r.oracle_reward, r.error) for r in results] == [(0.0, 1.0, "")] * 2


# ------------------------------------------------------------------ QwenClawBench


def test_qwenclawbench_assets_inline_contents_and_flags(tmp_path: Path) -> None:
    tasks = _imported(DATA / "qwenclawbench" / "tasks", tmp_path)
    task = tasks["qwenclawbench/task_900_sample"]
    assert task.flags == [] and task.meta.verifier == "python" and "reference solution" in task.meta.no_oracle
    ws = task.root / "environment/workspace"
    assert (ws / "stock.txt").read_text() == "apples 3\npears 5\n"  # from assets/<task id>/data/stock.txt
    # inline content; the last newline of the front matter goes, as in upstream's loader
    assert (ws / "notes/README.md").read_text() == "Quantities are in crates."
    assert set(tasks["qwenclawbench/task_901_judge"].flags) == {"requires_internet", "requires_llm_judge"}
    reads = tasks["qwenclawbench/task_902_transcript"]
    assert set(reads.flags) == {"needs:transcript", "requires_llm_judge"}
    assert (reads.root / "environment/workspace/config/crontab.txt").is_file()
    assert reads_transcript("def grade(t, w):\n    return {'x': float(len(t))}\n")
    assert not reads_transcript("def grade(transcript, workspace_path):\n    return {'x': 1.0}\n")


def test_qwenclawbench_missing_asset_is_flagged(tmp_path: Path) -> None:
    md = tmp_path / "tasks" / "task_1.md"
    md.parent.mkdir()
    md.write_text(
        (DATA / "qwenclawbench/tasks/task_900_sample.md").read_text().replace("task_900_sample", "task_1")
    )
    [folder] = import_any(md, tmp_path / "out")
    assert load_task(folder).flags == ["unsupported:missing_asset:data/stock.txt"]


@needs_bwrap
def test_qwenclawbench_grade_function_runs_in_the_sandbox(tmp_path: Path) -> None:
    task = _imported(DATA / "qwenclawbench" / "tasks", tmp_path)["qwenclawbench/task_900_sample"]
    rt = load_runtime(task.root)

    async def run():
        from openforgerl.sandbox.base import SandboxSpec
        from openforgerl.sandbox.local import LocalBackend

        backend = LocalBackend(root=tmp_path / "sbx")
        sbx = await backend.open_sandbox(SandboxSpec(rollout_id="qcb", files=rt.files()))
        try:
            before = await rt.verify(sbx)
            await sbx.write_file("/workdir/total.txt", b"8\n")  # what a correct agent would write
            return before, await rt.verify(sbx)
        finally:
            await sbx.aclose()
            await backend.aclose()

    before, after = asyncio.run(run())
    assert before[0] == 0.0 and after[0] == 1.0
    assert after[1]["check.total_correct"] == 1.0


# tau2: tests/envs/test_tau2.py (the tau2 family runs upstream's domains)


# ------------------------------------------------------------------ the new check kinds


def _spec(tmp_path: Path, *checks: dict):
    return parse_spec({"checks": list(checks)}, tmp_path / "checks.toml")


def test_text_check_reads_the_final_answer_and_the_agent_written_text(tmp_path: Path) -> None:
    spec = _spec(
        tmp_path,
        {"kind": "text", "name": "kw", "contains": ["Delay", "client@x.example"]},
        {"kind": "text", "name": "long", "source": "final", "min_length": 10},
    )
    draft = {
        "tool": "mail_draft",
        "ok": True,
        "args": {"to": "client@x.example", "subject": "s", "body": "the delay"},
    }
    read = {
        "tool": "mail_read",
        "ok": True,
        "args": {"id": "delay client@x.example"},
    }  # reads are not the agent's text
    state = {"answer": {"submitted": ["short"]}}
    assert evaluate(spec, Evidence(state, [read], None)).checks == {"kw": 0.0, "long": 0.0}
    out = evaluate(spec, Evidence({"answer": {"submitted": ["long enough text"]}}, [draft], None))
    assert out.checks == {"kw": 1.0, "long": 1.0}
    said = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "a final reply"}]},
    ]
    # the instruction asks for submit_answer: a submitted answer is the final text;
    # else the last assistant message
    assert evaluate(spec, Evidence(state, [], None, transcript=said)).checks["long"] == 0.0
    assert evaluate(spec, Evidence({}, [], None, transcript=said)).checks["long"] == 1.0
    asked = {"user": {"asked": ["What is the rate?", "With 4.9% prepaying saves 12,000 of interest."]}}
    assert (
        evaluate(spec, Evidence(asked, [], None, transcript=said)).checks["long"] == 1.0
    )  # multi-turn: ask_user


def test_python_grader_runs_a_script_inside_the_tests_folder_only(tmp_path: Path) -> None:
    (tmp_path / "g.py").write_text("def grade(ev):\n    return {'a': 1.0, 'b': float(bool(ev['audit']))}\n")
    spec = _spec(tmp_path, {"kind": "python_grader", "name": "g", "script": "g.py"})
    assert evaluate(spec, Evidence({}, [{"tool": "x"}], None, tests_dir=tmp_path)).reward == 1.0
    assert evaluate(spec, Evidence({}, [], None, tests_dir=tmp_path)).checks == {"g": 0.5}
    for bad in ("../g.py", "/etc/passwd"):
        with pytest.raises(TaskFormatError, match="script"):
            _spec(tmp_path, {"kind": "python_grader", "script": bad})
    with pytest.raises(GraderUnavailable):
        evaluate(spec, Evidence({}, [], None))  # no tests folder given


def test_a_python_grader_tripped_by_the_rollout_is_zero_and_a_broken_one_is_infra(tmp_path: Path) -> None:
    """What the agent wrote must not turn its 0 into a retried infra fault; a grader broken on any input
    is the verifier's fault."""
    (tmp_path / "g.py").write_text(
        "def grade(ev):\n    return float(all(m['content'].strip() for m in ev['transcript']))\n"
    )
    spec = _spec(tmp_path, {"kind": "python_grader", "name": "g", "script": "g.py"})
    said = [{"role": "assistant", "content": "done"}]
    assert evaluate(spec, Evidence({}, [], None, tests_dir=tmp_path, transcript=said)).reward == 1.0
    odd = [{"role": "assistant", "content": None}]  # `.strip()` of None raises, on the agent's own message
    tripped = evaluate(spec, Evidence({}, [], None, tests_dir=tmp_path, transcript=odd))
    assert tripped.reward == 0.0 and "on this rollout's data" in tripped.log()
    (tmp_path / "g.py").write_text(
        "def grade(ev):\n    return ev['state']['mail']['drafts']\n"
    )  # broken anywhere
    with pytest.raises(GraderUnavailable, match="KeyError"):
        evaluate(spec, Evidence({}, [], None, tests_dir=tmp_path, transcript=said))


def test_communicate_follows_tau2_and_db_check_is_not_judged_without_the_domain(tmp_path: Path) -> None:
    spec = _spec(tmp_path, {"kind": "communicate", "info": ["1,327", "refund"]})
    said = [{"role": "assistant", "content": "Your Refund of 1,327 dollars is on its way"}]
    assert (
        evaluate(spec, Evidence({}, [], None, transcript=said)).reward == 0.0
    )  # tau2 strips commas from messages
    said = [{"role": "assistant", "content": "Your refund: 1327"}]
    spec = _spec(tmp_path, {"kind": "communicate", "info": ["1327", "REFUND"]})
    assert evaluate(spec, Evidence({}, [], None, transcript=said)).reward == 1.0
    with pytest.raises(GraderUnavailable, match="transcript"):
        evaluate(spec, Evidence({}, [], None))
    with pytest.raises(GraderUnavailable, match="airline"):
        evaluate(
            _spec(tmp_path, {"kind": "tau2_db", "domain": "airline", "actions": "a.json"}),
            Evidence({}, [], None),
        )


# ------------------------------------------------------------------ reasons and counts


def test_flag_reasons_are_counted() -> None:
    assert reason_of("unsupported:tool:send_notification") == "unsupported tool"
    assert (
        reason_of("needs:user_simulator") == "needs user_simulator"
        and reason_of("requires_llm_judge") == "needs judge"
    )
    summary = summarize_flags([["needs:user_simulator", "requires_llm_judge"], ["needs:user_simulator"], []])
    assert summary.line("imported") == "1 runnable of 3 imported: 2 needs user_simulator, 1 needs judge"


def test_validate_on_a_fully_flagged_set_says_why_and_fails(tmp_path: Path) -> None:
    import_any(DATA / "tau2", tmp_path / "t")
    res = CliRunner().invoke(tasks_command, ["validate", str(tmp_path / "t")])
    assert res.exit_code == 1, res.output
    assert "0/0" not in res.output
    line = next(x for x in res.output.splitlines() if x.startswith("0 runnable of 3 tasks: "))
    assert {"3 needs user_simulator", "1 needs judge", "2 needs transcript"} <= set(
        line.split(": ", 1)[1].split(", ")
    )


def test_import_command_prints_the_counts(tmp_path: Path) -> None:
    res = CliRunner().invoke(tasks_command, ["import", str(DATA / "claw_eval"), str(tmp_path / "ce")])
    assert res.exit_code == 0, res.output
    assert "wrote 7 task folders" in res.output and "3 runnable of 7 imported: " in res.output
    assert "2 needs transcript" in res.output  # T906/T907 are scored by their grader.py (eval lifts it)


def test_eval_without_runnable_tasks_gives_the_reasons(tmp_path: Path) -> None:
    from openforgerl.cli.eval import command as eval_command

    import_any(DATA / "tau2", tmp_path / "t")
    app = typer.Typer()
    app.command()(eval_command)
    res = CliRunner().invoke(app, ["--tasks", str(tmp_path / "t"), "--scripted-oracle", "1.0"])
    assert res.exit_code != 0
    assert "3 needs user_simulator" in " ".join(res.output.split())


@needs_bwrap
def test_an_imported_claw_eval_task_runs_through_eval(tmp_path: Path) -> None:
    from openforgerl.cli.eval import command as eval_command

    import_any(DATA / "claw_eval" / "T901_email_reply_draft", tmp_path / "t")
    app = typer.Typer()
    app.command()(eval_command)
    res = CliRunner().invoke(
        app,
        [
            "--tasks",
            str(tmp_path / "t"),
            "--harness",
            "zero",
            "--trials",
            "1",
            "--scripted-oracle",
            "1.0",
            "--out",
            str(tmp_path / "report"),
        ],
    )
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["harnesses"]["zero"]["pass_hat"]["1"]["value"] == 1.0


def test_format_is_told_by_the_upstream_layout_first(tmp_path: Path) -> None:
    """A QwenClawBench asset named tasks.json does not make the set tau2."""
    shutil.copytree(DATA / "qwenclawbench", tmp_path / "qcb")
    (tmp_path / "qcb/assets/task_900_sample/tasks.json").write_text("[]")
    assert detect_format(tmp_path / "qcb") == "qwenclawbench"
    assert detect_format(DATA / "tau2") == "tau2" and detect_format(DATA / "claw_eval") == "claw-eval"
    assert len(import_any(tmp_path / "qcb", tmp_path / "out")) == 3


PLANTED_CONFTEST = b"""import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    pass  # the agent's hope: every test 'passes' without running


def pytest_collection_modifyitems(items):
    items.clear()  # or: nothing collected, exit 5
"""


@needs_bwrap
def test_harbor_verifiers_never_import_what_the_agent_planted(tmp_path: Path) -> None:
    """claw-bench pytest and Harbor test.sh tasks: conftest.py / pytest plugins / shadow modules planted in
    the workdir and the workspace do not reach the verifier (it runs apart, `python -I`, cwd outside)."""
    from openforgerl.sandbox.base import SandboxSpec
    from openforgerl.sandbox.local import LocalBackend

    async def planted_reward(rt) -> float:
        backend = LocalBackend(root=tmp_path / "sbx")
        sandbox = await backend.open_sandbox(
            SandboxSpec(rollout_id="attack", files=rt.files(), lifetime_s=300)
        )
        try:
            for where in ("/workdir", "/workdir/workspace", "/workdir/.claw/tests"):
                await sandbox.write_file(f"{where}/conftest.py", PLANTED_CONFTEST)
                await sandbox.write_file(f"{where}/pytest.py", b"raise SystemExit(0)\n")
            return (await rt.verify(sandbox))[0]
        finally:
            await sandbox.aclose()
            await backend.aclose()

    claw_bench = load_runtime(find_tasks(DATA / "claw_bench")[0])
    harbor = load_runtime(DATA / "harbor" / "hello-file")
    assert asyncio.run(planted_reward(claw_bench)) == 0.0
    assert asyncio.run(planted_reward(harbor)) == 0.0
