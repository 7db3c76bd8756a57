"""tau2's telecom domain: the user acts on its own phone through upstream's user tools, reachable only from
the host (the rollout's token); upstream's evaluator replays the agent's and the user's calls in their order
and checks the env assertions on the user's device. Real tasks come from the installed package's data."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from openforgerl.envs.tau2 import upstream
from openforgerl.tasks.format import load_task
from openforgerl.tasks.importing import import_any
from openforgerl.tasks.loader import load_runtime
from openforgerl.tasks.validate import validate_tasks
from openforgerl.testing.markers import needs_bwrap

pytestmark = pytest.mark.skipif(find_spec("tau2") is None, reason="tau2 not installed (locks/tau2.txt)")
USER = "http://127.0.0.1:9/v1"  # lifts `needs: user_simulator`; never called here
# gold: the agent refuels data, the user turns roaming on (abroad, data used up, roaming off on the phone)
ROAMING = "[mobile_data_issue]data_usage_exceeded|user_abroad_roaming_enabled_off[PERSONA:Easy]"
TRANSFER = "[service_issue]airplane_mode_on|lock_sim_card_pin[PERSONA:Easy]"  # gold: transfer to a human


def telecom_dir() -> Path:
    spec = find_spec("tau2")
    assert spec is not None and spec.origin
    return Path(spec.origin).parent / "data" / "tau2" / "domains" / "telecom"


def upstream_task(task_id: str) -> dict[str, Any]:
    return next(t for t in json.loads((telecom_dir() / "tasks.json").read_text()) if t["id"] == task_id)


def some_tasks(tmp_path: Path, ids: list[str]) -> Path:
    """Upstream's telecom layout with a few of its tasks (and its split and policy files)."""
    out = tmp_path / "upstream" / "telecom"
    out.mkdir(parents=True)
    (out / "tasks.json").write_text(json.dumps([upstream_task(i) for i in ids]))
    for name in ("split_tasks.json", "main_policy.md", "tech_support_manual.md"):
        (out / name).write_bytes((telecom_dir() / name).read_bytes())
    return out


def base_ids(n: int) -> list[str]:
    return list(json.loads((telecom_dir() / "split_tasks.json").read_text())["base"])[:n]


# ------------------------------------------------------------------ the importer


def test_telecom_maps_to_runnable_folders_of_upstreams_base_set(tmp_path: Path) -> None:
    splits = json.loads((telecom_dir() / "split_tasks.json").read_text())
    outside = next(
        t["id"]
        for t in json.loads((telecom_dir() / "tasks.json").read_text())
        if t["id"] not in splits["base"]
    )
    ids = [ROAMING, TRANSFER, outside]
    tasks = {
        load_task(f).task_id: load_task(f) for f in import_any(some_tasks(tmp_path, ids), tmp_path / "o")
    }
    assert len(tasks) == 2  # the task outside upstream's `base` set is not imported
    for task in tasks.values():
        assert task.flags == ["needs:user_simulator"] and not task.meta.no_oracle
        assert task.instruction.startswith("<main_policy>") and "<tech_support_policy>" in task.instruction
        raw = json.loads((task.root / "tests/tau2_task.json").read_text())
        assert task.meta.split == ("train" if raw["id"] in splits["train"] else "test")
        spec = json.loads((task.root / "tests/user_agent.json").read_text())
        assert "Instructions:" in spec["scenario"] and spec["max_rounds"] == 30 and "opening" not in spec
        inst = raw["user_scenario"]["instructions"]  # the user's brief stays with the user (upstream)
        assert not any(
            str(inst[k]).strip() in task.instruction
            for k in ("reason_for_call", "known_info", "unknown_info", "task_instructions")
            if inst.get(k)
        )
    lifted = import_any(some_tasks(tmp_path / "u", [ROAMING]), tmp_path / "u" / "o", user_engine=USER)
    assert load_task(lifted[0]).flags == []


def test_the_planted_fault_is_in_the_service_argv_not_in_the_workdir(tmp_path: Path) -> None:
    [folder] = import_any(some_tasks(tmp_path, [ROAMING]), tmp_path / "o", user_engine=USER)
    rt = load_runtime(folder)
    files = b"".join(rt.files().values())
    assert b"turn_roaming_off" not in files and b"initial_state" not in files
    argv = list(rt.service_argv())
    assert "turn_roaming_off" in argv[argv.index("--initial-state") + 1]
    assert {t["function"]["name"] for t in rt.user_tools()} >= {"toggle_roaming", "check_status_bar"}
    assert not {t["function"]["name"] for t in rt.function_tools()} & {"toggle_roaming", "check_status_bar"}
    assert [(a["requestor"], a["tool"]) for a in rt.gold_actions()] == [
        ("assistant", "refuel_data"),
        ("user", "toggle_roaming"),
    ]


# ------------------------------------------------------------------ the service's user route, the verifier


