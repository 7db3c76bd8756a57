"""`zero-gui`: the `computer_use` tool and coordinates, chunked screenshot pruning, the malformed-action
policy (pure, with faked edges), then the real process through the real gateway: against a fake
computer service on the host (an engine fault ends as infra), and in real GUI sandboxes through the
real orchestrator (one browser and one desktop task solved by a scripted policy -> reward 1).

The scripted policy is the model's decisions only: it replays the task's oracle as `computer_use` calls.
Oracle steps that name a CSS `target` are resolved first in a twin sandbox of the same task, by the
environment's own oracle through the token-guarded `/locate` (the token is held by the test on the
host, never by the agent's sandbox); the coordinates are then given to the policy in 0-1000 units.
"""

from __future__ import annotations

import itertools
import json
import struct
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harness_e2e import contains, masked_runs, tool_call_completions

from openforgerl.engines.chat_format import format_tool_call
from openforgerl.engines.scripted import MODEL_NAME, Faults, ScriptedEngine, Turn
from openforgerl.env.computer.actions import ActionError, Screen
from openforgerl.env.computer.service import serve_computer
from openforgerl.harness.base import HarnessContext
from openforgerl.harness.host import run_on_host
from openforgerl.harness.registry import get_harness
from openforgerl.harness.zero.loop import Budget
from openforgerl.harness.zero_gui.history import PLACEHOLDER, Pruning, count_images, prune
from openforgerl.harness.zero_gui.loop import ExitCode, Options, run_agent
from openforgerl.harness.zero_gui.tool import (
    ACTIONS,
    Act,
    MalformedAction,
    Terminal,
    computer_use_schema,
    parse_call,
    to_pixels,
)
from openforgerl.orchestrator.classify import call_log_taint
from openforgerl.records import RolloutStatus
from openforgerl.trajectory.reconstruct import reconstruct_samples

GUI_SUITE = Path(__file__).resolve().parents[2] / "src/openforgerl/envs/gui/suite/tasks"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gui"))


# -- fakes ---------------------------------------------------------------------------------------
def png(width: int = 1280, height: int = 720, shade: int = 0) -> bytes:
    """A real grey PNG (the gateway parses image headers); `shade` makes each screenshot distinct."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + bytes([shade % 256]) * width for _ in range(height))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    )


class FakeComputer:
    """The computer the loop talks to (HttpComputer's surface): records actions, new PNG after each.
    Refuses what the real service refuses for one case only: a `key` named `nosuchkey` (400)."""

    def __init__(self) -> None:
        self.screen, self.timeout_s, self.actions, self.kind = Screen(), 30.0, [], "desktop"
        self.shots = 0

    def wait_ready(self, timeout_s: float = 60.0) -> Screen:
        return self.screen

    def screenshot(self) -> bytes:
        self.shots += 1
        return png(64, 36, self.shots)

    def act(self, action: dict[str, Any], screenshot: bool = False) -> Any:
        if action.get("keys") == "nosuchkey":
            raise ActionError("unknown key 'nosuchkey'")
        self.actions.append(action)
        return self.screenshot() if screenshot else {"ok": True}


class FakeClient:
    """ChatClient's surface: answers from a list of tool-call argument dicts (or text); keeps bodies."""

    def __init__(self, answers: list[dict[str, Any] | str]) -> None:
        self.answers, self.bodies = list(answers), []

    def create(
        self, body: dict[str, Any], *, timeout: float, deadline: float | None = None
    ) -> dict[str, Any]:
        self.bodies.append(json.loads(json.dumps(body)))
        answer = self.answers.pop(0)
        if isinstance(answer, str):
            return {"choices": [{"message": {"role": "assistant", "content": answer}}]}
        call = {
            "id": f"call{len(self.bodies)}",
            "type": "function",
            "function": {"name": "computer_use", "arguments": json.dumps(answer)},
        }
        return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}


def budget(turns: int = 30, seconds: float = 60.0) -> Budget:
    return Budget(time.monotonic() + seconds, turns, 30.0)


def click(x: int, y: int) -> dict[str, Any]:
    return {"action": "left_click", "coordinate": [x, y]}


