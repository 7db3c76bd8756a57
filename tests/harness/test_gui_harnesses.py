"""Third-party GUI harnesses, unmodified, through the real gateway: `@ui-tars/sdk` (npm) and `browser-use`
(PyPI). Each is driven by a scripted policy speaking its own output format (`harness.gui_scripted_policy`):
on the host against the real computer-service code over a fake screen, then in real GUI sandboxes through
the real orchestrator (a browser task, and for UI-TARS a desktop task: reward 1, every screenshot stored
once in the blob store, every scripted action as mask-1 tokens), and with a persistent 503 (infra within
the budget). Oracle `target` selectors are resolved in a twin sandbox, as in `test_zero_gui.py`.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harness_e2e import HARNESS_FIGURES, contains, masked_runs, require_installed
from test_zero_gui import GUI_SUITE, ServiceScreen, _gui_missing, oracle_pixels

from openforgerl.engines.scripted import MODEL_NAME, Faults, ScriptedEngine
from openforgerl.env.computer.service import serve_computer
from openforgerl.harness.base import HarnessContext
from openforgerl.harness.gui_scripted_policy import (
    browser_use_fill_and_submit,
    oracle_to_ui_tars,
    ui_tars_policy,
)
from openforgerl.harness.host import run_on_host
from openforgerl.harness.registry import get_harness
from openforgerl.orchestrator.classify import call_log_taint
from openforgerl.records import RolloutStatus
from openforgerl.trajectory.reconstruct import reconstruct_samples

pytestmark = [pytest.mark.harness, pytest.mark.gui, pytest.mark.timeout(600)]
BUDGET_S = 150.0  # each sandbox rollout's budget; the faulted ones must end well inside it


@pytest.fixture
def computer_url() -> Iterator[str]:
    server = serve_computer(ServiceScreen(), 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def host_context(opened: dict[str, str], root: Path, computer_url: str, instruction: str) -> HarnessContext:
    (root / "work").mkdir(exist_ok=True)
    (root / "home").mkdir(exist_ok=True)
    return HarnessContext(
        instruction=instruction,
        openai_base_url=opened["openai_base_url"],
        anthropic_base_url=opened["anthropic_base_url"],
        api_key=opened["api_key"],
        model=MODEL_NAME,
        workdir=str(root / "work"),
        home=str(root / "home"),
        tool_service_url=computer_url,
    )


def resent_suffix(before: list[str], now: list[str]) -> bool:
    """`now` = the newest screenshots of `before` (by blob hash) plus one new one: re-sent images are the
    same blob, never stored again."""
    kept = now[:-1]
    return kept == before[len(before) - len(kept) :]


def in_samples(engine: ScriptedEngine, result: Any) -> bool:
    """Every scripted answer, clicks included, is a run of mask-1 tokens in some reconstructed sample."""
    runs = [r for s in result.samples for r in masked_runs(s)]
    clicks = [c for c in engine.produced if "click" in "".join(c.pieces)]
    return bool(clicks) and all(any(contains(r, c.ids) for r in runs) for c in engine.produced)


# -- UI-TARS on the host, fake screen -----------------------------------------------------------------------
async def test_ui_tars_on_the_host_drives_the_computer_service(
    make_gateway, tmp_path: Path, computer_url: str
) -> None:
    tools = require_installed("ui-tars")
    actions = [f"click(start_box='({100 * i},500)')" for i in range(1, 7)] + ["finished()"]
    gw, engine = await make_gateway(ui_tars_policy(actions))
    opened = await gw.open_rollout(harness="ui-tars", task_id="gui-host")
    ctx = host_context(opened, tmp_path, computer_url, "Click along the middle line.")
    started = time.time()
    run = await run_on_host(get_harness("ui-tars", wall_clock_s=60).launch(ctx, tools), tmp_path / "work", 90)
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])
    calls = await gw.gateway.store.list_calls(opened["rollout_id"])
    assert [len(c.images) for c in calls] == [1, 2, 3, 4, 5, 5, 5]  # the SDK keeps the last 5
    events = [
        json.loads(line) for line in (tmp_path / "home" / "ui-tars-transcript.jsonl").read_text().splitlines()
    ]
    executed = [e["executed"] for e in events if e["event"] == "action"]
    assert executed == [{"action": "click", "x": round(0.1 * i * 64), "y": 18} for i in range(1, 7)]
    record = await gw.gateway.store.get_rollout(opened["rollout_id"])
    result = reconstruct_samples(
        calls,
        record.model_copy(
            update={
                "status": RolloutStatus.OK,
                "reward": 1.0,
                "harness": "ui-tars",
                "in_batch": True,
                "group_valid": True,
            }
        ),
    )
    print(
        f"ui-tars host: run {run.duration_s:.1f} s, first call "
        f"{calls[0].started_at - started:.1f} s after launch,",
        result.metrics,
    )
    assert in_samples(engine, result), result.metrics
    shas = [[i.sha256 for i in c.images] for c in calls]
    assert all(resent_suffix(before, now) for before, now in itertools.pairwise(shas))
    distinct = {s for call in shas for s in call}
    assert len(distinct) == len(calls) and all(gw.gateway.store.read_blob(s) for s in distinct)


# -- real GUI sandboxes, the real orchestrator ---------------------------------------------------------------
@dataclass
class SandboxRun:
    record: Any
    calls: list[Any]
    engine: ScriptedEngine
    store_blobs: Callable[[str], bytes | None]
    seconds: float
    first_call_s: float


async def run_in_sandbox(
    harness: str,
    task: str,
    tmp_path: Path,
    make_policy: Callable[[list[dict[str, Any]], Any], Any],
    faults: Faults | None = None,
    **harness_options: Any,
) -> SandboxRun:
    """One rollout of a suite task with `harness`: real orchestrator, local bubblewrap sandbox, real gateway.
    `make_policy(oracle pixel steps, runtime)` builds the scripted policy."""
    if missing := _gui_missing():
        pytest.skip(f"GUI stack missing: {missing}")
    tools = require_installed(harness)
    from openforgerl.gateway.server import start_gateway
    from openforgerl.orchestrator.batch import run_batch
    from openforgerl.orchestrator.config import OrchestratorConfig
    from openforgerl.sandbox.local import LocalBackend
    from openforgerl.store.sqlite import SQLiteCallStore
    from openforgerl.tasks.loader import load_runtime

    rt = load_runtime(GUI_SUITE / task)
    backend = LocalBackend(root=tmp_path / "sbx")
    store = SQLiteCallStore(tmp_path / "calls.db")
    config = OrchestratorConfig(
        group_size=1,
        min_group_size=1,
        retries=0,
        model=MODEL_NAME,
        harness_cache=tools,
        end_at_taint=faults is None,  # with faults: the harness's own exit is checked
        budget_s=BUDGET_S,
    )
    try:
        policy = make_policy(await oracle_pixels(rt, backend), rt)
        engine = ScriptedEngine(policy, faults=faults)
        gateway = await start_gateway(engine, store, call_deadline_s=60.0)
        t0 = time.monotonic()
        try:
            adapter = get_harness(harness, **harness_options)
            batch = await run_batch([rt], adapter, gateway=gateway.access, backend=backend, config=config)
        finally:
            await gateway.aclose()
        seconds = time.monotonic() - t0
        [record] = batch.records
        calls = await store.list_calls(record.rollout_id)
        blobs = {s: store.read_blob(s) for c in calls for s in (i.sha256 for i in c.images)}
    finally:
        await backend.aclose()
        await store.aclose()
    first = min(c.started_at for c in calls) - record.started_at if calls else float("nan")
    print(
        f"{harness} {task}: {len(calls)} calls in {seconds:.1f} "
        f"s, first call {first:.1f} s after the rollout's "
        f"start, timings {record.metadata.get('timings')}"
    )
    return SandboxRun(record, calls, engine, blobs.get, seconds, first)


def check_solved(run: SandboxRun, harness: str, version: str) -> Any:
    """Reward 1, every screenshot stored once (the same bytes -> the same blob on every re-send), every
    scripted answer as mask-1 tokens; records the merge rate and the time to the first call."""
    record = run.record
    assert record.status == RolloutStatus.OK and record.reward == 1.0, (record.metadata, record.verifier_log)
    shas = [[i.sha256 for i in c.images] for c in run.calls]
    assert all(shas) and all(run.store_blobs(s) for call in shas for s in call)
    assert all(resent_suffix(before, now) for before, now in itertools.pairwise(shas)), shas
    # one new screenshot per call; an unchanged screen
    # (e.g. after ctrl+end at the end already) is the same blob
    assert 2 <= len({s for call in shas for s in call}) <= len(run.calls)
    result = reconstruct_samples(run.calls, record)
    assert in_samples(run.engine, result), result.metrics
    HARNESS_FIGURES.append(
        {
            "harness": f"{harness} ({record.task_id})",
            "version": version,
            "protocol": "chat",
            "calls": len(run.calls),
            "side_calls": sum(c.side_call for c in run.calls),
            "merge_rate": result.metrics.merge_rate,
            "chains": result.metrics.chains,
            "first_call_s": run.first_call_s,
            "run_s": run.seconds,
        }
    )
    print(f"{harness} {record.task_id}: merge rate {result.metrics.merge_rate}, {result.metrics}")
    return result


def ui_tars_from_oracle(steps: list[dict[str, Any]], rt: Any) -> Any:
    return ui_tars_policy(oracle_to_ui_tars(steps, *rt.screen))


@pytest.mark.parametrize("task", ["board-add-01", "desktop-editor-01"])
async def test_ui_tars_solves_a_gui_task_in_a_sandbox(task: str, tmp_path: Path) -> None:
    run = await run_in_sandbox("ui-tars", task, tmp_path, ui_tars_from_oracle, wall_clock_s=120)
    result = check_solved(run, "ui-tars", "1.2.3")
    images = [len(c.images) for c in run.calls]
    assert images == [min(i, 5) for i in range(1, len(images) + 1)]
    assert dict(result.metrics.break_causes) == ({"image_pruned": len(images) - 5} if len(images) > 5 else {})


async def test_ui_tars_persistent_503_in_a_sandbox_is_infra(tmp_path: Path) -> None:
    run = await run_in_sandbox(
        "ui-tars",
        "desktop-editor-01",
        tmp_path,
        ui_tars_from_oracle,
        Faults(http_errors=1000, http_status=503),
        wall_clock_s=120,
    )
    assert run.record.status == RolloutStatus.INFRA_ENGINE and run.record.infra_tainted, run.record.metadata
    assert call_log_taint(run.calls, None) == RolloutStatus.INFRA_ENGINE
    assert run.record.metadata["harness_returncode"] == 3
    assert len(run.calls) == 1 and run.seconds < BUDGET_S  # the SDK does not retry a model call by default


# -- browser-use ---------------------------------------------------------------------------------------------
def board_policy(steps: list[dict[str, Any]] | None = None, rt: Any = None) -> Any:
    """board-add: type the card's title into `#new-title` and click `#add`
    (the oracle's targets), by index."""
    return browser_use_fill_and_submit("id=new-title", "Call the caterer", "id=add")


async def test_browser_use_on_the_host_drives_a_real_app(make_gateway, tmp_path: Path) -> None:
    if missing := _gui_missing():
        pytest.skip(f"GUI stack missing: {missing}")
    tools = require_installed("browser-use")
    from openforgerl.env.apps import build_apps

    fixtures = json.loads((GUI_SUITE / "board-add-01" / "environment" / "gui.json").read_text())["apps"]
    apps, server = build_apps(fixtures, "t0ken", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        gw, engine = await make_gateway(board_policy())
        opened = await gw.open_rollout(harness="browser-use", task_id="gui-host")
        ctx = host_context(opened, tmp_path, "", "Add a new card 'Call the caterer' to the to-do board.")
        (tmp_path / "work" / ".gui").mkdir()
        (tmp_path / "work" / ".gui" / "config.json").write_text(
            json.dumps({"start_url": f"http://127.0.0.1:{server.server_address[1]}/board"})
        )
        launch = get_harness("browser-use", wall_clock_s=120).launch(ctx, tools)
        started = time.time()
        run = await run_on_host(launch, tmp_path / "work", 150)
        state = json.dumps(apps.snapshot())
    finally:
        server.shutdown()
        server.server_close()
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-3000:])
    assert "Call the caterer" in state
    calls = await gw.gateway.store.list_calls(opened["rollout_id"])
    assert len(calls) == 3 and all(len(c.images) == 1 for c in calls)
    assert all(c.request.get("response_format", {}).get("type") == "json_schema" for c in calls)
    record = await gw.gateway.store.get_rollout(opened["rollout_id"])
    result = reconstruct_samples(
        calls,
        record.model_copy(
            update={
                "status": RolloutStatus.OK,
                "reward": 1.0,
                "harness": "browser-use",
                "in_batch": True,
                "group_valid": True,
            }
        ),
    )
    assert in_samples(engine, result) and result.metrics.chains == 3, result.metrics
    print(
        f"browser-use host: run {run.duration_s:.1f} s, first "
        f"call {calls[0].started_at - started:.1f} s after launch"
    )


