"""`ClawTaskRuntime`: a loaded task folder as the orchestrator's `TaskRuntime`.

Inside the sandbox (paths are inside paths):
- `/workdir/<workspace files>` from `environment/workspace/`;
- `/workdir/.claw/fixtures/*.json` + `/workdir/.claw/config.json` (exposed tools, faults), read by the
  service process `python -m openforgerl.envs.claw.services` on 127.0.0.1:`port` (its own netns per sandbox);
- the harness reaches the tools via the stdio MCP server, the shell CLI or function tools;
- after the harness (its whole process tree gone): the verifier runs in a fresh sandbox
  (`sandbox.verifier.run_verifier`) with `/workdir` read-only, `tests/` at `/verifier/in/tests/`
  (never in the agent's workdir: the task's tests are never visible to the harness), its output in
  `/verifier/out/`, as `python -I -m openforgerl.envs.claw.verify` (isolated: no cwd, PYTHONPATH or user
  site on `sys.path`, so a planted `/workdir/openforgerl/...` cannot shadow it).

An imported Claw-Eval task may also carry upstream's own mock services (`environment/upstream/`, laid out
at `/workdir/.claw/upstream/`): the service loads them in its process (`services/upstream.py`) and offers
their declared endpoints as tools (function tools, MCP through `env/mcp_server.py` with the task's schemas in
`/workdir/.claw/tools.json`, and `envs/tau2/cli.py` for shell harnesses: both only forward `/call/<tool>`).
Their /audit is read by the verifier only, with a per-runtime token in the service's and the verifier's argv.

A task grader that calls the LLM judge (imported Claw-Eval `grader.py`) makes the verifier exit 4 with
its judge calls in `judge_requests.json`; the host answers them with `--judge-engine` and runs the
verifier again with the answers (`host/judge_answers.json`), at most `JUDGE_ROUNDS` times. No judge
engine, a judge failure or a grader that keeps asking is a `VerifierError` (infra), never a score.

An imported Claw-Eval task whose grader reads an `env_snapshot` (`tests/claw_eval/env_snapshot.json`) has it
taken before the verifier runs, on a copy of the final workdir (`envs/claw/snapshot.py`): upstream's
grader-only files pushed into the copy, its commands run there in a fresh sandbox without network, its
files read on the host with the link-refusing readers; the dict reaches the verifier as
`host/env_snapshot.json`. The agent never sees the grader's files; failing to take it is infra.

Outcomes: reward.json -> Verdict; exit 3 (what the agent left broke the rules) -> `TamperError`
(reward 0, `agent_failed`); any other failure, timeout or kill of the verifier -> `VerifierError`
(infra: it ran trusted code on bounded, non-blocking input).
"""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from openforgerl.env.contract import McpServer, TaskDefaults, Verdict, VerifierError
from openforgerl.env.tool_client import DEFAULT_PORT, URL_ENV
from openforgerl.env.world_tools import SERVICES, function_tools, get_tool, offered_tools, tools_for
from openforgerl.envs.claw.cli import usage_lines
from openforgerl.envs.claw.snapshot import SNAPSHOT_INPUT, SnapshotSpec, collect_env_snapshot, held_images
from openforgerl.envs.claw.verify.run import EXIT_NEEDS_JUDGE, JUDGE_REQUESTS
from openforgerl.sandbox.base import VerifierRun
from openforgerl.sandbox.verifier import VERIFIER_IN, VERIFIER_OUT, run_verifier
from openforgerl.tasks.format import Task, check_verifier_file, read_tree, validate_model
from openforgerl.tasks.verdicts import verdict_of

if TYPE_CHECKING:
    from openforgerl.tasks.host_side import HostSide

__all__ = ["ClawTaskRuntime", "check_checks_file", "check_claw_task", "claw_tool_names"]

CLAW_DIR = ".claw"
INSIDE = "/workdir"
JUDGE_ROUNDS = 3  # a grader whose later judge calls depend on earlier scores asks again; more is a loop
MAX_JUDGE_REQUESTS = 64  # per verifier run: a bound on what one rollout can cost the judge


class _ClawFault(BaseModel):
    model_config = ConfigDict(extra="allow")
    tool: str

    @field_validator("tool")
    @classmethod
    def _known_tool(cls, v: str) -> str:
        if get_tool(v) is None:
            raise ValueError(f"unknown tool {v!r}")
        return v