# -- the tool and its coordinates -------------------------------------------------------------------
def test_schema_is_one_computer_use_function_with_the_screen_size() -> None:
    schema = computer_use_schema(1280, 720)
    fn = schema["function"]
    assert schema["type"] == "function" and fn["name"] == "computer_use"
    assert fn["parameters"]["properties"]["action"]["enum"] == list(ACTIONS)
    assert set(ACTIONS) == {
        "left_click",
        "double_click",
        "right_click",
        "left_click_drag",
        "type",
        "key",
        "scroll",
        "wait",
        "terminate",
        "answer",
    }
    assert "1280x720" in fn["description"] and "0-1000" in fn["description"]


@pytest.mark.parametrize(
    ("coord", "size", "pixels"),
    [
        ([0, 0], (1280, 720), (0, 0)),
        ([500, 500], (1280, 720), (640, 360)),
        ([1000, 1000], (1280, 720), (1279, 719)),  # the far edge is clamped onto the last pixel
        ([999, 999], (1280, 720), (1279, 719)),
        ([1, 1], (1280, 720), (1, 1)),  # 1.28 -> 1, 0.72 -> 1: round half up, not truncation
        ([250.5, 333], (1920, 1080), (481, 360)),
        ([125, 125], (4, 4), (1, 1)),  # 0.5 rounds up (Python's round() would give 0)
    ],
)
def test_to_pixels_rounds_half_up_and_clamps_the_edge(
    coord: list[float], size: tuple[int, int], pixels: tuple[int, int]
) -> None:
    assert to_pixels(coord, *size) == pixels


@pytest.mark.parametrize("bad", [[-1, 5], [5, 1001], [1, 2, 3], "500,500", [True, 5], None, ["5", 5]])
def test_to_pixels_refuses_what_is_not_a_0_1000_point(bad: Any) -> None:
    with pytest.raises(MalformedAction):
        to_pixels(bad, 1280, 720)


def test_calls_become_service_actions() -> None:
    def p(args: dict[str, Any], pointer: tuple[int, int] | None = None) -> Act | Terminal:
        return parse_call("computer_use", json.dumps(args), 1280, 720, pointer)

    assert p(click(500, 500)) == Act({"action": "click", "x": 640, "y": 360}, (640, 360))
    assert p({"action": "right_click", "coordinate": [0, 0]}).body == {
        "action": "right_click",
        "x": 0,
        "y": 0,
    }
    assert p({"action": "double_click", "coordinate": [1000, 0]}).body["x"] == 1279
    drag = p({"action": "left_click_drag", "coordinate": [1000, 500]}, pointer=(10, 20))
    assert drag == Act({"action": "drag", "x": 10, "y": 20, "to_x": 1279, "to_y": 360}, (1279, 360))
    assert (
        p({"action": "left_click_drag", "start_coordinate": [0, 0], "coordinate": [500, 500]}).body["x"] == 0
    )
    assert p({"action": "key", "keys": ["ctrl", "s"]}).body == {"action": "key", "keys": "ctrl+s"}
    assert p({"action": "type", "text": "hi"}).body == {"action": "type", "text": "hi"}
    assert p({"action": "scroll", "pixels": -3}).body == {"action": "scroll", "x": 640, "y": 360, "dy": 3}
    assert p({"action": "scroll", "pixels": 2}, pointer=(5, 6)).body == {
        "action": "scroll",
        "x": 5,
        "y": 6,
        "dy": -2,
    }
    assert p({"action": "wait", "time": 2}).body == {"action": "wait", "seconds": 2.0}
    assert p({"action": "terminate", "status": "failure"}) == Terminal("failure")
    assert p({"action": "answer", "text": "42"}) == Terminal("answer", "42")


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("computer", '{"action": "left_click", "coordinate": [1, 1]}'),
        ("computer_use", "{not json"),
        ("computer_use", "[1, 2]"),
        ("computer_use", '{"action": "mouse_move", "coordinate": [1, 1]}'),
        ("computer_use", '{"action": "left_click"}'),
        ("computer_use", '{"action": "left_click_drag", "coordinate": [1, 1]}'),  # no start, pointer unknown
        ("computer_use", '{"action": "type"}'),
        ("computer_use", '{"action": "key", "keys": []}'),
        ("computer_use", '{"action": "scroll", "pixels": 1.5}'),
        ("computer_use", '{"action": "terminate", "status": "maybe"}'),
    ],
)
def test_malformed_calls_are_refused(name: str, args: str) -> None:
    with pytest.raises(MalformedAction):
        parse_call(name, args, 1280, 720)


