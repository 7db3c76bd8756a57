"""A failure of the GUI environment's own service is infra (dropped and retried, never a reward); an agent
cannot cause it on purpose to dodge a 0.

- The computer service counts its own faults: a screenshot that fails twice, or an action that raises and
  leaves the screen unable to take a screenshot, is a 503 and a fault; an action that raises while the
  screen still works is the agent's 400 (no input can make a fault). `GET /__health` (token only) says so,
  and how long the screen took to start (slower than `READY_LIMIT_S`: the environment failed to start).
- `GuiTaskRuntime.verify` turns "service down" (`gui.verify` exit 4) into `GuiServiceDown` (infra), unless
  the sandbox counted a limit breach the agent shares with the service (memory / pids / disk / CPU quota
  saturation): reward 0. CPU itself is not shared evenly: the agent's processes have a tenth of the service's
  weight (300 busy loops leave screenshots fast), and a desktop's apps, which
  the agent drives, run at nice 19.
- End to end (`-m gui`, real sandboxes, the real orchestrator, `zero-gui` through the gateway): the service
  killed from outside mid-rollout (the whole service, or only its Chromium) ends the attempt as
  `infra_error:sandbox`, out of the batch, and the retry is scored normally (reward 1). An agent that kills
  everything it can from inside its sandbox (`kill -9 -1`, pkill chromium) does not reach the service:
  its rollout is its own failure, reward 0, never infra.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from gui_helpers import GUI_SUITE, FakeComputer, needs_gui

from openforgerl.env.computer.service import TOKEN_HEADER, serve_computer
from openforgerl.envs.gui import runtime as gui_runtime
from openforgerl.envs.gui.verify import EXIT_SERVICE_DOWN, service_problem
from openforgerl.sandbox.base import ExecResult, TamperError, VerifierRun

TOKEN = "s3cret"
TASK = GUI_SUITE / "board-move-02"  # one click: card 'Book venue' -> Doing
BOOK_VENUE_FWD = [51, 374]  # its "->" button (65, 269) on 1280x720, in 0-1000 units


# -- the computer service's fault accounting (in process, a fake screen) -------------------------------------
class FlakyComputer(FakeComputer):
    def __init__(self) -> None:
        super().__init__()
        self.dead = False
        self.shots_failing = 0  # the next N screenshots raise
        self.action_raises = False

    def screenshot(self) -> bytes:
        if self.dead or self.shots_failing > 0:
            self.shots_failing -= 1
            raise RuntimeError("Target page, context or browser has been closed")
        return super().screenshot()

    def click(self, x: int, y: int, button: str = "left", count: int = 1) -> None:
        if self.dead or self.action_raises:
            raise RuntimeError("the page refused that")


@pytest.fixture
def service() -> Iterator[tuple[FlakyComputer, str]]:
    computer = FlakyComputer()
    server = serve_computer(computer, 0, token=TOKEN)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield computer, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _call(url: str, path: str, body: dict[str, Any] | None = None, token: str = "") -> tuple[int, Any]:
    req = urllib.request.Request(
        url + path,
        data=None if body is None else json.dumps(body).encode(),
        method="GET" if body is None else "POST",
        headers={TOKEN_HEADER: token} if token else {},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw, status = resp.read(), resp.status
    except urllib.error.HTTPError as exc:
        raw, status = exc.read(), exc.code
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw


def test_an_action_the_screen_refuses_is_the_agents_error_not_a_fault(service) -> None:
    computer, url = service
    computer.action_raises = True
    status, body = _call(url, "/act", {"action": "click", "x": 5, "y": 5})
    assert status == 400 and "the action failed" in body["error"]
    assert _call(url, "/__health", token=TOKEN) == (
        200,
        {"ok": True, "faults": 0, "last_fault": "", "ready_s": 0.0},
    )
    assert service_problem(url, TOKEN) == ""


def test_one_failed_screenshot_is_retried_and_is_not_a_fault(service) -> None:
    computer, url = service
    computer.shots_failing = 1
    status, png = _call(url, "/screenshot")
    assert status == 200 and png.startswith(b"\x89PNG")
    assert _call(url, "/__health", token=TOKEN)[1]["faults"] == 0


def test_a_dead_screen_is_a_503_fault_and_health_says_so(service) -> None:
    computer, url = service
    computer.dead = True
    assert _call(url, "/screenshot")[0] == 503
    status, body = _call(url, "/act", {"action": "click", "x": 5, "y": 5, "screenshot": True})
    assert status == 503 and "action" in body["error"]
    assert _call(url, "/__health")[0] == 404  # without the token: the agent learns nothing
    status, health = _call(url, "/__health", token=TOKEN)
    assert status == 503 and health["ok"] is False and health["faults"] == 2
    assert "screen is gone" in service_problem(url, TOKEN)


def test_a_fault_that_recovered_still_makes_the_rollout_infra(service) -> None:
    computer, url = service
    computer.shots_failing = 2  # both tries of one screenshot: the harness got a 503
    assert _call(url, "/screenshot")[0] == 503
    assert _call(url, "/screenshot")[0] == 200
    assert "faulted 1 time(s)" in service_problem(url, TOKEN)


def test_a_screen_that_came_up_too_late_is_the_environments_failure() -> None:
    from openforgerl.envs.gui.service import seconds_since_start
    from openforgerl.envs.gui.verify import READY_LIMIT_S

    assert 0.0 < seconds_since_start() < 3600  # this test process's own age, from /proc
    for ready_s, problem in ((READY_LIMIT_S - 1, ""), (READY_LIMIT_S + 15, "to start")):
        server = serve_computer(FlakyComputer(), 0, token=TOKEN, ready_s=ready_s)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            got = service_problem(f"http://127.0.0.1:{server.server_address[1]}", TOKEN)
        finally:
            server.shutdown()
            server.server_close()
        assert (problem in got) if problem else got == "", got


def test_an_unreachable_service_is_reported_after_the_wait() -> None:
    assert "unreachable" in service_problem("http://127.0.0.1:9", TOKEN, wait_s=0.3)


# -- GuiTaskRuntime.verify: infra, unless the agent breached a shared limit ----------------------------------
class _FakeSandbox:
    """A sandbox whose backend counted these breaches (the local one reads its cgroup's counters)."""

    def __init__(self, breaches: dict[str, int]) -> None:
        self._b = breaches

    def limits_breached(self) -> tuple[str, ...]:
        return tuple(k for k, v in self._b.items() if v > 0)


@pytest.mark.parametrize(
    ("breaches", "raised"),
    [
        ({"memory": 0, "pids": 0}, gui_runtime.GuiServiceDown),
        ({"memory": 1, "pids": 0}, TamperError),  # an OOM kill in the cgroup the agent shares with Chromium
        ({"memory": 0, "pids": 3}, TamperError),  # a fork bomb starved the browser
        ({"memory": 0, "pids": 0, "cpu": 1}, TamperError),  # the sandbox ran at its CPU quota for seconds
    ],
)
async def test_service_down_is_infra_unless_the_agent_breached_a_limit(monkeypatch, breaches, raised) -> None:
    from openforgerl.sandbox.base import SandboxError
    from openforgerl.tasks.loader import load_runtime

    async def down(*_: Any, **__: Any) -> VerifierRun:
        return VerifierRun(
            ExecResult(EXIT_SERVICE_DOWN, b"", b"SERVICE DOWN computer service unreachable", False, 0.1), {}
        )

    monkeypatch.setattr(gui_runtime, "run_verifier", down)
    rt = load_runtime(TASK)
    with pytest.raises(raised) as info:
        await rt.verify(_FakeSandbox(breaches))
    assert "unreachable" in str(info.value)
    assert issubclass(gui_runtime.GuiServiceDown, SandboxError)  # -> infra_error:sandbox at the boundary
    assert not issubclass(gui_runtime.GuiServiceDown, TamperError)


# -- end to end: real sandboxes, the real orchestrator, zero-gui through the gateway -------------------------
def _service_pids(token: str) -> list[int]:
    """Host pids of the GUI service holding `token` (only the service's argv carries it)."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                argv = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"openforgerl.envs.gui.service" in argv and token.encode() in argv:
                found.append(int(d.name))
    return found


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # it exited meanwhile (a Chromium helper does, often): an exception here would end
        return b""  # the policy's engine call as `gateway_internal`, and the rollout as infra_error:gateway


def _read(path: Path) -> str:
    return path.read_text()


def _kill(what: str, token: str) -> int:
    """SIGKILL the service (`service`) or only the browser under it (`browser`); how many were killed."""
    killed = 0
    for pid in _service_pids(token):
        targets = (
            [pid] if what == "service" else [p for p in _descendants(pid) if b"chrom" in _cmdline(p)[:200]]
        )
        for p in targets:
            try:
                os.kill(p, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
    return killed


async def _run(
    rt: Any, harness: Any, engine: Any, tmp_path: Path, retries: int, budget_s: float = 150.0
) -> list[Any]:
    from openforgerl.engines.scripted import MODEL_NAME
    from openforgerl.gateway.server import start_gateway
    from openforgerl.orchestrator.batch import run_batch
    from openforgerl.orchestrator.config import OrchestratorConfig
    from openforgerl.sandbox.local import LocalBackend
    from openforgerl.store.sqlite import SQLiteCallStore

    backend = LocalBackend(root=tmp_path / "sbx")
    store = SQLiteCallStore(tmp_path / "calls.db")
    config = OrchestratorConfig(
        group_size=1,
        min_group_size=1,
        retries=retries,
        model=MODEL_NAME,
        harness_cache=tmp_path,
        budget_s=budget_s,
    )
    gateway = await start_gateway(engine, store, call_deadline_s=60.0)
    try:
        batch = await run_batch([rt], harness, gateway=gateway.access, backend=backend, config=config)
    finally:
        await gateway.aclose()
        await backend.aclose()
        await store.aclose()
    return list(batch.records)


@needs_gui
@pytest.mark.gui
@pytest.mark.timeout(600)
@pytest.mark.parametrize("what", ["service", "browser"])
async def test_service_killed_mid_rollout_is_infra_and_the_retry_is_scored(what: str, tmp_path: Path) -> None:
    from openforgerl.engines.chat_format import format_tool_call
    from openforgerl.engines.scripted import ScriptedEngine, Turn
    from openforgerl.harness.registry import get_harness
    from openforgerl.records import RolloutStatus
    from openforgerl.tasks.loader import load_runtime

    rt = load_runtime(TASK)
    state = {"killed": 0}

    def policy(turn: Turn) -> str:
        if not state["killed"]:  # first attempt, first call: the environment dies under the agent
            state["killed"] = _kill(what, rt.token)
        if any(m.get("role") == "tool" for m in turn.messages):
            return format_tool_call("computer_use", {"action": "terminate", "status": "success"})
        return format_tool_call("computer_use", {"action": "left_click", "coordinate": BOOK_VENUE_FWD})

    harness = get_harness("zero-gui", kind="browser", wall_clock_s=120)
    records = await _run(rt, harness, ScriptedEngine(policy), tmp_path, retries=2)
    assert state["killed"] >= 1
    # The first attempt is the one killed. A retry may meet an environment fault of its own on a loaded box
    # (a Chromium slower than the service's limits: infra again, retried again); the one scored is the last.
    first, *retries, retry = records
    assert all(r.status == RolloutStatus.INFRA_SANDBOX and not r.in_batch for r in retries), retries
    assert first.status == RolloutStatus.INFRA_SANDBOX, (first.status, first.metadata.get("error"))
    assert first.reward is None and first.in_batch is False and first.infra_tainted
    assert "GUI environment failed" in first.metadata["error"]
    assert first.metadata["harness_returncode"] == 5  # zero-gui: the computer service did not answer
    assert retry.status == RolloutStatus.OK and retry.reward == 1.0 and retry.in_batch, (
        retry.status,
        retry.metadata.get("harness_returncode"),
        retry.metadata.get("harness_stdout_tail"),
        retry.metadata.get("timings"),
        retry.verifier_log,
    )


# The agent asks its model first: what it does next is then the model's decision (a harness that ends
# before its first model call is the environment's failure to start it, whatever it did).
ASK_MODEL = r"""
import json, os, urllib.request as u
body = {"model": os.environ["OPENFORGERL_MODEL"], "messages": [{"role": "user", "content": "attack"}]}
headers = {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"}
url = os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions"
u.urlopen(u.Request(url, json.dumps(body).encode(), headers), timeout=60).read()
"""
KILLER = r"""
"$PY" -c "$ASK_MODEL"
"$PY" -c 'import time, urllib.request as u
for _ in range(600):
    try: u.urlopen("http://127.0.0.1:8765/healthz", timeout=5); break
    except OSError: time.sleep(0.2)'
kill -9 -1 2>/dev/null
pkill -9 -f 'chromiu[m]' 2>/dev/null; pkill -9 -f 'envs[.]gui[.]service' 2>/dev/null  # (never matches itself)
for p in /proc/[0-9]*; do [ "${p#/proc/}" = "$$" ] || kill -9 "${p#/proc/}" 2>/dev/null; done
"$PY" -c 'import urllib.request as u
print(len(u.urlopen("http://127.0.0.1:8765/screenshot", timeout=30).read()))'
exit 1
"""


@needs_gui
@pytest.mark.gui
@pytest.mark.timeout(600)
async def test_an_agent_killing_what_it_can_fails_itself_never_infra(tmp_path: Path) -> None:
    from openforgerl.engines.scripted import ScriptedEngine
    from openforgerl.harness.registry import get_harness
    from openforgerl.records import RolloutStatus
    from openforgerl.tasks.loader import load_runtime

    rt = load_runtime(TASK)
    harness = get_harness(
        "command", argv=["env", f"PY={sys.executable}", f"ASK_MODEL={ASK_MODEL}", "sh", "-c", KILLER]
    )
    [record] = await _run(rt, harness, ScriptedEngine(lambda turn: "unused"), tmp_path, retries=1)
    assert record.status == RolloutStatus.AGENT_FAILED and record.reward == 0.0, (
        record.status,
        record.metadata,
    )
    assert not record.infra_tainted and record.in_batch
    out = record.metadata["harness_stdout_tail"].split()
    assert out and int(out[-1]) > 1000, {
        k: v for k, v in record.metadata.items() if "harness" in k
    }  # the screen outlived it
    assert _service_pids(rt.token) == []  # and the sandbox took it down at close


# One Python process does the whole attack: it forks its 600 loops blocked on a pipe and releases them at
# once, and kills them itself when done. A shell forking them one by one beside the ones already spinning
# gets 1/k of the CPU for the k-th fork (quadratic: the 600-loop `sh` version ran into its 300 s budget in
# CI); a client started after the loops takes seconds of wall time just to import, and an interpreter's
# own exit beside 600 loops took ~30 s here (hence `os._exit` after the kills).
STARVER = (
    ASK_MODEL
    + r"""
import os, time, urllib.request as u
for _ in range(600):
    try: u.urlopen("http://127.0.0.1:8765/healthz", timeout=5); break
    except OSError: time.sleep(0.2)
r, w = os.pipe()
loops = []
for _ in range(600):
    pid = os.fork()
    if pid == 0:
        os.close(w); os.read(r, 1)
        while True: pass
    loops.append(pid)
os.close(r); os.close(w)
time.sleep(2)
for _ in range(3):
    t = time.monotonic(); n = len(u.urlopen("http://127.0.0.1:8765/screenshot", timeout=60).read())
    print(n, round(time.monotonic() - t, 3), flush=True)
for pid in loops: os.kill(pid, 9)
os._exit(1)
"""
)


@needs_gui
@pytest.mark.gui
@pytest.mark.timeout(600)
async def test_an_agent_busy_looping_600_processes_cannot_starve_the_screen_into_infra(
    tmp_path: Path,
) -> None:
    """The agent's processes share the sandbox's CPU quota with the service but sit in a child group with a
    tenth of its weight (`sandbox.cgroups`): its screenshots are served, no fault is counted, and the rollout
    is the agent's own failure. In one shared group (the split disabled) the screenshots took 5.8-9.8 s with
    300 loops, and with 600 they pass the service's two 10 s tries: a fault, infra, the agent's 0 dodged
    (`test_the_cpu_split_keeps_the_service_running_under_600_agent_loops` measures both sides directly).
    The timings are the agent's own client's too (one of its 601 processes), so
    they are printed, not bounded."""
    from openforgerl.engines.scripted import ScriptedEngine
    from openforgerl.harness.registry import get_harness
    from openforgerl.records import RolloutStatus
    from openforgerl.tasks.loader import load_runtime

    rt = load_runtime(TASK)
    harness = get_harness("command", argv=[sys.executable, "-c", STARVER])
    # the budget is a cap, not a wait: the attack ends by itself once its three screenshots are served
    records = await _run(
        rt, harness, ScriptedEngine(lambda turn: "unused"), tmp_path, retries=1, budget_s=300.0
    )
    # one attempt: an environment fault would have made it infra and retried it (what the split prevents)
    assert len(records) == 1, [(r.status, r.metadata.get("error")) for r in records]
    [record] = records
    # the agent's own end either way: it exits 1 after its screenshots, or (a box loaded by other work) its
    # 600 loops outlast the budget
    assert (record.status, record.reward) in (
        (RolloutStatus.AGENT_FAILED, 0.0),
        (RolloutStatus.TIMEOUT, None),
    ), (record.status, record.metadata)  # a timeout is never verified: trained as the agent's failure
    assert (
        not record.infra_tainted
    )  # never a fault of the environment (a timeout without calls trains nothing)
    shots = [
        line.split()
        for line in str(record.metadata.get("harness_stdout_tail", "")).splitlines()
        if line.strip()
    ]
    if record.status == RolloutStatus.AGENT_FAILED:
        assert record.in_batch and len(shots) == 3 and all(int(n) > 1000 for n, _ in shots), record.metadata[
            "harness_stdout_tail"
        ]
    print(
        "status",
        record.status,
        "screenshot seconds under the attack:",
        [s for _, s in shots],
        "harness_s",
        record.metadata["timings"].get("harness_s"),
    )


# The victim stands for the screen: from the attack's start (`.go`) to its end (`.stop`) it spins and then
# writes the CPU seconds it got and the wall seconds it spun. The attacker forks its loops blocked on a pipe,
# releases them once the victim is ready, and kills them only after the victim has written: a starved victim
# notices `.go` late, and loops killed on a fixed clock would leave it to spin unopposed (measured: a control
# that once got 0.43 CPU s in 3 s).
WINDOW_S = 3.0
VICTIM = r"""
import os, sys, time
d = "/workdir/" + sys.argv[1]
open(d + ".ready", "w").close()
while not os.path.exists(d + ".go"): time.sleep(0.02)
w0, c0 = time.monotonic(), time.process_time()
check = w0
while True:
    now = time.monotonic()
    if now - check > 0.01:
        check = now
        if os.path.exists(d + ".stop"): break
with open(d + ".out", "w") as f: f.write(f"{time.process_time() - c0:.4f} {time.monotonic() - w0:.4f}")
"""
ATTACKER = r"""
import os, sys, time
d, window = "/workdir/" + sys.argv[1], float(sys.argv[2])
while not os.path.exists(d + ".ready"): time.sleep(0.02)
r, w = os.pipe()
loops = []
for _ in range(600):
    pid = os.fork()
    if pid == 0:
        os.close(w); os.read(r, 1)
        while True: pass
    loops.append(pid)
open(d + ".go", "w").close()
os.close(r); os.close(w)
time.sleep(window)
open(d + ".stop", "w").close()
deadline = time.monotonic() + 60
while not os.path.exists(d + ".out") and time.monotonic() < deadline: time.sleep(0.05)
for pid in loops: os.kill(pid, 9)
os._exit(0)
"""


async def _victim_cpu_share(sbx: Any, name: str, *, in_service_group: bool) -> float:
    """The share of a core the victim got (CPU seconds / wall seconds) while the agent's 600 loops spun."""
    import asyncio

    victim = [sys.executable, "-c", VICTIM, name]
    shared = None
    if in_service_group:
        await sbx.spawn(victim)  # as the GUI screen is started: the service group
    else:
        shared = asyncio.ensure_future(sbx.exec(victim, timeout_s=120))  # the control: the agent's own group
    attack = await sbx.exec([sys.executable, "-c", ATTACKER, name, str(WINDOW_S)], timeout_s=120)
    assert attack.returncode == 0, attack
    if shared is not None:
        assert (await shared).returncode == 0
    for _ in range(600):
        try:
            cpu, wall = map(float, (await sbx.read_file(f"/workdir/{name}.out")).split())
            return cpu / wall
        except FileNotFoundError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"the {name} victim wrote nothing")


@pytest.mark.timeout(300)
async def test_the_cpu_split_keeps_the_service_running_under_600_agent_loops(tmp_path: Path) -> None:
    """The service group's tenth-weight split, measured on the victim itself: with 600 busy loops in the
    agent group a process started as the service is (`spawn`) keeps most of a core, while the same process
    in the agent's own group (the control: what one shared group would give) gets about 2/601 of the CPU.
    The ratio is bounded (expected ~100-300x; other load on the box scales both sides alike)."""
    from openforgerl.sandbox.base import SandboxSpec
    from openforgerl.sandbox.cgroups import cgroup_mode
    from openforgerl.sandbox.local import LocalBackend

    if cgroup_mode() is None:
        pytest.skip("no writable cgroup fs (not root): the sandbox has no CPU split to test")
    backend = LocalBackend(root=tmp_path / "sbx")
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="starve", lifetime_s=300))
    try:
        assert sbx.cgroup is not None and set(sbx.cgroup.children) == {"agent", "service"}
        split = await _victim_cpu_share(sbx, "split", in_service_group=True)
        shared = await _victim_cpu_share(sbx, "shared", in_service_group=False)
    finally:
        await sbx.aclose()
        await backend.aclose()
    print(
        "victim's share of a core under 600 loops: in the "
        f"service group {split:.3f}, in the agent's {shared:.4f}"
    )
    assert split > 20 * shared, (split, shared)  # the split protects the service ...
    assert shared < 0.05, (split, shared)  # ... from an attack that starves it without the split


