"""What the orchestrator needs from a task (the envs package implements it).

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

Error contract (STYLE.md habit 4, decided by type, never by string):

- ``verify`` returns a ``Verdict`` when it could judge the work, *including* when the work is wrong
  (reward 0.0 is an agent failure, i.e. data).
- ``verify`` raises ``VerifierError`` (or anything else) when the verifier itself broke (crashed,
  could not run its checker, malformed output). The orchestrator re-types every exception escaping
  ``verify`` as infra ``verifier`` — so a buggy verifier never produces a trained zero.

Everything in ``sandbox`` is accessed with paths *inside* the sandbox (``/workdir/...``); see
``openforgerl.sandbox.base.Sandbox`` (``exec``, ``read_file``, ``write_file``).

Optional attributes (read with ``getattr`` and a default, so a minimal task need not define them):

- ``image: str | None`` — container image for podman/kubernetes backends (local ignores it: its root
  is an allow-list of read-only binds, ``openforgerl.sandbox.bwrap.SYSTEM_RO_BINDS``).
- ``limits: openforgerl.sandbox.base.Limits | None`` — CPU/memory/pids for the sandbox.
- ``service_ready_s: float`` — how long to wait after starting the service (default 0.0;
  a task that needs a port open should instead make its service start fast, or poll in its harness).
- ``metadata: dict`` — copied into ``RolloutRecord.metadata``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from openforgerl.harness.base import McpServer
from openforgerl.sandbox.base import Sandbox

__all__ = ["TaskDefaults", "TaskRuntime", "Verdict", "VerifierError"]


class VerifierError(Exception):
    """The verifier itself failed (crash, missing checker, bad output): an infra fault, not a 0 reward."""


class Verdict(NamedTuple):
    """A verifier's judgement. A plain ``(reward, components, log)`` tuple is accepted too."""

    reward: float
    components: Mapping[str, float]
    log: str


@runtime_checkable
class TaskRuntime(Protocol):
    """One task, ready to run in a sandbox. Implemented by ``openforgerl.envs``.

    Must be cheap to call repeatedly: a GRPO group calls ``files()`` etc. once per rollout, and
    retries after infra faults call them again. Must not keep per-rollout state on ``self``
    (rollouts of one task run concurrently).
    """

    task_id: str
    """Stable id; goes into ``RolloutRecord.task_id`` and groups rollouts for GRPO."""

    instruction: str
    """The prompt given to the harness (``HarnessContext.instruction``)."""

    budget_s: float
    """Wall-clock budget of the harness run. Past it the whole process tree is killed -> ``timeout``."""

    def files(self) -> Mapping[str, bytes]:
        """Files to write under ``/workdir`` before the harness starts; keys are relative paths."""
        ...

    def service_argv(self) -> Sequence[str] | None:
        """argv of a background service started in the sandbox before the harness (or None)."""
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

    async def verify(self, sandbox: Sandbox) -> Verdict | tuple[float, Mapping[str, float], str]:
        """Judge the final state of ``sandbox``; raise ``VerifierError`` if the verifier broke."""
        ...


class TaskDefaults:
    """The members of a `TaskRuntime` most tasks leave empty, with those empty answers: subclass it and
    write only `task_id`, `instruction`, `budget_s`, `verify` and what the task really has (a task with
    no files, service or tools needs nothing else)."""

    def files(self) -> Mapping[str, bytes]:
        return {}

    def service_argv(self) -> Sequence[str] | None:
        return None

    def mcp_servers(self) -> Sequence[McpServer]:
        return ()

    def function_tools(self) -> Sequence[Mapping[str, Any]]:
        return ()

    def shell_tools_hint(self) -> str:
        return ""
