"""Helpers for the protocol tests: the real harness captures and vLLM-shaped chunk streams."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import httpx2

CAPTURES = Path(__file__).parent / "captures"  # request bodies captured from the real CLIs


def captures(path_suffix: str) -> list[Path]:
    """Captured Codex / Claude Code / OpenClaw request bodies whose URL path ends with `path_suffix`."""
    return [f for f in sorted(CAPTURES.glob("*.json.gz")) if load(f)["path"].endswith(path_suffix)]


def load(path: Path) -> dict[str, Any]:
    return json.loads(gzip.decompress(path.read_bytes()))


def load_body(path: Path) -> dict[str, Any]:
    return load(path)["body"]


def chunk(
    delta: dict[str, Any] | None = None, finish: str | None = None, **choice_extra: Any
) -> dict[str, Any]:
    """One vLLM-shaped `chat.completion.chunk`."""
    choice = {"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish, **choice_extra}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1800000000,
        "model": "m",
        "choices": [choice],
    }


def usage_chunk(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1800000000,
        "model": "m",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }


def split(text: str, n: int = 3) -> list[str]:
    return [text[i : i + n] for i in range(0, len(text), n)]


def stream_chunks(
    *,
    reasoning: str = "",
    content: str = "",
    calls: list[tuple[str, str, str]] = (),
    finish: str | None = None,
    reasoning_key: str = "reasoning",
    prompt: int = 11,
    completion: int = 7,
) -> list[dict[str, Any]]:
    """A chunk sequence as vLLM streams it: role, reasoning, content, tool calls by index, finish, usage."""
    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({reasoning_key: piece}) for piece in split(reasoning)]
    out += [chunk({"content": piece}) for piece in split(content)]
    for i, (call_id, name, args) in enumerate(calls):
        out.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        out += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
            for piece in split(args, 5)
        ]
    out.append(chunk({}, finish or ("tool_calls" if calls else "stop")))
    out.append(usage_chunk(prompt, completion))
    return out


def chat_completion(
    *,
    reasoning: str = "",
    content: str = "",
    calls: list[tuple[str, str, str]] = (),
    finish: str | None = None,
    prompt: int = 11,
    completion: int = 7,
    **choice_extra: Any,
) -> dict[str, Any]:
    """A vLLM-shaped non-streamed `chat.completion`."""
    msg: dict[str, Any] = {
        "role": "assistant",
        "content": content or None,
        "reasoning": reasoning or None,
        "tool_calls": [
            {"id": c, "type": "function", "function": {"name": n, "arguments": a}} for c, n, a in calls
        ],
    }
    choice = {
        "index": 0,
        "message": msg,
        "finish_reason": finish or ("tool_calls" if calls else "stop"),
        **choice_extra,
    }
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1800000000,
        "model": "m",
        "choices": [choice],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def mock_http(status: int, body: bytes, content_type: str) -> httpx2.Client:
    """An http client whose every request gets `body`: lets the official SDK parse our bytes."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, content=body, headers={"content-type": content_type})

    return httpx2.Client(transport=httpx2.MockTransport(handler))
