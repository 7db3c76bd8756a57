"""Harbor-layout folders that carry their own verifier: claw-bench (pytest), Harbor (tests/test.sh),
and converted QwenClawBench tasks (tests/grade.py). Loaded in place; no service process.

- claw-bench: `environment/setup.sh WORKSPACE` builds the workspace (run once on the host, cached);
  the agent works in `/workdir/workspace`; the verifier is `pytest verifier/test_output.py
  --workspace /workdir/workspace` (with the suite's shared `conftest.py`); reward 1 iff all tests pass.
- Harbor: `tests/test.sh` writes `/logs/verifier/reward.{json,txt}`; `/tests/` and `/logs/` in the script
  are mapped to the verifier's own input and output folders.
- python: `grade(transcript, workspace_path) -> {name: score}`; reward = mean of the scores (upstream's
  automated score). Under `eval` the transcript is built on the host from the call log (OpenClaw events,
  tasks/transcript.py; without a call log an empty list is passed), and a `tests/judge.json` task
  (QwenClawBench `hybrid` / `llm_judge`) is then judged on the host by `--judge-engine` and combined as
  upstream's `_combine_grades` does (tasks/host_side.py). A failed judge drops the trial as infra only when
  its answer could change the score: a hybrid below the automated threshold (or with no judge weight) is
  scored without it.

Every verifier runs apart from the agent (`sandbox.verifier.run_verifier`: after the harness's processes
are gone, in a fresh sandbox where `/workdir` is read-only): the task's tests arrive as inputs under
`/verifier/in/tests`, Python starts isolated (`-I`: no cwd, PYTHONPATH or user site on `sys.path`) with its
cwd outside the workdir, so nothing the agent planted (a `conftest.py`, a shadow module) is ever imported.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openforgerl.env.contract import TaskDefaults, Verdict, VerifierError
from openforgerl.env.judge import JudgeError
from openforgerl.sandbox.verifier import VERIFIER_IN, VERIFIER_OUT, run_verifier
from openforgerl.tasks.families import TaskFamily, register_family
from openforgerl.tasks.format import Task, check_verifier_file, read_tree
from openforgerl.tasks.host_side import combine_hybrid, hybrid_without_judge, transcript_json
from openforgerl.tasks.transcript import openclaw_events
from openforgerl.tasks.verdicts import parse_reward

__all__ = ["HARBOR", "HarborTaskRuntime"]

# what the fallback verifier (podman, kubernetes) reads back from the output folder
_OUTPUTS = ("reward.json", "logs/verifier/reward.json", "logs/verifier/reward.txt")


def _under(prefix: str, tree: Mapping[str, bytes]) -> dict[str, bytes]:
    return {prefix + rel: data for rel, data in tree.items()}


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
        res = subprocess.run(
            ["bash", str(task / "environment" / setup.name), str(ws)], capture_output=True, timeout=120
        )
        if res.returncode != 0:
            raise VerifierError(f"{setup} failed: {res.stderr.decode(errors='replace')[-500:]}")
        return tuple(sorted(read_tree(ws, "workspace/").items()))


# claw-bench's shared conftest registers `--workspace` and a `workspace` fixture; used when a task was
# copied out of its suite (no conftest.py above it), so its verifier still runs.
_FALLBACK_CONFTEST = b"""import pathlib

import pytest


def pytest_addoption(parser):
    parser.addoption("--workspace", action="store", default=None)


@pytest.fixture
def workspace(request):
    return pathlib.Path(request.config.getoption("--workspace"))
