"""Claw environments: the task format, the per-rollout services and their three tool surfaces
(stdio MCP server, shell CLI, OpenAI function tools — all from `tools.TOOLS`), verifiers, importers
and the shipped task suite.

Entry points: `load_task` / `load_runtime` (a task folder → the orchestrator's `TaskRuntime`),
`python -m openforgerl.envs.services | mcp_server | claw_cli | verify`, `openforgerl tasks ...`.
Kept import-light: the service process and the CLI start inside every sandbox.
"""

__all__ = ["load_runtime", "load_task"]


def __getattr__(name: str) -> object:
    if name == "load_task":
        from openforgerl.envs.task import load_task

        return load_task
    if name == "load_runtime":
        from openforgerl.envs.runtime import load_runtime

        return load_runtime
    raise AttributeError(name)
