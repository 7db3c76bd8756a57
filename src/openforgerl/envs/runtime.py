"""`ClawTaskRuntime`: a loaded task folder as the orchestrator's `TaskRuntime`.

Inside the sandbox (paths are inside paths):
- `/workdir/<workspace files>` from `environment/workspace/`;
- `/workdir/.claw/fixtures/*.json` + `/workdir/.claw/config.json` (exposed tools, faults), read by the
  service process `python -m openforgerl.envs.services` on 127.0.0.1:`port` (its own netns per sandbox);
- the harness reaches the tools via the stdio MCP server, the shell CLI or function tools;
- after the harness (its whole process tree gone): the verifier runs in a fresh sandbox
  (`sandbox.verifier.run_verifier`) with `/workdir` read-only, `tests/` at `/verifier/in/tests/`
  (never in the agent's workdir: the task's tests are never visible to the harness), its output in
  `/verifier/out/`, as `python -I -m openforgerl.envs.verify` (isolated: no cwd, PYTHONPATH or user
  site on `sys.path`, so a planted `/workdir/openforgerl/...` cannot shadow it).

Outcomes: reward.json -> Verdict; exit 3 (what the agent left broke the rules) -> `TamperError`
(reward 0, `agent_failed`); any other failure, timeout or kill of the verifier -> `VerifierError`
(infra: it ran trusted code on bounded, non-blocking input).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from openforgerl.envs.claw_cli import usage_lines
from openforgerl.envs.client import DEFAULT_PORT, URL_ENV
from openforgerl.envs.task import Task, load_task
from openforgerl.envs.tools import function_tools, tools_for
from openforgerl.harness.base import McpServer
from openforgerl.orchestrator.task_protocol import Verdict, VerifierError
from openforgerl.sandbox.base import TamperError
from openforgerl.sandbox.verifier import VERIFIER_IN, VERIFIER_OUT, run_verifier

__all__ = ["ClawTaskRuntime", "load_runtime", "read_tree"]

CLAW_DIR = ".claw"
EXIT_TAMPERED = 3  # = envs.verify.run.EXIT_TAMPERED (not imported: keeps this module light)
INSIDE = "/workdir"


def read_tree(root: Path, prefix: str = "") -> dict[str, bytes]:
    """Every file under `root` as {prefix + relative path: bytes}."""
    if not root.is_dir():
        return {}
    return {prefix + str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


class ClawTaskRuntime:
    """One Claw task (verifier = checks); stateless across rollouts, so safe to share."""

    def __init__(self, task: Task, *, port: int = DEFAULT_PORT, python: str | None = None) -> None:
        self.task = task
        self.task_id = task.task_id
        self.instruction = task.instruction
        self.budget_s = task.budget_s
        self.port = port
        self.python = python or sys.executable
        self.metadata: dict[str, Any] = {"split": task.meta.split, "difficulty": task.meta.difficulty,
                                         "services": list(task.meta.services), "tags": list(task.meta.tags)}
        self.service_ready_s = 0.0
        self.host: Any = None  # envs.host_side.HostSide, attached by `eval` (call log, judge, user relay)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def tool_service_url(self) -> str:
        """Where direct-tool harnesses (`zero`) POST `/tools/<name>` (HarnessContext.tool_service_url)."""
        return self.url

    @property
    def tools(self) -> list[str]:
        return self.task.tool_names

    def files(self) -> Mapping[str, bytes]:
        env = self.task.root / "environment"
        out = read_tree(env / "workspace")
        out |= read_tree(env / "fixtures", f"{CLAW_DIR}/fixtures/")
        config = {"tools": self.tools, "faults": [f.model_dump() for f in self.task.meta.faults]}
        out[f"{CLAW_DIR}/config.json"] = json.dumps(config, indent=1).encode()
        return out

    def service_argv(self, workdir: str = INSIDE) -> Sequence[str]:
        claw = f"{workdir}/{CLAW_DIR}"
        # -I: the service runs with cwd /workdir; a lazy import must never come from the agent's files
        return [self.python, "-I", "-m", "openforgerl.envs.services", "--fixtures", f"{claw}/fixtures",
                "--workspace", workdir, "--config", f"{claw}/config.json", "--port", str(self.port)]

    def mcp_servers(self) -> Sequence[McpServer]:
        args = ["-m", "openforgerl.envs.mcp_server", "--tools", ",".join(self.tools)]
        return [McpServer("claw", self.python, args, {URL_ENV: self.url})]

    def function_tools(self) -> Sequence[Mapping[str, Any]]:
        return function_tools(tools_for(names=self.tools))

    def cli_program(self) -> str:
        """The shell CLI by absolute path next to the interpreter: a PATH lookup may find a wrapper
        (e.g. a pyenv shim) that needs the host's HOME, which the sandbox does not have."""
        script = Path(self.python).parent / "openforgerl-claw"
        return str(script) if script.is_file() else f"{self.python} -m openforgerl.envs.claw_cli"

    def shell_tools_hint(self) -> str:
        lines = usage_lines(tools_for(names=self.tools), self.cli_program())
        head = ("Use these shell commands to act on the user's mail, calendar, contacts, knowledge base, "
                "to-do list, notes and workspace files. Each prints JSON; on an error it exits non-zero "
                "(transient errors can be retried).")
        return "\n".join([head, *lines])

    async def verify(self, sandbox: Any) -> Verdict:
        """Judge in a fresh sandbox that sees the workdir read-only (see the module docstring)."""
        inputs = read_tree(self.task.root / "tests", "tests/")
        argv = [self.python, "-I", "-m", "openforgerl.envs.verify", "--checks", f"{VERIFIER_IN}/tests/checks.toml",
                "--state-url", self.url, "--workdir", INSIDE, "--out", f"{VERIFIER_OUT}/reward.json",
                "--log", f"{VERIFIER_OUT}/verifier.log"]
        if self.host is not None:
            argv += await self._host_inputs(sandbox, inputs)
        run = await run_verifier(sandbox, argv, inputs=inputs,
                                 timeout_s=self.task.config.verifier.timeout_sec or 120.0)
        return verdict_of(run)

    async def _host_inputs(self, sandbox: Any, inputs: dict[str, bytes]) -> list[str]:
        """The transcript (from the call log) and the `llm_judge` scores (from the judge), both made on the
        host after the harness is gone, as verifier inputs; a judge failure is infra (`VerifierError`)."""
        from openforgerl.envs.host_side import transcript_json
        from openforgerl.envs.judge import JudgeError
        from openforgerl.envs.verify.spec import load_spec

        messages = await self.host.messages(sandbox)
        extra: list[str] = []
        if messages is not None:
            inputs["host/transcript.json"] = transcript_json(messages)
            extra += ["--transcript", f"{VERIFIER_IN}/host/transcript.json"]
        checks = load_spec(self.task.root / "tests" / "checks.toml").checks
        rubrics = {c.name: str(getattr(c, "rubric", "")) for c in checks if c.kind == "llm_judge"}
        if rubrics:
            try:
                scores = await self.host.claw_eval_scores(self.task.instruction, rubrics, messages or [],
                                                          self.host.user_record(sandbox))
            except JudgeError as exc:
                raise VerifierError(f"llm judge: {exc}") from exc
            inputs["host/judge.json"] = json.dumps(scores).encode()
            extra += ["--judge-scores", f"{VERIFIER_IN}/host/judge.json"]
        return extra

    async def run_oracle(self, sandbox: Any) -> str:
        """Run solution/solve.sh inside the sandbox (validation only); "" on success, else why not."""
        script = self.task.root / "solution" / "solve.sh"
        if not script.is_file():
            return "no solution/solve.sh"
        await sandbox.write_file("/tmp/solve.sh", script.read_bytes())
        env = {"OPENFORGERL_PYTHON": self.python, URL_ENV: self.url}
        res = await sandbox.exec(["bash", "/tmp/solve.sh"], env=env, timeout_s=120.0)
        if res.returncode != 0:
            return f"oracle exited {res.returncode}: {res.stderr.decode(errors='replace')[-500:]}"
        return ""


