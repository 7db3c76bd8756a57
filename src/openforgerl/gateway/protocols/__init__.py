"""Wire-protocol translators between what harnesses speak and the chat completions engines speak.

Pure functions and small stream classes, no I/O (the gateway does the HTTP):

* `responses` — OpenAI Responses API (Codex CLI, OpenClaw `openai-responses`).
* `anthropic` — Anthropic Messages (Claude Code, OpenClaw `anthropic-messages`).
* `sse` — SSE encoder and incremental decoder.

Each protocol module has the same surface: `validate_request`, `to_chat_request`,
`translate_request`, `from_chat_completion`, a stream class (`ResponsesStream` /
`AnthropicStream`: `start`, `feed`, `finish`, `error_event`) and `error_body`. Bad input raises only
`ProtocolError(status, message)`.
"""

from openforgerl.gateway.protocols._common import ProtocolError

__all__ = ["ProtocolError"]
