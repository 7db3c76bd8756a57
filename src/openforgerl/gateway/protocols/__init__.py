"""The wire protocols harnesses speak, one package each, all in front of the chat-completions engine.

* `chat` — OpenAI Chat Completions, the engine's own protocol: checked and passed through.
* `responses` — OpenAI Responses API (Codex CLI, OpenClaw `openai-responses`).
* `anthropic` — Anthropic Messages (Claude Code, OpenClaw `anthropic-messages`).

Each package holds one `WireAdapter` (`base.py`), registered for its `WireProtocol`: it translates
the request, writes the answer and the stream (through the one SSE writer, `sse.py`), shapes the
protocol's errors and names its system text; the gateway serves it at its `path`. `adapter_for(wire)`
and `adapters()` read the one table.
Underneath, the translators are pure functions and small stream classes, no I/O; bad input raises
only `ProtocolError(status, message)`, which the adapter turns into the gateway's `GatewayError`.
"""

# Import order is registration order is route order: Chat, the hot path, is matched first.
from openforgerl.gateway.protocols import chat

# isort: split
from openforgerl.gateway.protocols import responses

# isort: split
from openforgerl.gateway.protocols import anthropic

# isort: split
from openforgerl.gateway.protocols._common import ProtocolError
from openforgerl.gateway.protocols.base import StreamWriter, WireAdapter, adapter_for, adapters, register

__all__ = [
    "ProtocolError",
    "StreamWriter",
    "WireAdapter",
    "adapter_for",
    "adapters",
    "anthropic",
    "chat",
    "register",
    "responses",
]
