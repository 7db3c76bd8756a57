"""What the orchestrator needs from a task: a `TaskSpec` or an environment's runtime (`openforgerl.envs`).

The orchestrator never looks inside a task. For one rollout it asks the task for:

1. the files to lay out in ``/workdir`` (``files()``),
2. an optional background service to start in the sandbox (``service_argv()``), e.g. the task's
   MCP/HTTP server or a database; it runs in the same network namespace, so the harness reaches it on
   127.0.0.1 and the orchestrator kills it at sandbox close,
3. the tool surface to hand to the harness (``mcp_servers()``, ``function_tools()``,
   ``shell_tools_hint()``), which goes verbatim into ``HarnessContext``,
4. after the harness exits within its budget, a verdict from ``verify(sandbox)``. It is *not* called
   when the budget ran out (timeout: dropped or scored 0 by policy) or when the rollout is already
   infra-tainted (an engine fault seen in the call log) — no point judging work that will be dropped.

Error contract (decided by type, never by string):

- ``verify`` returns a ``Verdict`` when it could judge the work, *including* when the work is wrong
  (reward 0.0 is an agent failure, i.e. data).
- ``verify`` raises ``VerifierError`` (or anything else) when the verifier itself broke (crashed,
  could not run its checker, malformed output). The orchestrator re-types every exception escaping
  ``verify`` as infra ``verifier`` — so a buggy verifier never produces a trained zero.

Everything in ``sandbox`` is accessed with paths *inside* the sandbox (``/workdir/...``); see
``openforgerl.sandbox.base.Sandbox`` (``exec``, ``read_file``, ``write_file``).

Besides those, every runtime answers (the orchestrator reads them directly; `TaskSpec` and `TaskDefaults`
give the defaults, so a minimal task writes none of them):

- ``image: str | None`` — container image for podman/kubernetes backends (local ignores it: its root
  is an allow-list of read-only binds, ``openforgerl.sandbox.bwrap.SYSTEM_RO_BINDS``).
- ``limits: openforgerl.sandbox.base.Limits | None`` — CPU/memory/pids for the sandbox (None: the run's).
- ``service_ready_s: float`` — how long to wait after starting the service (default 0.0;
  a task that needs a port open should instead make its service start fast, or poll in its harness).
  A service that must be ready *before the agent runs* (it reads material the agent could rewrite)
  says so in ``service_started(sandbox)``, which the boot awaits.
- ``metadata: Mapping`` — copied into ``RolloutRecord.metadata``.
- ``tool_service_url: str`` — where a direct-tool harness posts tool calls ("" when none).

Two ways to write one: ``TaskSpec(task_id, instruction, verify, files=...)`` (a frozen spec: data plus a
verify callable), or a class that subclasses ``TaskDefaults`` when its members are computed (the
environment runtimes in ``openforgerl.envs``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol, runtime_checkable

from openforgerl.sandbox.base import Limits, Sandbox

__all__ = [
    "SERVICE_ENV",
    "McpServer",
    "TaskDefaults",
    "TaskRuntime",
    "TaskSpec",
    "Verdict",
    "Verifier",
    "VerifierError",
]

# The environment a task's service starts with. It starts in /workdir before the agent and answers the
# agent's tool calls and the verifier; Python puts the cwd first on `sys.path` for `-c` and `-m` (and
# reads the user site under HOME=/workdir), so a lazy import in a service started without `-I` would run
# a module the agent planted, inside the process the verifier trusts. These close that for any Python
# service, however its argv is written; other variables reach it as before.
SERVICE_ENV: Mapping[str, str] = MappingProxyType({"PYTHONSAFEPATH": "1", "PYTHONNOUSERSITE": "1"})


@dataclass(frozen=True)
class McpServer:
    """A stdio MCP server the harness loads: the task's tools, handed to the harness unchanged."""

    name: str
    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)


class VerifierError(Exception):
    """The verifier itself failed (crash, missing checker, bad output): an infra fault, not a 0 reward."""


class Verdict(NamedTuple):
    """A verifier's judgement. A plain ``(reward, components, log)`` tuple is accepted too."""

    reward: float
    components: Mapping[str, float]
    log: str