async def test_browser_use_solves_a_browser_task_in_a_sandbox(tmp_path: Path) -> None:
    run = await run_in_sandbox("browser-use", "board-add-01", tmp_path, board_policy, wall_clock_s=120)
    result = check_solved(run, "browser-use", "0.13.14")
    assert [len(c.images) for c in run.calls] == [1, 1, 1]  # one screenshot per state message
    assert all(c.request.get("response_format", {}).get("type") == "json_schema" for c in run.calls)
    assert result.metrics.chains == len(
        run.calls
    )  # the prompt is rebuilt every step: no call extends another


async def test_browser_use_persistent_503_in_a_sandbox_is_infra(tmp_path: Path) -> None:
    run = await run_in_sandbox(
        "browser-use",
        "board-add-01",
        tmp_path,
        board_policy,
        Faults(http_errors=1000, http_status=503),
        wall_clock_s=120,
    )
    assert run.record.status == RolloutStatus.INFRA_ENGINE and run.record.infra_tainted, run.record.metadata
    assert call_log_taint(run.calls, None) == RolloutStatus.INFRA_ENGINE
    assert run.record.metadata["harness_returncode"] == 3
    assert (
        len(run.calls) == 3 and run.seconds < BUDGET_S
    )  # openai's own 2 retries, then max_failures=1 stops it