class _ClawNames(BaseModel):
    """What a Claw task's `[metadata.openforgerl]` may name: services and tools of `env.world_tools.TOOLS`."""

    model_config = ConfigDict(extra="ignore")
    services: list[str] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    faults: list[_ClawFault] = Field(default_factory=list)

    @field_validator("services")
    @classmethod
    def _known_services(cls, v: list[str]) -> list[str]:
        bad = [s for s in v if s not in SERVICES]
        if bad:
            raise ValueError(f"unknown service(s) {bad}; known: {', '.join(SERVICES)}")
        return v

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, v: list[str]) -> list[str]:
        bad = [t for t in v if get_tool(t) is None]
        if bad:
            raise ValueError(f"unknown tool(s) {bad}")
        return v


def check_checks_file(task: Task) -> None:
    """The task's verifier file exists, and a `checks` one (tests/checks.toml) is a valid
    spec (`env/checks/spec.py`)."""
    from openforgerl.env.checks.spec import load_spec

    path = check_verifier_file(task)
    if task.meta.verifier == "checks":
        load_spec(path)


def check_claw_task(task: Task) -> None:
    """The family's load-time check: the services, tools and faults it names exist, and its checks load."""
    validate_model(_ClawNames, task.meta.model_dump(), task.root / "task.toml", "metadata.openforgerl")
    check_checks_file(task)


def claw_tool_names(task: Task) -> list[str]:
    """The tools a task exposes: `tools` if given, else every tool of its services plus files and answer."""
    return offered_tools(task.meta.tools, task.meta.services)