@runtime_checkable
class TaskRuntime(Protocol):
    """One task, ready to run in a sandbox: a ``TaskSpec``, or an environment's
    runtime (``openforgerl.envs``).

    Must be cheap to call repeatedly: a GRPO group calls ``files()`` etc. once per rollout, and
    retries after infra faults call them again. Must not keep per-rollout state on ``self``
    (rollouts of one task run concurrently).
    """

    task_id: str
    """Stable id; goes into ``RolloutRecord.task_id`` and groups rollouts for GRPO."""

    instruction: str
    """The prompt given to the harness (``HarnessContext.instruction``), unless ``rollout_instruction``
    makes one for the rollout."""

    budget_s: float
    """Wall-clock budget of the harness run. Past it the whole process tree is killed -> ``timeout``."""

    @property
    def image(self) -> str | None: ...

    @property
    def limits(self) -> Limits | None: ...

    @property
    def service_ready_s(self) -> float: ...

    @property
    def metadata(self) -> Mapping[str, Any]: ...

    @property
    def tool_service_url(self) -> str: ...

    def files(self) -> Mapping[str, bytes]:
        """Files to write under ``/workdir`` before the harness starts; keys are relative paths."""
        ...

    def service_argv(self) -> Sequence[str] | None:
        """argv of a background service started in the sandbox before the harness (or None), with
        ``SERVICE_ENV`` in its environment."""
        ...

    def mcp_servers(self) -> Sequence[McpServer]:
        """stdio MCP servers the harness should load (commands are run *inside* the sandbox)."""
        ...

    def function_tools(self) -> Sequence[Mapping[str, Any]]:
        """OpenAI function-tool schemas, for harnesses that take tools directly."""
        ...

    def shell_tools_hint(self) -> str:
        """How to use the task's tools from a shell, for shell-only harnesses ("" when none)."""
        ...

    def user_tools(self) -> Sequence[Mapping[str, Any]]:
        """OpenAI function-tool schemas of the *simulated user's* own tools (tau2 telecom: the customer's
        phone), for the user engine on the host; never handed to the harness. Empty for most tasks: the
        user then answers from its persona alone."""
        ...

    async def service_started(self, sandbox: Sandbox) -> None:
        """Return once the service of ``service_argv`` is ready for the harness; the boot awaits it, so
        the agent starts only after. A service that reads files the agent could rewrite (the sandbox's
        ``/workdir``) must have read them by then. Default: at once. Raising is a sandbox fault: the
        agent has not run yet."""
        ...

    async def rollout_instruction(self, sandbox: Sandbox) -> str | None:
        """This rollout's prompt, asked after the boot and before the budget starts, or None for
        ``instruction`` (tau2: the policy, then the simulated user's opening message, written by the user
        engine on the host). A failure here is an engine fault, never the agent's."""
        ...

    async def verify(self, sandbox: Sandbox) -> Verdict | tuple[float, Mapping[str, float], str]:
        """Judge the final state of ``sandbox``; raise ``VerifierError`` if the verifier broke."""
        ...


Verifier = Callable[[Sandbox], Awaitable[Verdict | tuple[float, Mapping[str, float], str]]]
"""Judges the final state of a sandbox (the ``verify`` contract above)."""

_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _no_files() -> Mapping[str, bytes]:
    return _EMPTY


def _no_service() -> Sequence[str] | None:
    return None


def _no_mcp_servers() -> Sequence[McpServer]:
    return ()


def _no_function_tools() -> Sequence[Mapping[str, Any]]:
    return ()


def _no_hint() -> str:
    return ""


async def _static_instruction(sandbox: Any) -> str | None:
    return None


async def _started_at_once(sandbox: Any) -> None:
    return None


@dataclass(frozen=True)
class TaskSpec:
    """A `TaskRuntime` as data: what a task has, with empty defaults, plus its `verify` callable.

    The tool surface is given as zero-argument callables (``files=lambda: {...}``), called per rollout as
    the protocol's methods are, so a spec can read its files lazily."""

    task_id: str
    instruction: str
    verify: Verifier
    budget_s: float = 300.0
    files: Callable[[], Mapping[str, bytes]] = _no_files
    service_argv: Callable[[], Sequence[str] | None] = _no_service
    mcp_servers: Callable[[], Sequence[McpServer]] = _no_mcp_servers
    function_tools: Callable[[], Sequence[Mapping[str, Any]]] = _no_function_tools
    shell_tools_hint: Callable[[], str] = _no_hint
    user_tools: Callable[[], Sequence[Mapping[str, Any]]] = _no_function_tools
    rollout_instruction: Callable[[Any], Awaitable[str | None]] = _static_instruction
    service_started: Callable[[Any], Awaitable[None]] = _started_at_once
    image: str | None = None
    limits: Limits | None = None
    service_ready_s: float = 0.0
    metadata: Mapping[str, Any] = field(default_factory=dict)
    tool_service_url: str = ""


class TaskDefaults:
    """The members of a `TaskRuntime` most tasks leave empty, with those empty answers (the same as
    `TaskSpec`'s), for runtimes written as classes: subclass it and write only `task_id`, `instruction`,
    `budget_s`, `verify` and what the task really has."""

    image: str | None = None
    limits: Limits | None = None
    service_ready_s: float = 0.0
    metadata: Mapping[str, Any] = _EMPTY
    tool_service_url: str = ""
    max_turns: int | None = None  # the task's own turn cap (HarnessContext.max_turns)

    def files(self) -> Mapping[str, bytes]:
        return _no_files()

    def service_argv(self) -> Sequence[str] | None:
        return _no_service()

    def mcp_servers(self) -> Sequence[McpServer]:
        return _no_mcp_servers()

    def function_tools(self) -> Sequence[Mapping[str, Any]]:
        return _no_function_tools()

    def shell_tools_hint(self) -> str:
        return _no_hint()

    def user_tools(self) -> Sequence[Mapping[str, Any]]:
        return _no_function_tools()

    async def rollout_instruction(self, sandbox: Any) -> str | None:
        return None

    async def service_started(self, sandbox: Any) -> None:
        return None
