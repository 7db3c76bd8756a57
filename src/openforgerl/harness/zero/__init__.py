"""`zero`: our compact direct-tool harness (in the spirit of ZeroClaw).

One process, OpenAI Chat Completions against `OPENAI_BASE_URL` (a stdlib client with the SDK's retry
contract: starting the SDK cost more CPU than a tiny-model rollout), the task's tools
injected directly as function tools, and a history that is strictly append-only: the assistant message is
appended exactly as returned, then one tool message per call. Every call's prompt therefore extends the
previous one, so the gateway's calls merge into a single training chain (merge rate 1.0 by construction).
It is the harness the tiny local model is trained in, so its system prompt is short and fixed.

Run it as `python -m openforgerl.harness.zero "instruction" --tools-json tools.json --workdir DIR`."""
