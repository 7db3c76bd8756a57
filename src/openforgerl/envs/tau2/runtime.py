"""`Tau2TaskRuntime`: an imported tau2 task folder (`source = "tau2"`) as the orchestrator's `TaskRuntime`.

Task folder (written by `envs/tau2/importer.py`): `instruction.md` (the domain policy; never the user's
scenario), `tests/tau2_task.json` (the upstream task: gold actions and criteria),
`tests/user_agent.json` (the persona for the simulated user), `solution/actions.json` (the gold agent
actions, for the scripted oracles), the domain in the tag `tau2:<domain>`.

Per rollout, the harness's prompt (`rollout_instruction`): the policy, then the customer's opening message,
which the host's user relay has the user engine write at rollout start (upstream: the agent greets, the
user opens); the scenario behind it stays on the host.

Per rollout, inside the sandbox:
- `/workdir/.tau2/config.json` (domain, whether `ask_user` is offered) and `/workdir/.tau2/tools.json`
  (the agent's tool schemas): nothing of the gold, the criteria or the initial state (telecom's planted
  fault), which the service gets in its argv;
- the service (`service_argv`, envs/tau2/service.py) on 127.0.0.1:`port` with upstream's environment;
  `zero` posts to it directly (`tool_service_url`), MCP-capable CLIs through `env/mcp_server.py`;
- a secret token per runtime, in the service's and the verifier's argv only (as the GUI runtime's); it
  also opens the service's user-side route (telecom's phone), which the host's user relay and the
  oracle reach through `envs/tau2/user_side.py` (`user_call`), the token on stdin.
After the harness: `envs/tau2/verify.py` in a fresh sandbox (`run_verifier`) with the upstream task
as its input, reading the call log with the token and, for the communicate check, the transcript made
on the host from the gateway's call log. A task with NL assertions is then judged on the host by
`--judge-engine` (upstream's NL-assertion prompt, `env/judge.py`), its score multiplied in. The installed tau2
package's own task files (the gold of every task) are masked inside every sandbox
(`sandbox/bwrap.py` `MASKED_FOREIGN`).
"""

from __future__ import annotations

import json
import secrets
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from openforgerl.env.contract import McpServer, TaskDefaults, Verdict, VerifierError
from openforgerl.env.tool_client import URL_ENV
from openforgerl.sandbox.verifier import VERIFIER_IN, VERIFIER_OUT, run_verifier
from openforgerl.tasks.format import Task
from openforgerl.tasks.verdicts import verdict_of

__all__ = ["TAU2_PORT", "Tau2TaskRuntime", "conversation_text", "domain_of", "with_opening"]

TAU2_PORT = 7727
INSIDE = "/workdir"
DIR = ".tau2"
ORACLE_TIMEOUT_S = 120.0
USER_CALL_TIMEOUT_S = 60.0


def domain_of(task: Task) -> str:
    """The tau2 domain from the importer's `tau2:<domain>` tag ("" when none)."""
    return next((t.split(":", 1)[1] for t in task.meta.tags if t.startswith("tau2:")), "")


def with_opening(policy: str, opening: str) -> str:
    """The policy, then the dialogue so far as upstream's agent has it: its
    greeting and the customer's reply."""
    from openforgerl.env.user_sim import GREETING

    return (
        f"{policy.strip()}\n\n## The conversation\n\nYou: {GREETING}\n\nCustomer: {opening.strip()}\n\n"
        "Talk to the customer with the `ask_user` tool."
    )