"""


def _suite_conftest(root: Path) -> bytes:
    """The nearest conftest.py (at most 3 levels up) that registers `--workspace`: claw-bench keeps it at
    `tasks/conftest.py` above `tasks/<domain>/<task>`, a flat copy has it 1 level up or not at all
    (then a stand-in with the same contract is used)."""
    for parent in list(root.parents)[:3]:
        conftest = parent / "conftest.py"
        if conftest.is_file() and b"--workspace" in (data := conftest.read_bytes()):
            return data
    return _FALLBACK_CONFTEST


class HarborTaskRuntime(TaskDefaults):
    """A task judged by its own script (see module docstring)."""

    def __init__(self, task: Task, *, python: str | None = None, **_: Any) -> None:
        self.task = task
        self.task_id = task.task_id
        self.instruction = task.instruction
        self.budget_s = task.budget_s
        self.python = python or sys.executable
        self.metadata: dict[str, Any] = {
            "split": task.meta.split,
            "difficulty": task.meta.difficulty,
            "tags": list(task.meta.tags),
            "source": task.meta.source,
        }
        self.host: Any = None  # tasks.host_side.HostSide, attached by `eval`

    def files(self) -> Mapping[str, bytes]:
        setup = self.task.root / "environment" / "setup.sh"
        if self.task.meta.verifier == "pytest" and setup.is_file():
            return dict(_setup_workspace(setup.resolve()))
        return read_tree(self.task.root / "environment" / "workspace")

    def cli_program(self) -> str:
        """No Claw shell CLI here (the scripted oracle gets no gold tool calls: its oracle is solve.sh)."""
        return ""

    async def _copy(self, sandbox: Any, files: Mapping[str, bytes], dest: str) -> None:
        for rel, data in files.items():
            await sandbox.write_file(f"{dest}/{rel}", data)

    async def verify(self, sandbox: Any) -> Verdict:
        kind = self.task.meta.verifier
        judge = {"pytest": self._pytest, "script": self._script, "python": self._python}[kind]
        return await judge(sandbox)

    async def _judge(self, sandbox: Any, argv: list[str], inputs: dict[str, bytes]) -> tuple[int, str, Any]:
        run = await run_verifier(
            sandbox,
            argv,
            inputs=inputs,
            outputs=_OUTPUTS,
            timeout_s=self.task.config.verifier.timeout_sec or 600.0,
        )
        res = run.result
        log = res.stdout.decode(errors="replace") + res.stderr.decode(errors="replace")
        if res.timed_out:
            raise VerifierError(f"verifier timed out: {log[-1000:]}")
        return res.returncode, log, run.outputs

    async def _pytest(self, sandbox: Any) -> Verdict:
        tests = read_tree(self.task.root / "verifier")
        tests.setdefault("conftest.py", _suite_conftest(self.task.root))
        where = f"{VERIFIER_IN}/tests"
        # `--workspace=PATH` as one word: pytest's early pass does not know the option yet and would take a
        # separate PATH for a test path, loading the agent's `<workspace>/conftest.py` as an initial conftest
        # (measured: a planted conftest emptied the collection). confcutdir stops the upward conftest search.
        argv = [
            self.python,
            "-I",
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--rootdir={where}",
            f"--confcutdir={where}",
            f"{where}/test_output.py",
            f"--workspace={WORKSPACE}",
        ]
        rc, log, _ = await self._judge(sandbox, argv, _under("tests/", tests))
        if rc not in (0, 1):
            raise VerifierError(f"pytest exited {rc} (not a test verdict): {log[-1500:]}")
        reward = 1.0 if rc == 0 else 0.0
        return Verdict(reward, {"reward": reward, "pass": reward}, log)

    async def _script(self, sandbox: Any) -> Verdict:
        tests = read_tree(self.task.root / "tests")
        if "test.sh" in tests:
            tests["test.sh"] = (
                tests["test.sh"]
                .replace(b"/logs/", f"{VERIFIER_OUT}/logs/".encode())
                .replace(b"/tests/", f"{VERIFIER_IN}/tests/".encode())
            )
        argv = [
            "/bin/bash",
            "-c",
            f"mkdir -p {VERIFIER_OUT}/logs/verifier && exec bash {VERIFIER_IN}/tests/test.sh",
        ]
        rc, log, outputs = await self._judge(sandbox, argv, _under("tests/", tests))
        for name in ("logs/verifier/reward.json", "logs/verifier/reward.txt"):
            raw = outputs.get(name, b"")
            if raw.strip():
                return parse_reward(raw, log)
        raise VerifierError(f"test.sh (exit {rc}) wrote no reward file: {log[-1500:]}")

    async def _python(self, sandbox: Any) -> Verdict:
        argv = [
            self.python,
            "-I",
            "-m",
            "openforgerl.envs.claw.verify.pygrade",
            "--grade",
            f"{VERIFIER_IN}/tests/grade.py",
            "--workspace",
            "/workdir",
            "--out",
            f"{VERIFIER_OUT}/reward.json",
        ]
        inputs = _under("tests/", read_tree(self.task.root / "tests"))
        messages = await self.host.messages(sandbox) if self.host is not None else None
        if messages is not None:  # built on the host from the call log, never by the agent
            inputs["host/transcript.json"] = transcript_json(messages, events=True)
            argv += ["--transcript", f"{VERIFIER_IN}/host/transcript.json"]
        rc, log, outputs = await self._judge(sandbox, argv, inputs)
        if rc != 0 or "reward.json" not in outputs:
            raise VerifierError(f"grade.py failed (exit {rc}): {log[-1500:]}")
        verdict = parse_reward(outputs["reward.json"], log)
        spec_file = self.task.root / "tests" / "judge.json"
        return (
            await self._hybrid(verdict, json.loads(spec_file.read_text()), messages)
            if spec_file.is_file()
            else verdict
        )

    async def _hybrid(
        self, auto: Verdict, spec: dict[str, Any], messages: list[dict[str, Any]] | None
    ) -> Verdict:
        """QwenClawBench `llm_judge` / `hybrid`: the host-side judge, combined as upstream does."""
        if self.host is None:
            raise VerifierError("the task is judged by an LLM: run it through `eval --judge-engine URL`")
        try:
            llm = await self.host.qwenclawbench_score(spec, openclaw_events(messages or []))
        except JudgeError as exc:
            decided = (
                None
                if spec.get("grading_type") == "llm_judge"
                else hybrid_without_judge(auto.reward, spec.get("weights"))
            )
            if decided is None:  # the judge's answer could change the score: no score without it
                raise VerifierError(f"llm judge: {exc}") from exc
            return Verdict(
                decided,
                {**dict(auto.components), "automated": auto.reward, "reward": decided},
                f"{auto.log}automated={auto.reward:.3f} score={decided:.3f} (the judge failed, "
                f"and no answer of it could change this score: {exc})\n",
            )
        if spec.get("grading_type") == "llm_judge":
            score, simple = llm, llm
        else:
            score, simple = combine_hybrid(auto.reward, llm, spec.get("weights"))
        parts = {
            **dict(auto.components),
            "automated": auto.reward,
            "llm_judge": llm,
            "score_simple": simple,
            "reward": score,
        }
        return Verdict(
            score,
            parts,
            f"{auto.log}automated={auto.reward:.3f} llm_judge={llm:.3f} "
            f"score={score:.3f} (simple {simple:.3f})\n",
        )

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


def _check(task: Task) -> None:
    check_verifier_file(task)


HARBOR = register_family(
    TaskFamily("harbor", HarborTaskRuntime, verifiers=("script", "pytest", "python"), check=_check)
)
