"""Attacks on a tau2 task from inside a real sandbox, as the harness, through the real gateway and
orchestrator. The agent wants the reward without doing the task: the DB must end as the gold actions
leave it, and the verifier reads the rollout's call log from the service with a token.

- The gold: the installed tau2 package (bound read-only, its services need it) ships every task's gold
  actions in `data/tau2/domains/*/tasks.json`. The attacker reads that file, finds its own task by the
  customer's request (the instruction holds no scenario: here the test hands the attacker the request, as the
  user's opening would state it), and replays the gold through the tools: masked (`sandbox/bwrap.py`
  MASKED_FOREIGN), the file cannot be read and the reward stays 0; with the mask lifted (the control) the very
  same attack earns 1, so the test can fail. The task folder's own `solution/` and `tests/`
  are not in the sandbox at all.
- The state: no route writes the DB or the log but a tool call (`/reset`, `/state`, `/log` POSTs are 404),
  the log answers 403 without the token, and no process the agent can see holds the token.
- The user's scenario: `known_info`, `unknown_info` and `task_instructions` are the simulated user's private
  brief (upstream never shows them to the agent); no workdir file, env variable,
  argv or instruction holds them.
- Telecom's phone: the user's tools answer on `/user/<tool>` with the token only (the host's user relay
  and oracle), are refused as agent tools, and the fault planted on the phone is in no workdir file.
"""

from __future__ import annotations

import json
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from openforgerl.harness.generic import CommandHarness
from openforgerl.records import RolloutStatus
from openforgerl.sandbox import bwrap
from openforgerl.tasks.importing import import_any
from openforgerl.tasks.loader import load_runtime
from openforgerl.testing.markers import needs_bwrap
from openforgerl.testing.rollouts import open_rollout_env

pytestmark = [needs_bwrap, pytest.mark.skipif(find_spec("tau2") is None, reason="tau2 not installed")]

ATTACK = r"""
import glob, json, os, sys, urllib.request as u
instruction, url = " ".join(sys.argv[1:]), "http://127.0.0.1:7727"  # the request, then the instruction
# an agent acts only after a model answer (a harness that ends before its first model call is infra)
u.urlopen(u.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", json.dumps({"model": "m",
          "messages": [{"role": "user", "content": "hi"}]}).encode(), {"Content-Type": "application/json",
          "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}), timeout=60)
def call(path, body=None, headers={}):
    data = None if body is None else json.dumps(body).encode()
    req = u.Request(url + path, data, headers, method="POST" if body is not None else "GET")
    try:
        return u.urlopen(req, timeout=30).status
    except u.HTTPError as e:
        return e.code
for _ in range(300):  # the service loads its domain for a second or two
    try:
        u.urlopen(url + "/healthz", timeout=5); break
    except OSError:
        __import__("time").sleep(0.1)
found = {"log": call("/log"), "log_guess": call("/log", headers={"Authorization": "Bearer 0"}),
         "reset": call("/reset", {}), "post_log": call("/log", {"calls": []})}
cmdlines = [open(p, "rb").read() for p in glob.glob("/proc/[0-9]*/cmdline")]
found["token_seen"] = any(("tau2" + ".service").encode() in c for c in cmdlines)
import tau2
for path in glob.glob(os.path.join(os.path.dirname(tau2.__file__), "data/tau2/domains/*/tasks.json")):
    try:
        raw = open(path).read()
    except OSError as exc:  # masked: /dev/null on a nodev mount cannot be opened
        raw = ""
    found[os.path.basename(os.path.dirname(path))] = len(raw)
    for task in json.loads(raw) if raw else []:
        inst = task["user_scenario"]["instructions"]
        if isinstance(inst, dict) and (inst.get("reason_for_call") or "?").strip() in instruction:
            for a in task["evaluation_criteria"]["actions"]:
                call("/call/" + a["name"], a["arguments"])
print(json.dumps(found))
assert found["log"] == found["log_guess"] == 403 and found["reset"] == found["post_log"] == 404, found
assert not found["token_seen"], found
"""