def conversation_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The dialogue as upstream's NL-assertion judge reads it: one `role: content` line per message (the
    policy's system prompt left out), the agent's tool calls written out, since its `ask_user` calls are
    what it said to the customer and their results what the customer answered."""
    lines = []
    for m in messages:
        if m.get("role") == "system":
            continue
        content = m.get("content")
        text = (
            content
            if isinstance(content, str)
            else " ".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))
        )
        calls = [
            f"{(c.get('function') or {}).get('name')}({(c.get('function') or {}).get('arguments')})"
            for c in m.get("tool_calls") or []
            if isinstance(c, dict)
        ]
        lines.append(f"{m.get('role')}: {' '.join([text, *calls]).strip()}")
    return "\n".join(lines)


class Tau2TaskRuntime(TaskDefaults):
    """One tau2 task (the token is per runtime, never shown to the agent; no per-rollout state)."""

    def __init__(self, task: Task, *, port: int = TAU2_PORT, python: str | None = None, **_: Any) -> None:
        self.task = task
        self.task_id, self.instruction, self.budget_s = task.task_id, task.instruction, task.budget_s
        self.domain = domain_of(task)
        if not task.meta.unsupported:  # a runnable task: fail now, in one line, when tau2 is gone
            from openforgerl.envs.tau2 import upstream

            upstream.constructor(self.domain)
        self.port = port
        self.tool_service_url = f"http://127.0.0.1:{port}"
        self.python = python or sys.executable
        self.token = secrets.token_hex(16)
        self.upstream_task: dict[str, Any] = json.loads((task.root / "tests" / "tau2_task.json").read_text())
        self.metadata: dict[str, Any] = {
            "split": task.meta.split,
            "difficulty": task.meta.difficulty,
            "services": [f"tau2:{self.domain}"],
            "tags": list(task.meta.tags),
        }
        self.service_ready_s = 0.0
        self.host: Any = None  # envs.host_side.HostSide, attached by `eval` (transcript, user relay)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def with_user(self) -> bool:
        """`ask_user` is offered when a user relay is attached (eval's `--user-engine`)."""
        return self.host is not None and getattr(self.host, "users", None) is not None

    async def rollout_instruction(self, sandbox: Any) -> str:
        """The harness's prompt for one rollout: the policy, then the customer's opening message (the user
        engine's reply to upstream's greeting, recorded by the relay). Without a user relay there is no
        customer, and the prompt is the policy alone."""
        from openforgerl.tasks.host_side import rollout_id_of

        rid = rollout_id_of(sandbox)
        if not self.with_user or rid is None:
            return self.instruction
        opening = await self.host.users.open(rid, self.task_id, sandbox)
        return with_opening(self.instruction, opening)

    def function_tools(self) -> Sequence[Mapping[str, Any]]:
        from openforgerl.env.world_tools import get_tool
        from openforgerl.envs.tau2 import upstream

        ask = get_tool("ask_user")
        extra = [ask.openai_tool()] if self.with_user and ask is not None else []
        return [*upstream.tool_schemas(self.domain), *extra]

    def files(self) -> Mapping[str, bytes]:
        config = {"domain": self.domain, "user": self.with_user}  # the initial state goes in the argv
        return {
            f"{DIR}/config.json": json.dumps(config).encode(),
            f"{DIR}/tools.json": json.dumps(list(self.function_tools())).encode(),
        }

    def service_argv(self, workdir: str = INSIDE) -> Sequence[str]:
        initial = self.upstream_task.get("initial_state")
        return [
            self.python,
            "-I",
            "-m",
            "openforgerl.envs.tau2.service",
            "--config",
            f"{workdir}/{DIR}/config.json",
            "--workspace",
            workdir,
            "--token",
            self.token,
            "--port",
            str(self.port),
            *(["--initial-state", json.dumps(initial)] if initial else []),
        ]

    def mcp_servers(self) -> Sequence[McpServer]:
        args = ["-m", "openforgerl.env.mcp_server", "--tools", f"{INSIDE}/{DIR}/tools.json"]
        return [McpServer("tau2", self.python, args, {URL_ENV: self.url})]

    def cli_program(self) -> str:
        """The shell command of one tool call (`envs/tau2/cli.py`): `<program> TOOL 'JSON'`; the service URL
        comes from the environment the harness runs in, so it is set on the command line too."""
        return f"{URL_ENV}={self.url} {self.python} -m openforgerl.envs.tau2.cli"

    def shell_line(self, tool: str, args: Mapping[str, Any]) -> str:
        """One tool call as a shell command line (the scripted oracle's path in shell-only harnesses)."""
        return f"{self.cli_program()} {shlex.quote(tool)} {shlex.quote(json.dumps(dict(args)))}"

    def shell_tools_hint(self) -> str:
        names = [str(s["function"]["name"]) for s in self.function_tools()]
        return (
            f"The {self.domain} tools run from the shell as `{self.cli_program()} TOOL 'JSON arguments'` "
            f"(it prints the reply as JSON; exit 1 on an error). Tools: {', '.join(names)}."
        )

    async def verify(self, sandbox: Any) -> Verdict:
        from openforgerl.envs.tau2 import upstream

        assertions = upstream.nl_assertions(self.upstream_task)
        inputs = {"tests/tau2_task.json": json.dumps(self.upstream_task).encode()}
        argv = [
            self.python,
            "-I",
            "-m",
            "openforgerl.envs.tau2.verify",
            "--task",
            f"{VERIFIER_IN}/tests/tau2_task.json",
            "--domain",
            self.domain,
            "--url",
            self.url,
            "--token",
            self.token,
            "--out",
            f"{VERIFIER_OUT}/reward.json",
            *(["--nl-on-host"] if assertions else []),
        ]
        messages = await self.host.messages(sandbox) if self.host is not None else None
        argv += self._transcript(messages, inputs)
        run = await run_verifier(
            sandbox, argv, inputs=inputs, timeout_s=self.task.config.verifier.timeout_sec or 120.0
        )
        verdict = verdict_of(run)
        return await self._nl_judged(verdict, assertions, messages or []) if assertions else verdict

    def _transcript(self, messages: list[dict[str, Any]] | None, inputs: dict[str, bytes]) -> list[str]:
        """The host's transcript as a verifier input; a communicate check
        without one would be a wrong zero."""
        from openforgerl.tasks.host_side import transcript_json

        if messages is None:
            if "transcript" in self.task.meta.needs:
                raise VerifierError(
                    "the communicate check and NL assertions need the transcript (run through `eval`)"
                )
            return []
        inputs["host/transcript.json"] = transcript_json(messages)
        return ["--transcript", f"{VERIFIER_IN}/host/transcript.json"]

    async def _nl_judged(
        self, verdict: Verdict, assertions: list[str], messages: list[dict[str, Any]]
    ) -> Verdict:
        """The verifier's product times the host judge's NL-assertion score (upstream's all-or-nothing).
        When the other parts already score 0 the product is 0 whatever the judge says: it is not asked."""
        from openforgerl.env.judge import JudgeError, nl_assertions_parser, tau2_nl_prompt

        if verdict.reward == 0.0:
            return Verdict(
                0.0,
                {**dict(verdict.components), "reward": 0.0},
                f"{verdict.log}NL assertions not judged: the other parts already score 0\n",
            )
        judge = getattr(self.host, "judge", None)
        if judge is None:
            raise VerifierError(
                "the task's NL assertions are judged by an LLM: run it through `eval --judge-engine URL`"
            )
        system, user = tau2_nl_prompt(conversation_text(messages), assertions)
        try:
            nl, reply = await judge.judge(system, user, parse=nl_assertions_parser(assertions))
        except JudgeError as exc:  # the judge's answer decides the score: no score without it
            raise VerifierError(f"NL assertion judge: {exc}") from exc
        total = verdict.reward * nl
        return Verdict(
            total,
            {**dict(verdict.components), "nl_assertion": nl, "reward": total},
            f"{verdict.log}nl_assertion={nl:.0f} ({reply[:300]})\n",
        )

    def gold_actions(self) -> list[dict[str, Any]]:
        """Upstream's gold actions in their order, each with its requestor (telecom's include the user's)."""
        criteria = self.upstream_task.get("evaluation_criteria") or {}
        return [
            {
                "tool": str(a["name"]),
                "args": dict(a.get("arguments") or {}),
                "requestor": str(a.get("requestor") or "assistant"),
            }
            for a in criteria.get("actions") or []
        ]

    async def run_oracle(self, sandbox: Any) -> str:
        """Replay the gold actions (validation only): the agent's through its tool route, the user's through
        the host-only user route (the token on stdin, never in an argv or file); "" on success."""
        if not (self.task.root / "solution" / "actions.json").is_file():
            return "no solution/actions.json"
        await sandbox.write_file("/tmp/tau2-gold.json", json.dumps(self.gold_actions()).encode())
        argv = [
            self.python,
            "-I",
            "-m",
            "openforgerl.envs.tau2.oracle",
            "--actions",
            "/tmp/tau2-gold.json",
            "--url",
            self.url,
            "--token-stdin",
        ]
        res = await sandbox.exec(argv, timeout_s=ORACLE_TIMEOUT_S, stdin=self.token.encode())
        if res.returncode != 0:
            return f"oracle exited {res.returncode}: {res.stderr.decode(errors='replace')[-800:]}"
        return ""

    # ---- the simulated user's side (telecom): host only
    def user_tools(self) -> Sequence[Mapping[str, Any]]:
        """The user's own tools as function tools for the user engine ([] for a domain without them)."""
        from openforgerl.envs.tau2 import upstream

        return list(upstream.user_tool_schemas(self.domain))

    async def user_call(self, sandbox: Any, tool: str, args: Mapping[str, Any]) -> tuple[int, Any]:
        """One user-side tool call on this rollout's service, through `envs/tau2/user_side.py` run in the
        sandbox by the host (the token on stdin): (HTTP status, reply)."""
        request = json.dumps({"token": self.token, "calls": [{"tool": tool, "args": dict(args)}]}).encode()
        argv = [self.python, "-I", "-m", "openforgerl.envs.tau2.user_side", "--url", self.url]
        res = await sandbox.exec(argv, timeout_s=USER_CALL_TIMEOUT_S, stdin=request)
        if res.returncode != 0:
            raise RuntimeError(
                f"user-side call exited {res.returncode}: {res.stderr.decode(errors='replace')[-300:]}"
            )
        [reply] = json.loads(res.stdout)
        return int(reply["status"]), reply["body"]