def _post(url: str, body: dict[str, Any], token: str | None = None) -> int:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    req = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    try:
        return urllib.request.urlopen(req, timeout=30).status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture
def roaming_service(tmp_path: Path):
    from openforgerl.envs.tau2.service import build_app, listen

    server, handler = listen("secret", "127.0.0.1", 0)
    handler.app = build_app({"domain": "telecom"}, tmp_path, upstream_task(ROAMING)["initial_state"])
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def _reward(url: str) -> dict[str, float]:
    from openforgerl.envs.tau2.verify import read_log

    return upstream.reward("telecom", upstream_task(ROAMING), read_log(url, "secret")["calls"], [])


def test_user_tools_answer_the_token_only_and_a_good_trajectory_scores_1(roaming_service: str) -> None:
    from openforgerl.envs.tau2.user_side import call_user_tool

    url = roaming_service
    assert _reward(url)["reward"] == 0.0  # no data left, and roaming off on the phone abroad
    assert _post(f"{url}/user/toggle_roaming", {}) == 403
    assert _post(f"{url}/user/toggle_roaming", {}, token="guess") == 403
    assert _post(f"{url}/call/toggle_roaming", {}) == 400  # not an agent tool: upstream's error reply
    [refuel] = [
        a for a in upstream_task(ROAMING)["evaluation_criteria"]["actions"] if a["requestor"] == "assistant"
    ]
    assert _post(f"{url}/call/refuel_data", refuel["arguments"]) == 200
    status, body = call_user_tool(url, "secret", "toggle_roaming", {})
    assert status == 200 and "Roaming" in json.dumps(body)
    from openforgerl.envs.tau2.verify import read_log

    log = read_log(url, "secret")["calls"]
    assert [(c["name"], c["requestor"], c["error"]) for c in log] == [
        ("toggle_roaming", "assistant", True),
        ("refuel_data", "assistant", False),
        ("toggle_roaming", "user", False),
    ]
    assert _reward(url) == {"reward": 1.0, "env": 1.0}


def test_a_bad_trajectory_scores_0_and_a_forged_user_reply_is_unjudged(roaming_service: str) -> None:
    from openforgerl.envs.tau2.user_side import call_user_tool
    from openforgerl.envs.tau2.verify import read_log

    url = roaming_service
    assert call_user_tool(url, "secret", "toggle_roaming", {})[0] == 200  # the user's half only: no data left
    assert _reward(url)["reward"] == 0.0
    calls = read_log(url, "secret")["calls"][:1]
    forged = [{**calls[0], "content": "Roaming is now ON"}]  # a reply the phone never gave
    with pytest.raises(ValueError):
        upstream.reward("telecom", upstream_task(ROAMING), forged, [])


def test_a_transfer_task_needs_the_transfer_and_the_untouched_device() -> None:
    """`ENV_ASSERTION` × `ACTION`: the fault cannot be fixed, so the no-op passes
    the assertion, not the action."""
    task = upstream_task(TRANSFER)
    assert upstream.noop_reward("telecom", task) == 0.0
    env = upstream.environment("telecom", task["initial_state"])
    args = {"summary": "I cannot fix the issue."}
    content, error = upstream.respond(env, "c0", "transfer_to_human_agents", args)
    call = {
        "id": "c0",
        "name": "transfer_to_human_agents",
        "arguments": args,
        "content": content,
        "error": error,
    }
    assert upstream.reward("telecom", task, [call], []) == {"reward": 1.0, "env": 1.0, "action": 1.0}


# ------------------------------------------------------------------ the simulated user


class _ScriptedEngine:
    """A user engine that checks its status bar, then tells the agent what it saw."""

    def __init__(self) -> None:
        self.requests: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []

    async def chat(self, messages, tools=()):
        self.requests.append((list(messages), list(tools)))
        if messages[-1]["role"] != "tool":
            call = {
                "id": "u1",
                "type": "function",
                "function": {"name": "check_status_bar", "arguments": "{}"},
            }
            return {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"role": "assistant", "content": f"My status bar says: {messages[-1]['content']}"}


class _InProcessRuntime:
    """`Tau2TaskRuntime`'s user side on an in-process environment (the route itself is tested above)."""

    def __init__(self) -> None:
        self.env = upstream.environment("telecom", upstream_task(ROAMING)["initial_state"])
        self.calls: list[str] = []

    def user_tools(self):
        return list(upstream.user_tool_schemas("telecom"))

    async def user_call(self, sandbox, tool, args):
        self.calls.append(tool)
        content, error = upstream.respond(self.env, f"u{len(self.calls)}", tool, args, "user")
        return (400, {"error": content}) if error else (200, {"result": content})