# -- pruning ------------------------------------------------------------------------------------------
def test_pruning_drops_screenshots_in_chunks_and_keeps_prefixes_between_drops() -> None:
    keep, chunk, turns = 3, 3, 14
    client = FakeClient([click(10 * i, 10) for i in range(turns - 1)] + [{"action": "terminate"}])
    result = run_agent(client, FakeComputer(), "m", "do it", budget(), Options(Pruning(keep, chunk)))
    assert result.exit_code == ExitCode.ANSWERED and len(client.bodies) == turns
    counts = [count_images(b["messages"]) for b in client.bodies]
    assert counts == [1, 2, 3, 4, 5, 3, 4, 5, 3, 4, 5, 3, 4, 5]
    assert all(min(i + 1, keep) <= n <= keep + chunk - 1 for i, n in enumerate(counts))
    drops = [i for i in range(1, turns) if counts[i] < counts[i - 1]]
    assert drops == [5, 8, 11]  # a drop every `chunk` screenshots
    for i in range(1, turns):
        before, now = client.bodies[i - 1]["messages"], client.bodies[i]["messages"]
        assert (now[: len(before)] == before) == (i not in drops), i  # append-only between drops
    last = client.bodies[-1]["messages"]
    assert (
        sum(
            p.get("text") == PLACEHOLDER
            for m in last
            if isinstance(m.get("content"), list)
            for p in m["content"]
        )
        == turns - 5
    )  # every dropped screenshot left a placeholder
    assert last[-1]["role"] == "tool" and last[-1]["content"][-1]["type"] == "image_url"  # newest kept


def test_prune_keeps_everything_below_the_threshold_and_copies_what_it_changes() -> None:
    msgs = [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]} for _ in range(4)
    ]
    assert prune(msgs, Pruning(2, 3)) is msgs
    out = prune(msgs, Pruning(2, 2))
    assert count_images(out) == 2 and count_images(msgs) == 4
    assert out[2] is msgs[2] and out[0]["content"] == [{"type": "text", "text": PLACEHOLDER}]
    with pytest.raises(ValueError):
        Pruning(0, 1)


# -- malformed-action policy -----------------------------------------------------------------------------
BAD = [{"action": "left_click", "coordinate": [2000, 5]}, {"action": "key", "keys": ["nosuchkey"]}]


def test_feedback_sends_the_error_back_and_goes_on() -> None:
    computer = FakeComputer()
    client = FakeClient([*BAD, click(500, 500), {"action": "terminate", "status": "success"}])
    result = run_agent(client, computer, "m", "do it", budget(), Options(on_malformed="feedback"))
    assert result.exit_code == ExitCode.ANSWERED and result.answer == "success"
    assert computer.actions == [{"action": "click", "x": 640, "y": 360}]
    errors = [m["content"] for m in result.messages if m["role"] == "tool" and isinstance(m["content"], str)]
    assert errors[0].startswith("error: coordinate values") and "nosuchkey" in errors[1]
    assert count_images(client.bodies[2]["messages"]) == 1  # a refused action brings no screenshot


def test_a_refused_last_call_still_shows_the_screen_after_the_ones_that_ran() -> None:
    class TwoCalls(FakeClient):
        def create(
            self, body: dict[str, Any], *, timeout: float, deadline: float | None = None
        ) -> dict[str, Any]:
            out = super().create(body, timeout=timeout, deadline=deadline)
            if len(self.bodies) == 1:  # first turn: a click, then a malformed call
                good, bad = click(500, 500), BAD[0]
                out["choices"][0]["message"]["tool_calls"] = [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "computer_use", "arguments": json.dumps(a)},
                    }
                    for i, a in enumerate((good, bad))
                ]
            return out

    client = TwoCalls([click(0, 0), {"action": "terminate"}])
    result = run_agent(client, FakeComputer(), "m", "x", budget())
    assert result.exit_code == ExitCode.ANSWERED
    tools = [m for m in client.bodies[1]["messages"] if m["role"] == "tool"]
    assert [t["tool_call_id"] for t in tools] == ["c0", "c1"]
    assert tools[0]["content"][-1]["type"] == "image_url" and tools[1]["content"].startswith("error:")


@pytest.mark.parametrize("bad", BAD)
def test_stop_ends_the_rollout_at_the_first_malformed_action(bad: dict[str, Any]) -> None:
    computer = FakeComputer()
    client = FakeClient([click(1, 1), bad, click(2, 2)])
    result = run_agent(client, computer, "m", "do it", budget(), Options(on_malformed="stop"))
    assert result.exit_code == ExitCode.MALFORMED and "malformed action" in result.error
    assert len(client.bodies) == 2 and len(computer.actions) == 1


