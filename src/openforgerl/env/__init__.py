"""The environment SDK: what environment packages (`openforgerl.envs.*`) build on, at ground level.

It imports nothing of openforgerl but records, errors, the registry, paths and the sandbox contract, so
an environment that uses it stays a plug-in: the core never imports an environment, and environments
never import each other (`tests/test_layers.py` counts both and holds the SDK to its own imports).

- `contract`: what a rollout needs from a task (`TaskRuntime`; `TaskSpec` and `TaskDefaults` to write
  one; `Verdict`, `VerifierError`; `McpServer`, the task's tools as the harness loads them);
- `errors`: `TaskFormatError`, a malformed task folder (import-free: in-sandbox tools raise it);
- `judge`: the LLM judge a verifier calls host-side (agent text fenced, replies parsed strictly);

- `apps`: the task's web apps (shop, mail over `world`, forms, wiki, calendar, board) the GUI service
  serves to any GUI kind's browser;
- `checks`: the declarative checks (`tests/checks.toml`): the spec, its kinds (one registry an environment
  adds its own kinds to) and their judging;
- `json_service`: the JSON-over-HTTP request handler the in-sandbox tool services share;
- `plugins`: what an environment offers the commands through entry points (its oracle policy, its
  suite's generator), so the core names no environment;
- `screens`: the GUI environment kinds (`openforgerl.gui_kinds` entry points) and how each opens its
  screen, so a GUI kind imports the SDK, not the GUI environment;
- `tool_client`: the stdlib client of a tool service (`call_tool`, `get_json`, `with_retry`);
- `tool_service`: a world's tool service for any state its tools change (a `ToolEnv` session): `serve`
  in the sandbox, its `/state` for the host's token only, `wait_for_service` for `service_started`,
  `read_state` for `verify` (a verifier run, apart from the agent), `function_tools`;
- `computer`: the GUI action API, its HTTP service and client;
- `mcp_server`: the stdio MCP server that forwards tool calls to a tool service (`build_server` for a
  tool table, `--tools FILE` for OpenAI function schemas);
- `user_sim`: the host-side relay behind the `ask_user` tool, answering with the user engine;
- `user_tools`: the simulated user with tools of its own (tau2 telecom: the user's phone);
- `world`: the in-memory state of the mail, calendar, contacts, kb, todo and notes services and the
  operations tools perform on it (the Claw services, the tau2 bridge and the browser's mail app share it);
- `world_data`: the shared fixture world every shipped and synthesized task starts from;
- `world_tools`: the world's tool table (`TOOLS`), from which the MCP server, the shell CLI and the OpenAI
  function tools are generated.

Importing this package imports nothing else (in-sandbox services import one module of it on a
rollout's clock).
"""
