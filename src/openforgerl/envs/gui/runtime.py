"""`GuiTaskRuntime`: a task folder with `[environment] kind = "browser" | "desktop"` as a `TaskRuntime`.

Task folder additions: `environment/gui.json` (`start_url`, `apps` = {app: fixtures}, `desktop.launch`,
`screen`), `solution/actions.json` (the oracle, see `gui.oracle`), `tests/checks.toml` (Claw spec over
`<app>.<list>` state and workdir files).

Per rollout, inside the sandbox:
- `/workdir/.gui/config.json` (the environment config; no expected values in it) and the workspace files;
- the service (`service_argv`): apps on 127.0.0.1:8080, the screen and its computer service on :8765
  (`computer_url`, also `tool_service_url`): what the GUI harness calls;
- a secret token per rollout, in the service's argv and the verifier's argv only. The agent's exec
  has its own PID namespace (cannot read the service's argv or memory), and no file inside holds it,
  so the agent can neither read `/__state` nor use `/locate` (the oracle's element lookup). Each
  `service_argv()` call makes a fresh token; `service_started(sandbox)` (before the agent runs) reads
  which one that sandbox's service holds (`SERVICE_ID_FILE`, written by the service once its screen is
  served: `token_id`, a hash) and binds the token to the sandbox, so `verify` and `run_oracle` use that
  rollout's own token: a token that leaks from one rollout opens nothing in another rollout of the same task.
After the harness: `gui.verify` in a fresh sandbox (`run_verifier`), which reads the state through
the token and the read-only workdir. Outcomes as `ClawTaskRuntime.verify` (exit 3 -> TamperError).

The environment's own failure (`gui.verify` exit 4: the service is gone, its screen cannot take a
screenshot, or it answered a fault during the rollout) is infra — `GuiServiceDown`, a `SandboxError`:
`infra_error:sandbox`, dropped and retried, never a reward — unless the sandbox counted a breach of a
limit the agent shares with the service (an OOM kill, the pids cap, a full disk, seconds at the CPU
quota; `sandbox.base.limits_breached`): then the agent broke it, reward 0 (`TamperError`). The agent
cannot signal the service (its exec has its own PID namespace, and its processes are gone before the verifier
runs), and cannot take its CPU either (the service's cgroup child has ten times the agent's weight; a
desktop's apps run at nice 19: `sandbox.cgroups`, `desktop.screen`), so these are the only ways it
could take the service down on purpose.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from openforgerl.env.checks.spec import load_spec
from openforgerl.env.computer.service import COMPUTER_PORT, token_id
from openforgerl.env.contract import TaskDefaults, Verdict
from openforgerl.env.screens import SandboxNeeds, get_environment
from openforgerl.sandbox.base import SandboxError, TamperError, limits_breached
from openforgerl.sandbox.verifier import VERIFIER_IN, VERIFIER_OUT, run_verifier
from openforgerl.tasks.families import environment_kind
from openforgerl.tasks.format import Task, check_verifier_file, read_tree
from openforgerl.tasks.verdicts import verdict_of

__all__ = ["GUI_DIR", "GuiServiceDown", "GuiTaskRuntime", "check_gui_task"]

GUI_DIR = ".gui"
APPS_PORT = 8080
EXIT_TAMPERED = 3
EXIT_SERVICE_DOWN = 4  # = gui.verify.EXIT_SERVICE_DOWN
INSIDE = "/workdir"
ORACLE_TIMEOUT_S = 180.0
READY_LIMIT_S = 60.0  # = gui.verify.READY_LIMIT_S: a screen slower than this is the environment's failure
SERVICE_ID_FILE = "/tmp/.gui-service-id"
"""Read by the host (`read_file`, no process in the sandbox) before the agent runs, so the agent cannot
have written it; a probe run inside (`exec`) is one more bubblewrap start per rollout, and one failed
under load."""
ID_POLL_S = 0.2
TOKEN_CAP = 4096
"""Tokens kept per runtime, issued or bound, oldest forgotten first (a sandbox that failed before its
service answered never binds its token; a rollout's verify may run more than once, so none is popped)."""


class GuiServiceDown(SandboxError):
    """The GUI environment's own service failed during the rollout (infra: `infra_error:sandbox`)."""


def check_gui_task(task: Task) -> None:
    """The GUI families' load-time check: the verifier's file exists; tests/checks.toml is a valid spec of the
    SDK's check kinds (the ones the GUI verifier judges: an environment's own
    kinds are not registered there)."""
    path = check_verifier_file(task)
    if task.meta.verifier == "checks":
        load_spec(path)


class GuiTaskRuntime(TaskDefaults):
    """One GUI task; per rollout only its service's token (bound to the sandbox, never shown to the agent)."""

    def __init__(self, task: Task, *, python: str | None = None, **_: Any) -> None:
        self.task = task
        self.task_id = task.task_id
        self.instruction = task.instruction
        self.budget_s = task.budget_s
        self.python = python or sys.executable
        self.kind = environment_kind(task) or "browser"
        self.environment = get_environment(self.kind)
        self.env_config: dict[str, Any] = json.loads((task.root / "environment" / "gui.json").read_text())
        self.token = ""
        """The token of the latest `service_argv()` (for a caller that starts one service by hand)."""
        self._issued: dict[str, str] = {}  # token_id -> token, issued and not yet bound to a sandbox
        self._bound: dict[str, str] = {}  # sandbox id -> the token its service holds
        self.metadata: dict[str, Any] = {
            "split": task.meta.split,
            "difficulty": task.meta.difficulty,
            "environment": self.kind,
            "tags": list(task.meta.tags),
            # what `eval` reports per harness x service: the kind, then the web apps
            "services": [self.kind, *sorted(self.env_config.get("apps") or {})],
        }
        self.computer_url = f"http://127.0.0.1:{COMPUTER_PORT}"
        self.tool_service_url = self.computer_url
        self.screen = tuple(self.env_config.get("screen", (1280, 720)))

    @property
    def needs(self) -> SandboxNeeds:
        return self.environment.needs

    @property
    def ro_binds(self) -> tuple[str, ...]:
        return self.needs.ro_binds

    def files(self) -> Mapping[str, bytes]:
        out = read_tree(self.task.root / "environment" / "workspace")
        out[f"{GUI_DIR}/config.json"] = json.dumps({**self.env_config, "kind": self.kind}, indent=1).encode()
        return out

    def service_argv(self, workdir: str = INSIDE) -> Sequence[str]:
        """One rollout's service, with a fresh token (bound to its sandbox by `service_started`)."""
        self.token = secrets.token_hex(16)
        self._issued[token_id(self.token)] = self.token
        _trim(self._issued)
        return [
            self.python,
            "-I",
            "-m",
            "openforgerl.envs.gui.service",
            "--config",
            f"{workdir}/{GUI_DIR}/config.json",
            "--token",
            self.token,
            "--apps-port",
            str(APPS_PORT),
            "--computer-port",
            str(COMPUTER_PORT),
            "--id-file",
            SERVICE_ID_FILE,
        ]

    async def service_started(self, sandbox: Any) -> None:
        """Wait for the sandbox's screen, then bind the token its service holds to the sandbox."""
        named, deadline = "", time.monotonic() + READY_LIMIT_S
        while not named and time.monotonic() < deadline:
            try:
                named = (await sandbox.read_file(SERVICE_ID_FILE)).decode(errors="replace").strip()
            except Exception:  # not written yet (the screen is starting)
                await asyncio.sleep(ID_POLL_S)
        token = self._issued.pop(named, None)
        if token is None:
            why = (
                f"it names {named[:40]!r}, none of the {len(self._issued)} tokens this task issued"
                if named
                else f"its screen was not served within {READY_LIMIT_S:.0f} s"
            )
            raise GuiServiceDown(f"GUI environment failed: {why}")
        self._bound[sandbox.id] = token
        _trim(self._bound)

    def token_for(self, sandbox: Any) -> str:
        """The token of this sandbox's service
        (`self.token` when it was started without `service_started`)."""
        return self._bound.get(getattr(sandbox, "id", ""), self.token)

    def shell_tools_hint(self) -> str:
        w, h = self.screen
        return (
            f"A {w}x{h} screen is served at {self.computer_url}: GET /screenshot (PNG), "
            'POST /act {"action": ..., pixel x/y} (see GET /info).'
        )

    async def verify(self, sandbox: Any) -> Verdict:
        inputs = read_tree(self.task.root / "tests", "tests/")
        state_url = f"http://127.0.0.1:{APPS_PORT}" if self.env_config.get("apps") else ""
        argv = [
            self.python,
            "-I",
            "-m",
            "openforgerl.envs.gui.verify",
            "--checks",
            f"{VERIFIER_IN}/tests/checks.toml",
            "--state-url",
            state_url,
            "--token",
            self.token_for(sandbox),
            "--workdir",
            INSIDE,
            "--computer-url",
            self.computer_url,
            "--out",
            f"{VERIFIER_OUT}/reward.json",
            "--log",
            f"{VERIFIER_OUT}/verifier.log",
        ]
        run = await run_verifier(
            sandbox, argv, inputs=inputs, timeout_s=self.task.config.verifier.timeout_sec or 120.0
        )
        if run.result.returncode == EXIT_SERVICE_DOWN and not run.result.timed_out:
            why = run.result.stderr.decode(errors="replace")[-1000:].strip()
            if breached := limits_breached(sandbox):
                raise TamperError(
                    f"the GUI service broke after the agent breached the sandbox's "
                    f"{'/'.join(breached)} limit: {why}"
                )
            raise GuiServiceDown(f"GUI environment failed: {why}")
        return verdict_of(run)

    async def run_oracle(self, sandbox: Any) -> str:
        """Replay solution/actions.json through the computer service (validation only)."""
        actions = self.task.root / "solution" / "actions.json"
        if not actions.is_file():
            return "no solution/actions.json"
        await sandbox.write_file("/tmp/oracle-actions.json", actions.read_bytes())
        argv = [
            self.python,
            "-I",
            "-m",
            "openforgerl.envs.gui.oracle",
            "--actions",
            "/tmp/oracle-actions.json",
            "--token",
            self.token_for(sandbox),
            "--url",
            self.computer_url,
        ]
        res = await sandbox.exec(argv, timeout_s=ORACLE_TIMEOUT_S)
        if res.returncode != 0:
            return f"oracle exited {res.returncode}: {res.stderr.decode(errors='replace')[-800:]}"
        return ""


def _trim(tokens: dict[str, str]) -> None:
    while len(tokens) > TOKEN_CAP:
        del tokens[next(iter(tokens))]