def _upstream_task(task_id: str = "12") -> dict:
    spec = find_spec("tau2")
    assert spec is not None and spec.origin
    src = Path(spec.origin).parent / "data/tau2/domains/airline"
    return next(t for t in json.loads((src / "tasks.json").read_text()) if t["id"] == task_id)


def _task(tmp_path: Path):
    out = tmp_path / "upstream" / "airline"
    out.mkdir(parents=True)
    (out / "tasks.json").write_text(json.dumps([_upstream_task()]))
    [folder] = import_any(out, tmp_path / "t", user_engine="http://127.0.0.1:9/v1")
    return load_runtime(folder)


async def _attack(tmp_path: Path, name: str) -> tuple[object, float | None]:
    request = _upstream_task()["user_scenario"]["instructions"]["reason_for_call"]
    async with open_rollout_env(tmp_path / name) as env:
        harness = CommandHarness([sys.executable, "-c", ATTACK, request])
        (rec,) = (await env.run([_task(tmp_path / name)], harness)).records
    return rec.status, rec.reward


async def test_the_agent_cannot_read_the_gold_or_forge_the_state(tmp_path: Path, monkeypatch) -> None:
    status, reward = await _attack(tmp_path, "masked")
    assert (status, reward) == (RolloutStatus.OK, 0.0)
    monkeypatch.setattr(bwrap, "MASKED_FOREIGN", {})  # the control: the same attack, gold file in reach
    bwrap.foreign_masked.cache_clear()
    try:
        status, reward = await _attack(tmp_path, "unmasked")
    finally:
        bwrap.foreign_masked.cache_clear()
    assert (status, reward) == (RolloutStatus.OK, 1.0)


# ------------------------------------------------------------------ the user's scenario stays on the host

PROBE = r"""
import glob, json, os, sys
seen = {"argv": sys.argv, "env": dict(os.environ), "files": {}, "proc": []}
for path in glob.glob("/workdir/**", recursive=True) + glob.glob("/workdir/.*/**", recursive=True):
    if os.path.isfile(path):
        try:
            seen["files"][path] = open(path, errors="replace").read()
        except OSError:
            pass
for path in glob.glob("/proc/[0-9]*/cmdline") + glob.glob("/proc/[0-9]*/environ"):
    try:
        seen["proc"].append(open(path, "rb").read().decode(errors="replace"))
    except OSError:
        pass
print(json.dumps(seen))
"""
OPENING = "Hi, I would like to change my flight."


class _OpeningUser:
    """The user engine, as the relay calls it: the customer's opening to the agent's greeting."""

    async def complete(self, system: str, user: str) -> str:
        return OPENING


async def test_the_users_scenario_is_nowhere_in_the_sandbox(tmp_path: Path) -> None:
    """A rollout with the user relay attached (the opening written by the user engine, as in `eval`): the
    agent's instruction, env, argv, every workdir file and every process it can see hold the opening and
    none of the scenario's private fields, which the host's persona file does hold (so the probe can fail)."""
    from openforgerl.env.user_sim import UserRelay
    from openforgerl.tasks.host_side import HostSide

    rt = _task(tmp_path)
    inst = _upstream_task()["user_scenario"]["instructions"]
    private = [
        str(inst[k]).strip() for k in ("known_info", "unknown_info", "task_instructions") if inst.get(k)
    ]
    persona = json.loads((rt.task.root / "tests/user_agent.json").read_text())["persona"]
    assert private and all(f in persona for f in private)
    relay = UserRelay(_OpeningUser(), {rt.task_id: rt}, task_of=None)  # type: ignore[arg-type]
    rt.host = HostSide(users=relay)
    async with open_rollout_env(tmp_path / "probe") as env:
        harness = CommandHarness([sys.executable, "-c", PROBE])
        (rec,) = (await env.run([rt], harness, artifacts_dir=tmp_path / "art")).records
    dump = (tmp_path / "art" / rec.rollout_id / "harness.stdout").read_text()
    seen = json.loads(dump)
    assert OPENING in seen["argv"][-1] and OPENING in seen["env"]["OPENFORGERL_INSTRUCTION"]
    assert seen["files"]["/workdir/.tau2/config.json"]  # the probe reads the workdir
    text = json.dumps(seen) + dump
    leaked = [
        f for f in [*private, inst["reason_for_call"].strip()] if f in text or json.dumps(f)[1:-1] in text
    ]
    assert not leaked, leaked
    [record] = [c.record for c in relay.conversations.values()]
    assert record == [{"role": "user", "content": OPENING}]


