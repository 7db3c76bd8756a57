"""Fault injection for the one-verdict tests: a fault plan shared by the harness, the engine and the
task, so each rollout's fault is decided once (by rollout id) and checked against its outcome.

- the harness (`FaultHarness`, a `CommandHarness`) runs a small stdlib-only Python client inside the
  real bubblewrap sandbox; per task, the first `k` launches get the task's fault, later launches
  (the orchestrator's refills) are honest;
- engine faults travel in the request text (`FAULT=<kind>`), so the scripted engine served over real
  HTTP (`start_fault_engine`) answers 500, resets the TCP connection, or hangs;
- the `Watcher` plays the outside world: it SIGKILLs a sandbox's launcher from outside, or loses the
  sandbox (`expire`), when the client inside asks for it by writing a marker file;
- `FaultTask.verify` crashes (`VerifierError`) for the rollouts the plan says — never because of
  anything the agent left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from openforgerl.engines.scripted import ScriptedEngine, Turn
from openforgerl.engines.scripted_server import ENGINE_KEY, scripted_app
from openforgerl.env.contract import TaskDefaults, Verdict, VerifierError
from openforgerl.harness.base import HarnessContext, HarnessLaunch
from openforgerl.harness.generic import CommandHarness
from openforgerl.records import RolloutStatus
from openforgerl.sandbox.base import Sandbox

AGENT_SOURCE = r"""
import json, os, sys, time, urllib.error, urllib.request

mode, token, instruction = sys.argv[1], sys.argv[2], sys.argv[-1]
if mode in ("sigkill", "lose"):
    with open("/workdir/" + ("KILL_ME" if mode == "sigkill" else "LOSE_ME"), "w") as fh:
        fh.write(token)
if mode in ("sigkill", "lose", "timeout"):
    time.sleep(120)
text = instruction + (" FAULT=" + mode[len("engine-"):] if mode.startswith("engine-") else "")
body = json.dumps({"model": os.environ["OPENFORGERL_MODEL"], "messages": [{"role": "user", "content": text}]})
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body.encode(),
                             headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                      "Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=120) as resp:
        reply = json.load(resp)
except (urllib.error.URLError, OSError, ValueError) as exc:
    print("model call failed:", exc, file=sys.stderr)
    sys.exit(1)
with open("/workdir/proof.txt", "w") as fh:
    fh.write(reply["choices"][0]["message"]["content"] or "")
sys.exit(2 if mode == "fail" else 0)
"""

# fault kind -> the status its rollout must end with
EXPECTED: Mapping[str, RolloutStatus] = {
    "engine-5xx": RolloutStatus.INFRA_ENGINE,
    "engine-reset": RolloutStatus.INFRA_ENGINE,
    "engine-stall": RolloutStatus.INFRA_ENGINE,
    "harness-start": RolloutStatus.INFRA_HARNESS_START,
    "sigkill": RolloutStatus.INFRA_SANDBOX,
    "lose": RolloutStatus.INFRA_SANDBOX,
    "verifier-crash": RolloutStatus.INFRA_VERIFIER,
    "timeout": RolloutStatus.TIMEOUT,
}
HONEST = ("ok", "fail")
_TASK_TAG = re.compile(r"\[(ft-\d+)\]")


@dataclass
class TaskPlan:
    fault: str  # a key of EXPECTED, or "honest"
    k: int = 0  # the first k launches of the task get the fault


@dataclass
class FaultPlan:
    """Which rollout got which fault (filled in as the harness launches them)."""

    tasks: dict[str, TaskPlan]
    modes: dict[str, str] = field(default_factory=dict)  # rollout id -> mode
    launches: Counter[str] = field(default_factory=Counter)

    def decide(self, task_id: str, rollout_id: str) -> str:
        plan = self.tasks[task_id]
        self.launches[task_id] += 1
        n = self.launches[task_id]
        if plan.fault != "honest" and n <= plan.k:
            mode = plan.fault
        else:
            mode = "fail" if n % 5 == 0 else "ok"
        self.modes[rollout_id] = mode
        return mode


class FaultHarness(CommandHarness):
    """The `command` harness running `AGENT_SOURCE` with the mode the plan gives this rollout."""

    def __init__(self, agent: Path, plan: FaultPlan) -> None:
        super().__init__([sys.executable, "-I", "-S", str(agent)])
        self.plan = plan

    def launch(self, ctx: HarnessContext, cache_dir: Path) -> HarnessLaunch:
        task_id = _TASK_TAG.search(ctx.instruction).group(1)  # type: ignore[union-attr]
        rollout_id = ctx.openai_base_url.rstrip("/").split("/r/")[1].split("/")[0]
        mode = self.plan.decide(task_id, rollout_id)
        base = super().launch(ctx, cache_dir)
        if mode == "harness-start":
            return HarnessLaunch(argv=["/nonexistent/fault-agent", *base.argv[1:]], env=base.env)
        argv = [*self.argv, mode, uuid.uuid4().hex, *base.argv[len(self.argv) :]]
        return HarnessLaunch(argv=argv, env=base.env)


@dataclass
class FaultTask(TaskDefaults):
    """ "Write the magic word into proof.txt"; the verifier crashes where the plan says."""

    task_id: str
    plan: FaultPlan
    budget_s: float = 10.0
    expected: str = "abracadabra"

    @property
    def instruction(self) -> str:
        return f"[{self.task_id}] Write the magic word into proof.txt"

    def files(self) -> Mapping[str, bytes]:
        return {"README.md": b"write proof.txt\n"}

    async def verify(self, sandbox: Sandbox) -> Verdict:
        if self.plan.modes.get(sandbox.spec.rollout_id) == "verifier-crash":  # type: ignore[attr-defined]
            raise VerifierError("checker binary crashed (injected)")
        try:
            text = (await sandbox.read_file("/workdir/proof.txt")).decode(errors="replace")
        except FileNotFoundError:
            return Verdict(0.0, {"exists": 0.0}, "proof.txt missing")
        hit = float(self.expected in text)
        return Verdict(hit, {"exists": 1.0, "match": hit}, f"proof.txt = {text[:80]!r}")


def coin_policy(turn: Turn) -> str:
    """The model's answer: right on most calls, wrong on some (so groups have reward variance)."""
    return (
        "no idea"
        if sum(map(ord, turn.rollout_id + str(turn.call_index))) % 3 == 0
        else "The magic word is abracadabra."
    )