def test_turn_cap_text_reply_and_answer() -> None:
    capped = run_agent(FakeClient([click(1, 1)] * 3), FakeComputer(), "m", "x", budget(turns=2))
    assert capped.exit_code == ExitCode.BUDGET and capped.turns == 2
    text = run_agent(FakeClient(["all done"]), FakeComputer(), "m", "x", budget())
    assert (text.exit_code, text.answer) == (ExitCode.ANSWERED, "all done")
    answer = run_agent(
        FakeClient([{"action": "answer", "text": "7 items"}]), FakeComputer(), "m", "x", budget()
    )
    assert (answer.exit_code, answer.answer) == (ExitCode.ANSWERED, "7 items")
    late = run_agent(FakeClient([click(1, 1)]), FakeComputer(), "m", "x", budget(seconds=-1))
    assert late.exit_code == ExitCode.BUDGET and late.error == "wall clock"


class FailingComputer(FakeComputer):
    """An action that fails as a timed-out request does (its timeout was the clock's remainder)."""

    def act(self, action: dict[str, Any], screenshot: bool = False) -> Any:
        from openforgerl.env.computer.client import ComputerUnavailable

        raise ComputerUnavailable("POST /act: timed out")


def test_a_computer_call_cut_short_by_the_wall_clock_is_the_budget_not_a_service_failure() -> None:
    cut = run_agent(FakeClient([click(1, 1)]), FailingComputer(), "m", "x", budget(seconds=0.4))
    assert cut.exit_code == ExitCode.BUDGET and "cut short" in cut.error
    down = run_agent(FakeClient([click(1, 1)]), FailingComputer(), "m", "x", budget(seconds=20.0))
    assert down.exit_code == ExitCode.COMPUTER_ERROR and down.error.startswith("computer service")


# -- the real process, the real gateway, a fake computer service on the host ---------------------------------
class ServiceScreen:
    """A `Computer` for the real `serve_computer`: does nothing, a distinct 64x36 PNG per screenshot."""

    def __init__(self) -> None:
        self.screen, self.shots = Screen(), 0

    def click(self, x: int, y: int, button: str = "left", count: int = 1) -> None: ...

    def drag(self, x: int, y: int, to_x: int, to_y: int) -> None: ...

    def type(self, text: str) -> None: ...

    def key(self, keys: list[str]) -> None: ...

    def scroll(self, x: int, y: int, dx: int, dy: int) -> None: ...

    def screenshot(self) -> bytes:
        self.shots += 1
        return png(64, 36, self.shots)

    def close(self) -> None: ...


