"""The recording gateway: harness CLIs talk to it, it talks to the engine, every call is logged.

    from openforgerl.gateway.server import start_gateway
    gw = await start_gateway(engine, store)          # engine: openforgerl.engines.base.Engine
    ro = await gw.open_rollout(task_id="t1")         # {rollout_id, api_key, openai_base_url, anthropic_base_url}
    ...                                              # point a harness at ro["openai_base_url"]
    await gw.pause(); version = gw.resume()          # weight sync
    await gw.aclose()

Modules: `server` (app, routes, start_gateway), `calls` (one call: admit, forward, tee, record),
`chat` / `adapters` (per-protocol adapters; translators live in `protocols/`), `rollouts`
(keys, close, reward, taint), `flow` (pause/resume, overload), `recording` (CallRecord assembly,
harness headers, side calls), `errors` (protocol-shaped refusals), `metrics`, `admin`, `command`.
"""
