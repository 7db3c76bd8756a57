"""The Claw environment: a personal-assistant world (mail, calendar, contacts, knowledge base, to-dos,
notes, workspace files: the SDK's `env.world`) served per rollout inside the sandbox, with three tool
surfaces generated from one registry (`env.world_tools.TOOLS`): the stdio MCP server, the shell CLI
(`openforgerl-claw`) and OpenAI function tools; a declarative verifier (`verify/`), the shipped suite
(`suite/`) and `ClawTaskRuntime`.

Importing this package registers the `claw` task family (verifier = "checks"); it stays import-light
because the service, the MCP server, the CLI and the verifier start inside every sandbox.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openforgerl.tasks.families import TaskFamily, register_family

if TYPE_CHECKING:
    from openforgerl.env.contract import TaskRuntime
    from openforgerl.tasks.schema import Task

__all__ = ["CLAW"]


def _runtime(task: Task, **options: Any) -> TaskRuntime:
    from openforgerl.envs.claw.runtime import ClawTaskRuntime

    return ClawTaskRuntime(task, **options)


def _check(task: Any) -> None:
    from openforgerl.envs.claw.runtime import check_claw_task

    check_claw_task(task)


CLAW = register_family(TaskFamily("claw", _runtime, verifiers=("checks",), check=_check))