@pytest.fixture
def computer_url() -> Iterator[str]:
    """`serve_computer` (the real service code) over a fake screen, on loopback."""
    server = serve_computer(ServiceScreen(), 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def host_context(opened: dict[str, str], root: Path, computer_url: str) -> HarnessContext:
    (root / "work").mkdir(exist_ok=True)
    (root / "home").mkdir(exist_ok=True)
    return HarnessContext(
        instruction="Click the button.",
        openai_base_url=opened["openai_base_url"],
        anthropic_base_url=opened["anthropic_base_url"],
        api_key=opened["api_key"],
        model=MODEL_NAME,
        workdir=str(root / "work"),
        home=str(root / "home"),
        tool_service_url=computer_url,
    )


@pytest.mark.parametrize(
    ("fault", "deadline_s"),
    [(Faults(http_errors=1000, http_status=503), 60.0), (Faults(hang_before_headers=1000), 1.5)],
    ids=["503", "stall"],
)
async def test_engine_fault_ends_as_infra_within_budget(
    make_gateway, tmp_path: Path, computer_url: str, fault: Faults, deadline_s: float
) -> None:
    gw, _ = await make_gateway(
        lambda turn: format_tool_call("computer_use", click(5, 5)), faults=fault, call_deadline_s=deadline_s
    )
    opened = await gw.open_rollout(harness="zero-gui", task_id="gui-fault")
    launch = get_harness("zero-gui", wall_clock_s=30).launch(
        host_context(opened, tmp_path, computer_url), tmp_path
    )
    run = await run_on_host(launch, tmp_path / "work", 45)
    calls = await gw.gateway.store.list_calls(opened["rollout_id"])
    assert run.returncode == ExitCode.MODEL_ERROR and not run.timed_out and run.duration_s < 20, run.stderr
    assert len(calls) == 3  # the first try and zero's client's two retries
    assert call_log_taint(calls, None) == RolloutStatus.INFRA_ENGINE  # the orchestrator's rule
    assert calls[0].images and calls[0].images[0].width == 64  # the screenshot reached the gateway


async def test_host_run_records_screenshots_and_breaks_chains_only_at_drops(
    make_gateway, tmp_path: Path, computer_url: str
) -> None:
    steps = [click(100 * i, 100) for i in range(1, 7)]
    gw, engine = await make_gateway(
        lambda turn: format_tool_call(
            "computer_use",
            steps[sum(m["role"] == "tool" for m in turn.messages)]
            if sum(m["role"] == "tool" for m in turn.messages) < len(steps)
            else {"action": "terminate"},
        )
    )
    opened = await gw.open_rollout(harness="zero-gui", task_id="gui-host")
    launch = get_harness("zero-gui", wall_clock_s=30).launch(
        host_context(opened, tmp_path, computer_url), tmp_path
    )
    run = await run_on_host(launch, tmp_path / "work", 45)
    assert run.returncode == 0, run.stderr
    calls = await gw.gateway.store.list_calls(opened["rollout_id"])
    assert [len(c.images) for c in calls] == [1, 2, 3, 4, 5, 3, 4]
    record = await gw.gateway.store.get_rollout(opened["rollout_id"])
    result = reconstruct_samples(
        calls,
        record.model_copy(
            update={
                "status": RolloutStatus.OK,
                "reward": 1.0,
                "harness": "zero-gui",
                "in_batch": True,
                "group_valid": True,
            }
        ),
    )
    assert result.metrics.chains == 2 and dict(result.metrics.break_causes) == {"image_pruned": 1}, (
        result.metrics
    )
    runs = [r for s in result.samples for r in masked_runs(s)]
    assert all(any(contains(r, c.ids) for r in runs) for c in tool_call_completions(engine))
    transcript = (tmp_path / "home" / "zero-gui-transcript.jsonl").read_text()
    assert '"executed"' in transcript and "base64" not in transcript


# -- real GUI sandboxes, the real orchestrator -----------------------------------------------------------
def _gui_missing() -> str:
    from gui_helpers import gui_missing

    return gui_missing()


def oracle_to_calls(steps: list[dict[str, Any]], width: int, height: int) -> list[dict[str, Any]]:
    """Pixel oracle actions -> `computer_use` arguments in 0-1000 units (the model's side of to_pixels)."""

    def norm(x: int, y: int) -> list[int]:
        return [round(x * 1000 / width), round(y * 1000 / height)]

    out: list[dict[str, Any]] = []
    for s in steps:
        kind = s["action"]
        if kind in ("click", "double_click", "right_click"):
            name = {"click": "right_click" if s.get("button") == "right" else "left_click"}.get(kind, kind)
            out.append({"action": name, "coordinate": norm(s["x"], s["y"])})
        elif kind == "drag":
            out.append(
                {
                    "action": "left_click_drag",
                    "start_coordinate": norm(s["x"], s["y"]),
                    "coordinate": norm(s["to_x"], s["to_y"]),
                }
            )
        elif kind == "type":
            out.append({"action": "type", "text": s["text"]})
        elif kind == "key":
            out.append({"action": "key", "keys": s["keys"].split("+")})
        elif kind == "wait":
            out.append({"action": "wait", "time": s.get("seconds", 1.0)})
        else:
            raise ValueError(f"no computer_use form for oracle step {s}")
    return [*out, {"action": "terminate", "status": "success"}]


def replay_policy(calls: list[dict[str, Any]]) -> Any:
    """The i-th call after i tool results (zero-gui answers every call with one tool message)."""

    def policy(turn: Turn) -> str:
        done = sum(m.get("role") == "tool" for m in turn.messages)
        return format_tool_call("computer_use", calls[min(done, len(calls) - 1)])

    return policy


async def oracle_pixels(rt: Any, backend: Any) -> list[dict[str, Any]]:
    """The oracle's pixel actions: `target` selectors resolved by the environment's own oracle through
    the token-guarded `/locate`, in a twin sandbox of the task (the agent's sandbox never sees the token)."""
    from openforgerl.sandbox.base import SandboxSpec

    actions = (rt.task.root / "solution" / "actions.json").read_bytes()
    steps = json.loads(actions)
    if not any("target" in s or "to_target" in s for s in steps):
        return steps
    sbx = await backend.open_sandbox(
        SandboxSpec(rollout_id="oracle-twin", files=dict(rt.files()), lifetime_s=300)
    )
    try:
        await sbx.spawn(list(rt.service_argv()))
        await sbx.write_file("/tmp/oracle-actions.json", actions)
        res = await sbx.exec(
            [
                rt.python,
                "-I",
                "-m",
                "openforgerl.envs.gui.oracle",
                "--actions",
                "/tmp/oracle-actions.json",
                "--token",
                rt.token,
                "--url",
                rt.computer_url,
            ],
            timeout_s=180,
        )
    finally:
        await sbx.aclose()
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    return [json.loads(line) for line in res.stdout.decode().splitlines() if line.startswith("{")]


@dataclass
class SandboxRun:
    record: Any
    calls: list[Any]
    engine: ScriptedEngine
    planned: list[dict[str, Any]]
    seconds: float


async def run_in_sandbox(task: str, kind: str, tmp_path: Path, faults: Faults | None = None) -> SandboxRun:
    """One rollout of a suite task: real orchestrator, local bubblewrap sandbox, real gateway."""
    if missing := _gui_missing():
        pytest.skip(f"GUI stack missing: {missing}")
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
        harness_cache=tmp_path,
        end_at_taint=faults is None,  # with faults: the harness's own retries are checked
        budget_s=120.0,
    )
    try:
        planned = oracle_to_calls(await oracle_pixels(rt, backend), *rt.screen)
        engine = ScriptedEngine(replay_policy(planned), faults=faults)
        gateway = await start_gateway(engine, store, call_deadline_s=60.0)
        t0 = time.monotonic()
        try:
            harness = get_harness("zero-gui", kind=kind, wall_clock_s=100)
            batch = await run_batch([rt], harness, gateway=gateway.access, backend=backend, config=config)
        finally:
            await gateway.aclose()
        seconds = time.monotonic() - t0
        [record] = batch.records
        calls = await store.list_calls(record.rollout_id)
    finally:
        await backend.aclose()
        await store.aclose()
    first = min(c.started_at for c in calls) - record.started_at if calls else float("nan")
    print(
        f"{task}: {len(calls)} calls in {seconds:.1f} s, first call {first:.1f} s after the rollout's start, "
        f"timings {record.metadata.get('timings')}"
    )
    return SandboxRun(record, calls, engine, planned, seconds)


