"""The recording gateway: harness CLIs talk to it, it talks to the engine, every call is logged.

    from openforgerl.gateway.server import start_gateway
    gw = await start_gateway(engine, store)    # engine: openforgerl.engines.base.Engine
    ro = await gw.open_rollout(task_id="t1")   # {rollout_id, api_key, openai_base_url, anthropic_base_url}
    ...                                        # point a harness at ro["openai_base_url"]
    run_batch(..., gateway=gw.access)          # admin URL + admin token + model URL, for the orchestrator
    await gw.pause(); version = gw.resume()    # weight sync
    await gw.aclose()

Two planes: `gw.model_url` serves model routes only and is what a sandbox
reaches; `gw.admin_url` serves the admin API on its own listener and needs `Authorization: Bearer
<gw.admin_token>`. The token is generated at start unless given (`start_gateway(admin_token=...)`,
`openforgerl gateway --admin-token-file F` or `$OPENFORGERL_ADMIN_TOKEN`). A user's own orchestrator
gets it from wherever the gateway got it: the same token file or variable (the CLI writes a generated
token to `--admin-token-file` when that file does not exist yet), or `RunningGateway.access` in-process;
see docs/threat-model.md. It must never be passed to a harness.

Modules: `server` (the two apps, start_gateway, `rollout_auth` for model routes), `access` (GatewayAccess:
what an admin client holds), `calls` (one `Call`: admit, forward, tee, record), `protocols/` (one package
per wire protocol: `chat`, `responses`, `anthropic`, each one registered `WireAdapter`; `sse`, the one SSE
writer), `rollouts` (keys, index leases, deadlines, close, outcome, taint), `flow` (pause/resume,
overload), `recording` (CallRecord assembly, harness headers, side calls), `errors` (`GatewayError`,
rendered by the route's adapter), `deadlines`, `metrics`, `admin`, `command`.
"""