@needs_gui
@pytest.mark.gui
@pytest.mark.timeout(300)
@pytest.mark.parametrize("task", ["desktop-board-01", "desktop-editor-01"])
async def test_desktop_apps_run_niced_in_the_service_group(task: str) -> None:
    """What the agent drives on a desktop (Chromium runs any `javascript:` URL typed into its URL bar) runs at
    nice 19 beside the screen at 0, all in the sandbox's service CPU group, never the agent's."""
    from openforgerl.envs.desktop.screen import APP_NICE
    from openforgerl.sandbox.base import SandboxSpec
    from openforgerl.sandbox.local import LocalBackend
    from openforgerl.tasks.loader import load_runtime

    rt = load_runtime(GUI_SUITE / task)
    backend = LocalBackend()
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="nice", files=rt.files(), lifetime_s=300))
    try:
        await sbx.spawn(list(rt.service_argv()))
        probe = (
            "import time, urllib.request as u\nfor _ in range(600):\n try: u.urlopen("
            "'http://127.0.0.1:8765/screenshot', timeout=30).read(); break\n except OSError: time.sleep(0.2)"
        )
        assert (await sbx.exec([sys.executable, "-c", probe], timeout_s=120)).returncode == 0
        tree = {q for p in _service_pids(rt.token) for q in (p, *_descendants(p))}  # launcher, bwrap, service
        procs = {p: _cmdline(p).split(b"\0")[0].rsplit(b"/", 1)[-1].decode() for p in tree}
        nice = {p: os.getpriority(os.PRIO_PROCESS, p) for p in procs}
        apps = [p for p, name in procs.items() if name in ("chromium", "mousepad")]
        screen = [p for p, name in procs.items() if name == "Xvfb" or name.startswith("python")]
        assert apps and screen, procs
        assert {nice[p] for p in apps} == {APP_NICE} and {nice[p] for p in screen} == {0}, {
            procs[p]: nice[p] for p in procs
        }
        if sbx.cgroup is not None and sbx.cgroup.children:
            groups = {p: _read(Path(f"/proc/{p}/cgroup")) for p in [*apps, *screen]}
            assert all(f"/{sbx.id}/service" in g for g in groups.values()), groups
    finally:
        await sbx.aclose()
        await backend.aclose()