def test_the_simulated_user_acts_on_its_phone_before_it_answers() -> None:
    from openforgerl.env.user_tools import Tau2UserSession

    engine, rt = _ScriptedEngine(), _InProcessRuntime()
    session = Tau2UserSession("Instructions: your data is slow")
    session.messages += [
        {"role": "user", "content": "Hi! How can I help you today?"},  # as after the opening
        {"role": "assistant", "content": "My mobile data does not work."},
    ]
    reply = asyncio.run(session.reply(engine, rt, object(), "What does your status bar show?"))
    assert rt.calls == ["check_status_bar"] and reply.startswith("My status bar says:") and not session.done
    messages, tools = engine.requests[0]
    assert "<scenario>\nInstructions: your data is slow" in messages[0]["content"]
    assert [m["role"] for m in messages[1:]] == ["user", "assistant", "user"]  # the engine's own roles
    assert "toggle_roaming" in {t["function"]["name"] for t in tools}


def test_the_user_engine_gets_room_for_a_tool_call_when_its_client_is_capped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """eval's user client is capped at 128 tokens for 1-3 sentence replies; a tool call's JSON needs more."""
    from openforgerl.env.judge import JudgeClient
    from openforgerl.env.user_tools import MIN_MAX_TOKENS, Tau2UserSession

    caps: list[int] = []

    async def chat(self: JudgeClient, messages: Any, tools: Any = ()) -> dict[str, Any]:
        caps.append(self.max_tokens)
        return {"role": "assistant", "content": "Hello."}

    monkeypatch.setattr(JudgeClient, "chat", chat)
    session = Tau2UserSession("Instructions: say hello")
    asyncio.run(
        session.reply(JudgeClient("http://127.0.0.1:9/v1", max_tokens=128), _InProcessRuntime(), None, "Hi")
    )
    assert caps == [MIN_MAX_TOKENS]


# ------------------------------------------------------------------ real sandboxes


@needs_bwrap
def test_telecom_tasks_validate_in_sandboxes(tmp_path: Path) -> None:
    """Oracle (the agent's gold through its tools, the user's through the host-only route) → 1, no-op → 0."""
    from openforgerl.sandbox.local import LocalBackend

    folders = import_any(
        some_tasks(tmp_path, [ROAMING, TRANSFER, *base_ids(1)]), tmp_path / "o", user_engine=USER
    )
    runtimes = [load_runtime(f) for f in folders]

    async def run() -> list[Any]:
        backend = LocalBackend(root=tmp_path / "sbx")
        try:
            return await validate_tasks(runtimes, backend, concurrency=2)
        finally:
            await backend.aclose()

    results = asyncio.run(run())
    assert [(r.noop_reward, r.oracle_reward, r.error) for r in results] == [(0.0, 1.0, "")] * len(runtimes)


@needs_bwrap
def test_through_eval_the_simulated_user_turns_roaming_on_when_asked(tmp_path: Path, monkeypatch) -> None:
    """`zero` with the scripted oracle plays the agent's gold (refuel), then asks the user to turn roaming on;
    the user engine answers with a `toggle_roaming` call, which the relay runs on the rollout's phone
    through the host-only route: reward 1. A user engine that only talks leaves the phone as it was: 0."""
    import typer
    from judge_helpers import serve_policy
    from typer.testing import CliRunner

    import openforgerl.envs.claw.oracle_policy as op
    from openforgerl.cli.eval import command as eval_command
    from openforgerl.engines.chat_format import format_tool_call
    from openforgerl.env.user_sim import GREETING

    import_any(some_tasks(tmp_path, [ROAMING]), tmp_path / "t")
    original = op.oracle_policy

    def asking(runtimes, **kw):
        base = original(runtimes, **kw)

        def policy(turn):
            decided = base(turn)
            asked = any("ask_user" in str(m.get("tool_calls", "")) for m in turn.messages)
            ask = {"message": "Please turn data roaming on, then tell me."}
            return format_tool_call("ask_user", ask) if decided == "Done." and not asked else decided

        return policy

    def acting_user(turn) -> str:
        if turn.messages[-1].get("content") == GREETING:  # the opening, as upstream's user writes it
            return "My mobile data stopped working while I am abroad."
        if turn.messages[-1].get("role") == "tool":
            return "Done, roaming is on. ###STOP###"
        return format_tool_call("toggle_roaming", {})

    monkeypatch.setattr(op, "oracle_policy", asking)
    app = typer.Typer()
    app.command()(eval_command)
    rewards = {}
    for name, user_policy in {"acts": acting_user, "talks": lambda t: "Sure, it is on now."}.items():
        with serve_policy(user_policy) as user:
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
                    str(tmp_path / name),
                    "--user-engine",
                    user.url,
                ],
            )
        assert res.exit_code == 0, res.output
        rewards[name] = json.loads((tmp_path / name / "report.json").read_text())["tasks"]["zero"][0][
            "mean_reward"
        ]
        assert "<scenario>" in str(user.turns[0].messages[0].get("content"))  # upstream-style user prompt
    assert rewards == {"acts": 1.0, "talks": 0.0}