@pytest.mark.gui
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("task", "kind", "images"),
    [
        ("board-add-01", "browser", [1, 2, 3, 4]),
        ("desktop-editor-01", "desktop", [1, 2, 3, 4, 5, 3, 4]),  # one chunked drop: two chains
    ],
)
async def test_solves_a_gui_task_in_a_sandbox(
    task: str, kind: str, images: list[int], tmp_path: Path
) -> None:
    run = await run_in_sandbox(task, kind, tmp_path)
    record = run.record
    assert record.status == RolloutStatus.OK and record.reward == 1.0, (record.metadata, record.verifier_log)
    assert [len(c.images) for c in run.calls] == images
    result = reconstruct_samples(run.calls, record)
    drops = sum(b < a for a, b in itertools.pairwise(images))
    assert result.metrics.chains == 1 + drops, result.metrics
    assert dict(result.metrics.break_causes) == ({"image_pruned": drops} if drops else {})
    runs = [r for s in result.samples for r in masked_runs(s)]
    produced = tool_call_completions(run.engine)
    assert len(produced) == len(run.planned) and all(any(contains(r, c.ids) for r in runs) for c in produced)


@pytest.mark.gui
@pytest.mark.timeout(300)
async def test_persistent_503_in_a_sandbox_is_infra(tmp_path: Path) -> None:
    run = await run_in_sandbox(
        "desktop-editor-01", "desktop", tmp_path, Faults(http_errors=1000, http_status=503)
    )
    assert run.record.status == RolloutStatus.INFRA_ENGINE and run.record.infra_tainted, run.record.metadata
    assert run.record.metadata["harness_returncode"] == ExitCode.MODEL_ERROR
    assert len(run.calls) == 3 and run.seconds < 30