class ClawTaskRuntime(TaskDefaults):
    """One Claw task (verifier = checks); stateless across rollouts, so safe to share."""

    def __init__(self, task: Task, *, port: int = DEFAULT_PORT, python: str | None = None) -> None:
        self.task = task
        self.task_id = task.task_id
        self.instruction = task.instruction
        self.budget_s = task.budget_s
        self.max_turns = task.meta.max_turns  # Claw-Eval's own cap: the harness takes the lower
        self.port = port
        self.python = python or sys.executable
        self.metadata: dict[str, Any] = {
            "split": task.meta.split,
            "difficulty": task.meta.difficulty,
            "services": list(task.meta.services),
            "tags": list(task.meta.tags),
        }
        self.host: HostSide | None = None  # attached by `eval` (call log, judge, user relay)
        self.upstream = _upstream_schemas(task)  # function schemas of upstream-service tools ([]: none)
        self.token = secrets.token_hex(16) if self.upstream else ""  # reads the upstream services' audit
        # Where direct-tool harnesses (`zero`) POST `/tools/<name>` (HarnessContext.tool_service_url).
        self.tool_service_url = self.url

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def tools(self) -> list[str]:
        return claw_tool_names(self.task)

    def files(self) -> Mapping[str, bytes]:
        env = self.task.root / "environment"
        out = read_tree(env / "workspace")
        out |= read_tree(env / "fixtures", f"{CLAW_DIR}/fixtures/")
        config = {"tools": self.tools, "faults": [f.model_dump() for f in self.task.meta.faults]}
        out[f"{CLAW_DIR}/config.json"] = json.dumps(config, indent=1).encode()
        if self.upstream:
            out |= read_tree(env / "upstream", f"{CLAW_DIR}/upstream/")
            out[f"{CLAW_DIR}/tools.json"] = json.dumps(list(self.function_tools())).encode()
        return out

    def service_argv(self, workdir: str = INSIDE) -> Sequence[str]:
        claw = f"{workdir}/{CLAW_DIR}"
        # -I: the service runs with cwd /workdir; a lazy import must never come from the agent's files
        upstream = ["--upstream", f"{claw}/upstream", "--token", self.token] if self.upstream else []
        return [
            self.python,
            "-I",
            "-m",
            "openforgerl.envs.claw.services",
            "--fixtures",
            f"{claw}/fixtures",
            "--workspace",
            workdir,
            "--config",
            f"{claw}/config.json",
            "--port",
            str(self.port),
            *upstream,
        ]

    async def service_started(self, sandbox: Any) -> None:
        """With upstream's services: once the service answers, which it does only after it loaded their
        sources and fixtures from `/workdir/.claw/upstream/` (`services/server.py`: it listens first and
        serves after); then that folder is removed. The agent can write there, so the harness must not
        start before: a server file rewritten in the ~1 s that loading takes would run the agent's code in
        the service, beside the audit the verifier trusts. And upstream's agent never sees the fixture files
        (they stay on its host), only what the tools return: a fixture can hold fields no endpoint shows.
        Upstream's servers read them only at start and on `/reset`, which no one can reach."""
        if not self.upstream:
            return
        res = await sandbox.exec(
            [self.python, "-I", "-c", _WAIT_READY, f"{self.url}/healthz", str(SERVICE_LOAD_S)],
            timeout_s=SERVICE_LOAD_S + 10,
        )
        if res.returncode != 0:
            raise RuntimeError(
                f"the Claw service did not load upstream's services within {SERVICE_LOAD_S:.0f} s: "
                f"{res.stderr.decode(errors='replace')[-300:]}"
            )
        gone = await sandbox.exec(["rm", "-rf", "--", f"{INSIDE}/{CLAW_DIR}/upstream"], timeout_s=30)
        if gone.returncode != 0:
            raise RuntimeError(
                f"could not remove upstream's service files: {gone.stderr.decode(errors='replace')[-300:]}"
            )

    def mcp_servers(self) -> Sequence[McpServer]:
        if self.upstream:  # one server for ours and upstream's, from the schemas laid out in the workdir
            args = ["-m", "openforgerl.env.mcp_server", "--tools", f"{INSIDE}/{CLAW_DIR}/tools.json"]
        else:
            args = ["-m", "openforgerl.envs.claw.mcp_server", "--tools", ",".join(self.tools)]
        return [McpServer("claw", self.python, args, {URL_ENV: self.url})]

    def function_tools(self) -> Sequence[Mapping[str, Any]]:
        return [*(function_tools(tools_for(names=self.tools)) if self.tools else []), *self.upstream]

    def cli_program(self) -> str:
        """The shell CLI by absolute path next to the interpreter: a PATH lookup may find a wrapper
        (e.g. a pyenv shim) that needs the host's HOME, which the sandbox does not have."""
        script = Path(self.python).parent / "openforgerl-claw"
        return str(script) if script.is_file() else f"{self.python} -m openforgerl.envs.claw.cli"

    def shell_tools_hint(self) -> str:
        lines = usage_lines(tools_for(names=self.tools), self.cli_program())
        head = (
            "Use these shell commands to act on the user's mail, calendar, contacts, knowledge base, "
            "to-do list, notes and workspace files. Each prints JSON; on an error it exits non-zero "
            "(transient errors can be retried)."
        )
        return "\n".join([head, *lines, *self._upstream_hint()])

    def _upstream_hint(self) -> list[str]:
        if not self.upstream:
            return []
        program = f"{URL_ENV}={self.url} {self.python} -m openforgerl.envs.tau2.cli"
        lines = [
            f"More tools run as `{program} TOOL 'JSON arguments'` (it prints the reply as JSON; exit 1 on an "
            "error, which may be transient: retry). Tools:"
        ]
        for schema in self.upstream:
            fn = schema["function"]
            lines.append(
                f"  {fn['name']}: {fn['description']} Arguments (JSON schema): "
                f"{json.dumps(fn['parameters'], ensure_ascii=False)}"
            )
        return lines

    async def verify(self, sandbox: Any) -> Verdict:
        """Judge in a fresh sandbox that sees the workdir read-only (see the module docstring)."""
        inputs = read_tree(self.task.root / "tests", "tests/")
        argv = [
            self.python,
            "-I",
            "-m",
            "openforgerl.envs.claw.verify",
            "--checks",
            f"{VERIFIER_IN}/tests/checks.toml",
            "--state-url",
            self.url,
            "--workdir",
            INSIDE,
            "--out",
            f"{VERIFIER_OUT}/reward.json",
            "--log",
            f"{VERIFIER_OUT}/verifier.log",
            *(["--token", self.token] if self.token else []),
        ]
        snapshot, taken = SnapshotSpec.from_tests(self.task.root / "tests"), None
        if snapshot is not None:  # upstream Claw-Eval takes it right after the agent's loop, before grading
            taken = await collect_env_snapshot(sandbox, snapshot, str(Path(self.python).parent))
            inputs[SNAPSHOT_INPUT] = json.dumps(taken, ensure_ascii=False).encode()
            argv += ["--env-snapshot", f"{VERIFIER_IN}/{SNAPSHOT_INPUT}"]
        if self.host is not None:
            argv += await self._host_inputs(self.host, sandbox, inputs)
        answers: dict[str, float | str] = {}
        for _ in range(JUDGE_ROUNDS + 1):
            run = await run_verifier(
                sandbox,
                argv,
                inputs=inputs,
                outputs=("reward.json", "verifier.log", JUDGE_REQUESTS),
                timeout_s=self.task.config.verifier.timeout_sec or 120.0,
            )
            requests = _judge_requests(run)
            if requests is None:
                return verdict_of(run)
            answers |= await self._answer_grader_judge(requests, held_images(self.task.root / "tests", taken))
            inputs["host/judge_answers.json"] = json.dumps(answers).encode()
            if "--judge-answers" not in argv:
                argv += ["--judge-answers", f"{VERIFIER_IN}/host/judge_answers.json"]
        raise VerifierError(f"the task's grader still asked for new judge calls after {JUDGE_ROUNDS} rounds")

    async def _answer_grader_judge(
        self, requests: list[dict[str, Any]], images: Mapping[str, str]
    ) -> dict[str, float | str]:
        from openforgerl.env.judge import JudgeError

        if self.host is None or self.host.judge is None:
            raise VerifierError("the task's grader.py calls an LLM judge and no --judge-engine was given")
        try:
            return await self.host.claw_eval_grader_answers(requests, images)
        except JudgeError as exc:
            raise VerifierError(f"llm judge (grader.py): {exc}") from exc

    async def _host_inputs(self, host: HostSide, sandbox: Any, inputs: dict[str, bytes]) -> list[str]:
        """The transcript (from the call log) and the `llm_judge` scores (from the judge), both made on the
        host after the harness is gone, as verifier inputs; a judge failure is infra (`VerifierError`)."""
        from openforgerl.env.checks.spec import load_spec
        from openforgerl.env.judge import JudgeError
        from openforgerl.tasks.host_side import transcript_json

        messages = await host.messages(sandbox)
        extra: list[str] = []
        if messages is not None:
            inputs["host/transcript.json"] = transcript_json(messages)
            extra += ["--transcript", f"{VERIFIER_IN}/host/transcript.json"]
        if (
            self.task.root / "tests" / "claw_eval" / "grader.py"
        ).is_file():  # what upstream's runner also hands it
            media = await host.media_events(sandbox)
            if media is not None:
                inputs["host/media_events.json"] = json.dumps(media).encode()
                extra += ["--media-events", f"{VERIFIER_IN}/host/media_events.json"]
            if record := host.user_record(sandbox):  # the simulated user's side, as the host relayed it
                inputs["host/user_record.json"] = json.dumps(record, ensure_ascii=False).encode()
                extra += ["--user-record", f"{VERIFIER_IN}/host/user_record.json"]
        checks = load_spec(self.task.root / "tests" / "checks.toml").checks
        rubrics = {c.name: str(getattr(c, "rubric", "")) for c in checks if c.kind == "llm_judge"}
        if rubrics:
            try:
                scores = await host.claw_eval_scores(
                    self.task.instruction, rubrics, messages or [], host.user_record(sandbox)
                )
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


