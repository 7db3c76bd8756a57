"""`tool-world`: tasks synthesised from a tool environment that is all data, run in a rollout's sandbox.

`tasks synthesize --env <world>` writes a task of this kind for any world with a document
(`synth.world_doc`: the tools of an MCP listing, an OpenAPI document, a TOML file, or a `ToolEnv` of
plain `Tool`s and `Collection`s, as a plug-in declares one): the world in `environment/world.json`,
its state in `environment/fixtures/`, the transient faults in `environment/faults.json`, the checks in
`tests/checks.toml`, the gold calls in `solution/actions.json`.

- `service`: the world in the sandbox (`python -I -m openforgerl.envs.toolworld.service`), served by
  the SDK's tool service: tool calls for the agent, the state and the audit of calls for the host;
- `runtime`: `ToolWorldRuntime`: the tools as function schemas and one stdio MCP server, the verdict
  from `tests/checks.toml` on the state the host reads, the gold replay of `tasks validate`.

Imported through the `openforgerl.environments` entry point.
"""

from openforgerl.envs.toolworld.runtime import KIND, ToolWorldRuntime, check_task
from openforgerl.tasks import TaskFamily, register_family

__all__ = ["KIND", "ToolWorldRuntime"]

register_family(TaskFamily("tool-world", ToolWorldRuntime, kinds=(KIND,), check=check_task))