# -- a mixed run: two GUI harnesses over browser and desktop tasks -------------------------------------------
def _prompt_text(messages: list[dict[str, Any]]) -> str:
    parts = [m.get("content") for m in messages if m.get("role") in ("system", "user")]
    return "\n".join(
        p if isinstance(p, str) else " ".join(str(x.get("text", "")) for x in p if isinstance(x, dict))
        for p in parts
        if p
    )


async def test_a_mixed_eval_of_zero_gui_and_ui_tars_over_browser_and_desktop_tasks(tmp_path: Path) -> None:
    """Mixed GUI runs work like text ones: one `run_eval` (what `openforgerl eval --harness zero-gui --harness
    ui-tars` runs) over a browser and a desktop task, each harness with its default options: zero-gui names
    the environment the computer service reports (no per-kind config), UI-TARS needs none. A scripted policy
    speaks each harness's format; every trial is solved, and the report has both harnesses and, per harness,
    rows for browser, desktop and the task's web app."""
    if missing := _gui_missing():
        pytest.skip(f"GUI stack missing: {missing}")
    tools = require_installed("ui-tars")
    from test_zero_gui import oracle_to_calls, replay_policy

    from openforgerl.eval.report import build_report
    from openforgerl.eval.runner import run_eval
    from openforgerl.gateway.server import start_gateway
    from openforgerl.sandbox.local import LocalBackend
    from openforgerl.store.sqlite import SQLiteCallStore
    from openforgerl.tasks.loader import load_runtime

    runtimes = [load_runtime(GUI_SUITE / t) for t in ("board-move-02", "desktop-board-01")]
    backend = LocalBackend(root=tmp_path / "sbx")
    store = SQLiteCallStore(tmp_path / "calls.db")
    try:
        plans = []
        for rt in runtimes:
            steps = await oracle_pixels(rt, backend)
            plans.append(
                (
                    rt.instruction,
                    replay_policy(oracle_to_calls(steps, *rt.screen)),
                    ui_tars_policy(oracle_to_ui_tars(steps, *rt.screen)),
                )
            )

        def policy(turn: Any) -> str:
            text = _prompt_text(turn.messages)
            [(zero_gui, ui_tars)] = [(z, u) for instruction, z, u in plans if instruction in text]
            return (zero_gui if turn.tools else ui_tars)(turn)

        gateway = await start_gateway(ScriptedEngine(policy), store, call_deadline_s=60.0)
        try:
            trials = await run_eval(
                runtimes,
                ["zero-gui", "ui-tars"],
                gateway=gateway.access,
                backend=backend,
                group_size=2,
                model=MODEL_NAME,
                harness_cache=tools,
                budget_s=BUDGET_S,
                retries=1,
                max_running=4,
            )
        finally:
            await gateway.aclose()
        calls = [c for rid in store.read_rollout_ids_with_calls() for c in store.read_calls(rid)]
    finally:
        await backend.aclose()
        await store.aclose()
    assert sorted((t.harness, t.task_id, t.reward) for t in trials) == sorted(
        (h, rt.task_id, 1.0) for h in ("zero-gui", "ui-tars") for rt in runtimes for _ in range(2)
    ), trials
    report = build_report(trials, 2)
    for harness in ("zero-gui", "ui-tars"):
        assert report["harnesses"][harness]["pass_at"][2]["value"] == 1.0
        assert set(report["services"][harness]) == {"browser", "desktop", "board"}
        assert (
            report["services"][harness]["browser"]["trials"]
            == report["services"][harness]["desktop"]["trials"]
            == 2
        )
    described = {}  # zero-gui's tool description per task: the environment the service reported
    for call in calls:
        if call.request.get("tools"):
            [rt] = [rt for rt in runtimes if rt.instruction in _prompt_text(call.request["messages"])]
            said = re.search(r"interface to a (\w+) GUI", call.request["tools"][0]["function"]["description"])
            described.setdefault(rt.kind, set()).add(said.group(1) if said else None)
    assert described == {"browser": {"browser"}, "desktop": {"desktop"}}, described