SERVICE_LOAD_S = 60.0  # upstream's apps load in ~1 s (FastAPI's import); a busy box is slower
# polls GET argv[1] until it answers 200, for at most argv[2] seconds (exit 1 then)
_WAIT_READY = """
import sys, time, urllib.request
end = time.monotonic() + float(sys.argv[2])
while True:
    try:
        with urllib.request.urlopen(sys.argv[1], timeout=5) as r:
            if r.status == 200:
                break
    except Exception as exc:
        if time.monotonic() > end:
            sys.exit(f"not ready: {exc}")
        time.sleep(0.05)
"""


def _upstream_schemas(task: Task) -> list[dict[str, Any]]:
    """Function schemas of the task's upstream-service tools (`environment/upstream/services.json`)."""
    from openforgerl.envs.claw.services.upstream import MANIFEST

    path = task.root / "environment" / "upstream" / MANIFEST
    if not path.is_file():
        return []
    tools = json.loads(path.read_text()).get("tools") or []
    return [
        {
            "type": "function",
            "function": {
                "name": str(t["name"]),
                "description": str(t.get("description") or ""),
                "parameters": t.get("input_schema") or {"type": "object"},
            },
        }
        for t in tools
    ]


def _judge_requests(run: VerifierRun) -> list[dict[str, Any]] | None:
    """The judge calls a verifier run is waiting for (None: it did not ask; it finished or failed)."""
    res = run.result
    if res.returncode != EXIT_NEEDS_JUDGE or res.timed_out:
        return None
    try:
        requests: object = json.loads(run.outputs.get(JUDGE_REQUESTS, b""))
    except ValueError as exc:
        raise VerifierError(f"verifier asked for the judge without a readable {JUDGE_REQUESTS}") from exc
    if not (
        isinstance(requests, list)
        and 0 < len(requests) <= MAX_JUDGE_REQUESTS
        and all(isinstance(r, dict) and isinstance(r.get("key"), str) for r in requests)
    ):
        raise VerifierError(f"verifier's {JUDGE_REQUESTS} is not 1..{MAX_JUDGE_REQUESTS} keyed requests")
    return requests