@web.middleware
async def _faults(request: web.Request, handler: Any) -> web.StreamResponse:
    """Engine faults named in the request text: 500, a TCP reset, or a hang (until the gateway cuts)."""
    raw = await request.read()
    match = re.search(rb"FAULT=(\w+)", raw)
    fault = match.group(1).decode() if match else ""
    if fault == "5xx":
        return web.json_response({"error": {"message": "injected", "type": "server_error"}}, status=500)
    if fault == "reset":
        assert request.transport is not None
        request.transport.abort()  # RST: the connection dies under the gateway's feet
        return web.Response(status=500)
    if fault == "stall":  # a wedged engine: it also fails its health probe while the request hangs
        await request.app[ENGINE_KEY].hang()
    return await handler(request)


@dataclass
class RunningEngine:
    url: str
    runner: web.AppRunner

    async def aclose(self) -> None:
        await self.runner.cleanup()


async def start_fault_engine(engine: ScriptedEngine) -> RunningEngine:
    """The scripted engine over real HTTP (vLLM's wire shape), with `_faults` in front."""
    app = scripted_app(engine)
    app.middlewares.append(_faults)
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return RunningEngine(f"http://127.0.0.1:{port}", runner)


class Watcher:
    """The outside world: kills launchers and loses sandboxes whose client asked for it."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.killed: list[str] = []
        self.lost: list[str] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Watcher:
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _loop(self) -> None:
        while True:
            for sbx in list(getattr(self.backend, "_open", ())):
                self._visit(sbx)
            await asyncio.sleep(0.05)

    def _visit(self, sbx: Any) -> None:
        work: Path | None = sbx.host_workdir
        if work is None:
            return
        rid = sbx.spec.rollout_id
        kill, lose = work / "KILL_ME", work / "LOSE_ME"
        if kill.exists() and rid not in self.killed:
            token = kill.read_text().strip()
            if token and kill_children_with(token.encode()):
                self.killed.append(rid)
        if lose.exists() and rid not in self.lost:
            self.lost.append(rid)
            sbx.expire("injected: node lost")


def kill_children_with(marker: bytes) -> int:
    """SIGKILL our own child processes (sandbox launchers) whose command line holds `marker`."""
    me, n = os.getpid(), 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == me and marker in (entry / "cmdline").read_bytes():
                os.kill(int(entry.name), signal.SIGKILL)
                n += 1
        except (OSError, ValueError, IndexError):
            continue
    return n
