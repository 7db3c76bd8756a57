"""Harbor-layout folders that carry their own verifier: claw-bench (pytest), Harbor (tests/test.sh),
and converted QwenClawBench tasks (tests/grade.py). Loaded in place; no service process.

- claw-bench: `environment/setup.sh WORKSPACE` builds the workspace (run once on the host, cached);
  the agent works in `/workdir/workspace`; the verifier is `pytest verifier/test_output.py
  --workspace /workdir/workspace` (with the suite's shared `conftest.py`); reward 1 iff all tests pass.
- Harbor: `tests/test.sh` writes `/logs/verifier/reward.{json,txt}`; our sandboxes have a read-only
  root, so `/logs/` and `/tests/` in the script are mapped under `/workdir/.claw/`.
- python: `grade(transcript, workspace_path) -> {name: score}`; reward = mean of the scores (no transcript
  is available to it yet: an empty list is passed).
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from openforgerl.envs.runtime import read_tree
from openforgerl.envs.task import Task
from openforgerl.harness.base import McpServer
from openforgerl.orchestrator.task_protocol import Verdict, VerifierError

__all__ = ["HarborTaskRuntime"]

CLAW = "/workdir/.claw"
WORKSPACE = "/workdir/workspace"


@functools.lru_cache(maxsize=512)
def _setup_workspace(setup: Path) -> tuple[tuple[str, bytes], ...]:
    """Run a claw-bench setup.sh on a scratch copy of the task; the workspace files it made.

    Most scripts take the workspace as $1, some always use `<task>/workspace`: on the copy both are
    the same folder, and the original task folder is never written to.
    """
    with tempfile.TemporaryDirectory() as tmp:
        task = Path(tmp) / "task"
        shutil.copytree(setup.parent, task / "environment")
        ws = task / "workspace"
        res = subprocess.run(["bash", str(task / "environment" / setup.name), str(ws)], capture_output=True,
                             timeout=120)
        if res.returncode != 0:
            raise VerifierError(f"{setup} failed: {res.stderr.decode(errors='replace')[-500:]}")
        return tuple(sorted(read_tree(ws, "workspace/").items()))


class HarborTaskRuntime:
    """A task judged by its own script (see module docstring)."""

    def __init__(self, task: Task, *, python: str | None = None) -> None:
        self.task = task
        self.task_id = task.task_id
        self.instruction = task.instruction
        self.budget_s = task.budget_s
        self.python = python or sys.executable
        self.metadata: dict[str, Any] = {"split": task.meta.split, "difficulty": task.meta.difficulty,
                                         "tags": list(task.meta.tags), "source": task.meta.source}
        self.service_ready_s = 0.0

    def files(self) -> Mapping[str, bytes]:
        setup = self.task.root / "environment" / "setup.sh"
        if self.task.meta.verifier == "pytest" and setup.is_file():
            return dict(_setup_workspace(setup.resolve()))
        return read_tree(self.task.root / "environment" / "workspace")

    def service_argv(self) -> Sequence[str] | None:
        return None

    def mcp_servers(self) -> Sequence[McpServer]:
        return []

    def function_tools(self) -> Sequence[Mapping[str, Any]]:
        return []

    def shell_tools_hint(self) -> str:
        return ""

    async def _copy(self, sandbox: Any, files: Mapping[str, bytes], dest: str) -> None:
        for rel, data in files.items():
            await sandbox.write_file(f"{dest}/{rel}", data)

    async def verify(self, sandbox: Any) -> Verdict:
        kind = self.task.meta.verifier
        judge = {"pytest": self._pytest, "script": self._script, "python": self._python}[kind]
        return await judge(sandbox)

    async def _exec(self, sandbox: Any, argv: list[str]) -> tuple[int, str]:
        res = await sandbox.exec(argv, timeout_s=self.task.config.verifier.timeout_sec or 600.0)
        log = res.stdout.decode(errors="replace") + res.stderr.decode(errors="replace")
        if res.timed_out:
            raise VerifierError(f"verifier timed out: {log[-1000:]}")
        return res.returncode, log

    async def _pytest(self, sandbox: Any) -> Verdict:
        tests = read_tree(self.task.root / "verifier")
        conftest = self.task.root.parent.parent / "conftest.py"
        if conftest.is_file():
            tests["conftest.py"] = conftest.read_bytes()
        await self._copy(sandbox, tests, f"{CLAW}/tests")
        argv = [self.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", f"{CLAW}/tests",
                f"{CLAW}/tests/test_output.py", "--workspace", WORKSPACE]
        rc, log = await self._exec(sandbox, argv)
        if rc not in (0, 1):
            raise VerifierError(f"pytest exited {rc} (not a test verdict): {log[-1500:]}")
        reward = 1.0 if rc == 0 else 0.0
        return Verdict(reward, {"reward": reward, "pass": reward}, log)

    async def _script(self, sandbox: Any) -> Verdict:
        tests = read_tree(self.task.root / "tests")
        if "test.sh" in tests:
            tests["test.sh"] = tests["test.sh"].replace(b"/logs/", f"{CLAW}/logs/".encode()).replace(
                b"/tests/", f"{CLAW}/tests/".encode())
        await self._copy(sandbox, tests, f"{CLAW}/tests")
        await sandbox.write_file(f"{CLAW}/logs/verifier/.keep", b"")
        rc, log = await self._exec(sandbox, ["bash", f"{CLAW}/tests/test.sh"])
        from openforgerl.envs.runtime import parse_reward

        for name in ("reward.json", "reward.txt"):
            try:
                raw = await sandbox.read_file(f"{CLAW}/logs/verifier/{name}")
            except (OSError, FileNotFoundError):
                continue
            if raw.strip():
                return parse_reward(raw, log)
        raise VerifierError(f"test.sh (exit {rc}) wrote no reward file: {log[-1500:]}")

    async def _python(self, sandbox: Any) -> Verdict:
        await self._copy(sandbox, read_tree(self.task.root / "tests"), f"{CLAW}/tests")
        out = f"{CLAW}/reward.json"
        argv = [self.python, "-m", "openforgerl.envs.verify.pygrade", "--grade", f"{CLAW}/tests/grade.py",
                "--workspace", "/workdir", "--out", out]
        rc, log = await self._exec(sandbox, argv)
        if rc != 0:
            raise VerifierError(f"grade.py failed (exit {rc}): {log[-1500:]}")
        from openforgerl.envs.runtime import parse_reward

        return parse_reward(await sandbox.read_file(out), log)

    async def run_oracle(self, sandbox: Any) -> str:
        """Run solution/solve.sh (claw-bench: with the workspace as $1); "" on success."""
        solution = read_tree(self.task.root, "")
        keep = {k: v for k, v in solution.items() if k.startswith(("solution/", "environment/"))}
        await self._copy(sandbox, keep, "/tmp/task")
        args = [WORKSPACE] if self.task.meta.verifier == "pytest" else []
        res = await sandbox.exec(["bash", "/tmp/task/solution/solve.sh", *args], timeout_s=300.0)
        if res.returncode != 0:
            return f"oracle exited {res.returncode}: {res.stderr.decode(errors='replace')[-500:]}"
        return ""