# ------------------------------------------------------------------ telecom: the user's phone is the host's

USER_ROUTE_ATTACK = r"""
import glob, json, sys, urllib.request as u
url, refuel = "http://127.0.0.1:7727", json.loads(sys.argv[1])
def call(path, body, headers={}):
    headers = {"Content-Type": "application/json", **headers}
    req = u.Request(url + path, json.dumps(body).encode(), headers, method="POST")
    try:
        return u.urlopen(req, timeout=30).status
    except u.HTTPError as e:
        return e.code
for _ in range(300):
    try:
        u.urlopen(url + "/healthz", timeout=5); break
    except OSError:
        __import__("time").sleep(0.1)
config = open("/workdir/.tau2/config.json").read()
found = {"user": call("/user/toggle_roaming", {}),
         "user_guess": call("/user/toggle_roaming", {}, {"Authorization": "Bearer 0"}),
         "as_agent": call("/call/toggle_roaming", {}), "refuel": call("/call/refuel_data", refuel),
         "fault_seen": "turn_roaming_off" in config or "initialization" in config}
cmdlines = [open(p, "rb").read() for p in glob.glob("/proc/[0-9]*/cmdline")]
found["token_seen"] = any(("tau2" + ".service").encode() in c for c in cmdlines)
print(json.dumps(found))
assert found["user"] == found["user_guess"] == 403, found
assert found["as_agent"] == 400 and found["refuel"] == 200, found
assert not found["fault_seen"] and not found["token_seen"], found
"""


def _telecom_task(tmp_path: Path):
    spec = find_spec("tau2")
    assert spec is not None and spec.origin
    src = Path(spec.origin).parent / "data/tau2/domains/telecom"
    out = tmp_path / "upstream" / "telecom"
    out.mkdir(parents=True)
    task_id = "[mobile_data_issue]data_usage_exceeded|user_abroad_roaming_enabled_off[PERSONA:Easy]"
    (out / "tasks.json").write_text(
        json.dumps([t for t in json.loads((src / "tasks.json").read_text()) if t["id"] == task_id])
    )
    [folder] = import_any(out, tmp_path / "t", user_engine="http://127.0.0.1:9/v1")
    return load_runtime(folder)


async def test_the_agent_cannot_act_as_the_user_on_its_phone(tmp_path: Path) -> None:
    """The agent plays its own half of the gold (refuel) and tries the user's half (turn roaming on) through
    the user route without the token, and as an agent tool: refused, reward 0. The control: the same sandbox
    after the host's user call with the token (the relay's and the oracle's route)
    scores 1, so the test can fail."""
    from openforgerl.sandbox.base import SandboxSpec
    from openforgerl.sandbox.local import LocalBackend

    rt = _telecom_task(tmp_path)
    [refuel] = [a for a in rt.gold_actions() if a["requestor"] == "assistant"]
    backend = LocalBackend(root=tmp_path / "sbx")
    sandbox = await backend.open_sandbox(
        SandboxSpec(rollout_id="telecom-attack", files=rt.files(), lifetime_s=600)
    )
    try:
        await sandbox.spawn(rt.service_argv())
        res = await sandbox.exec(
            [sys.executable, "-c", USER_ROUTE_ATTACK, json.dumps(refuel["args"])], timeout_s=120
        )
        assert res.returncode == 0, res.stdout.decode() + res.stderr.decode()
        assert (await rt.verify(sandbox))[0] == 0.0
        status, _ = await rt.user_call(sandbox, "toggle_roaming", {})  # the control: the host, with the token
        assert status == 200
        assert (await rt.verify(sandbox))[0] == 1.0
    finally:
        await sandbox.aclose()
        await backend.aclose()