def verdict_of(run: Any) -> Verdict:
    """The verdict of a finished verifier run (`sandbox.verifier.run_verifier`): exit 3 is the agent's
    tampering (reward 0, never infra); any other failure, or no `reward.json`, is a broken verifier."""
    res = run.result
    log = res.stdout.decode(errors="replace") + res.stderr.decode(errors="replace")
    if res.returncode == EXIT_TAMPERED and not res.timed_out:
        raise TamperError(log[-2000:])
    if res.returncode != 0 or res.timed_out or "reward.json" not in run.outputs:
        raise VerifierError(f"verifier exited {res.returncode} (timed_out={res.timed_out}): {log[-2000:]}")
    return parse_reward(run.outputs["reward.json"], log)


def parse_reward(raw: bytes, log: str) -> Verdict:
    """reward.json (flat dict of finite numbers with `reward`) or reward.txt (one float) → Verdict."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise VerifierError(f"reward file is not JSON: {raw[:200]!r}") from exc
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        return Verdict(float(data), {"reward": float(data)}, log)
    if not isinstance(data, dict) or not isinstance(data.get("reward"), (int, float)):
        raise VerifierError(f"reward file lacks a numeric 'reward': {raw[:200]!r}")
    return Verdict(float(data["reward"]), {k: float(v) for k, v in data.items()
                                            if isinstance(v, (int, float))}, log)


def load_runtime(root: Path | str, **kwargs: Any) -> Any:
    """The runtime of a task folder, from its family (envs/families.py: registered families, then GUI
    `[environment] kind`, Claw checks, claw-bench pytest or Harbor script)."""
    from openforgerl.envs.families import family_of

    task = load_task(root)
    return family_of(task).runtime(task, **kwargs)
