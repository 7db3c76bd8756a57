"""Build vLLM-shaped chat/completions response bodies and stream chunks from generated tokens.

Parsing (tool calls, reasoning split) goes through `parsing.parse_vllm`, which reproduces vLLM 0.32's
hermes tool parser + qwen3 reasoning parser. `token_ids` always carry the raw sampled ids (including
the `<think>`/`<tool_call>` text and the final EOS), like vLLM with `return_token_ids`.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from openforgerl.engines.chat_format import ChatFormat, ParsedOutput
from openforgerl.engines.local.generation import Generation
from openforgerl.engines.local.parsing import parse_vllm, stream_view
from openforgerl.engines.local.requests import ChatOptions


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def visible_text(
    chat: ChatFormat,
    ids: list[int],
    finish_reason: str | None,
    stop: str | int | None,
    eos_ids: tuple[int, ...],
) -> str:
    """The output text vLLM reports: no trailing EOS/stop token, cut at a matched stop string."""
    if finish_reason == "stop" and ids and (ids[-1] in eos_ids or ids[-1] == stop):
        ids = ids[:-1]
    text = chat.decode(ids)
    if isinstance(stop, str) and stop in text:
        text = text[: text.index(stop)]
    return text


def token_str(chat: ChatFormat, tid: int) -> str:
    return chat.decode([tid])


def logprob_entry(
    chat: ChatFormat, tid: int, lp: float, top: tuple[tuple[int, float], ...]
) -> dict[str, Any]:
    """One `choices[].logprobs.content[]` item (OpenAI shape)."""
    tok = token_str(chat, tid)
    alts = [
        {"token": (s := token_str(chat, t)), "logprob": max(v, -9999.0), "bytes": list(s.encode())}
        for t, v in top
    ]
    return {"token": tok, "logprob": max(lp, -9999.0), "bytes": list(tok.encode()), "top_logprobs": alts}


def tool_call_id() -> str:
    """vLLM's id format for parsed tool calls."""
    return f"chatcmpl-tool-{uuid.uuid4().hex[:16]}"


def tool_call_json(parsed: ParsedOutput) -> list[dict[str, Any]]:
    return [
        {"id": tool_call_id(), "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in parsed.tool_calls
    ]


def usage(prompt_len: int, completion_len: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt_len,
        "total_tokens": prompt_len + completion_len,
        "completion_tokens": completion_len,
        "prompt_tokens_details": None,
    }


def chat_choice(
    chat: ChatFormat, index: int, gen: Generation, opts: ChatOptions, eos_ids: tuple[int, ...]
) -> dict[str, Any]:
    text = visible_text(chat, gen.token_ids, gen.finish_reason, gen.stop_reason, eos_ids)
    parsed = parse_vllm(text, parse_tools=opts.parse_tools, thinking=opts.thinking, reasoning=opts.reasoning)
    message: dict[str, Any] = {
        "role": "assistant",
        "content": parsed.content,
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
        "reasoning": parsed.reasoning if opts.include_reasoning else None,
    }
    if parsed.tool_calls:
        message["tool_calls"] = tool_call_json(parsed)
    hide_ids = not opts.include_reasoning  # vLLM drops ids/logprobs when include_reasoning is false
    lp = None
    if opts.logprobs and not hide_ids:
        lp = {
            "content": [
                logprob_entry(chat, t, v, top)
                for t, v, top in zip(gen.token_ids, gen.logprobs, gen.top_logprobs, strict=True)
            ]
        }
    return {
        "index": index,
        "message": message,
        "logprobs": lp,
        "finish_reason": "tool_calls" if parsed.tool_calls else gen.finish_reason,
        "stop_reason": gen.stop_reason,
        "token_ids": list(gen.token_ids) if opts.return_token_ids and not hide_ids else None,
    }


def chat_completion(
    chat: ChatFormat,
    model: str,
    prompt_ids: list[int],
    gens: list[Generation],
    opts: ChatOptions,
    eos_ids: tuple[int, ...],
) -> dict[str, Any]:
    return {
        "id": new_id("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [chat_choice(chat, i, g, opts, eos_ids) for i, g in enumerate(gens)],
        "usage": usage(len(prompt_ids), sum(len(g.token_ids) for g in gens)),
        "prompt_logprobs": None,
        "prompt_token_ids": list(prompt_ids) if opts.return_token_ids else None,
        "kv_transfer_params": None,
    }


@dataclass
class ChatStreamState:
    """Per-choice incremental state: what reasoning/content has been sent so far."""

    index: int
    ids: list[int] = field(default_factory=list)
    sent_reasoning: str = ""
    sent_content: str = ""

    def delta(self, text: str, opts: ChatOptions) -> dict[str, Any]:
        reasoning, content = stream_view(
            text, parse_tools=opts.parse_tools, thinking=opts.thinking, reasoning=opts.reasoning
        )
        out: dict[str, Any] = {}
        if (
            opts.include_reasoning
            and reasoning.startswith(self.sent_reasoning)
            and reasoning != self.sent_reasoning
        ):
            out["reasoning"] = reasoning[len(self.sent_reasoning) :]
            self.sent_reasoning = reasoning
        if content.startswith(self.sent_content) and content != self.sent_content:
            out["content"] = content[len(self.sent_content) :]
            self.sent_content = content
        return out

    def final_delta(self, text: str, opts: ChatOptions) -> tuple[dict[str, Any], bool]:
        """The closing delta: leftover content and the parsed tool calls. Returns (delta, tools_called)."""
        parsed = parse_vllm(
            text, parse_tools=opts.parse_tools, thinking=opts.thinking, reasoning=opts.reasoning
        )
        out = self.delta(text, opts) if not parsed.tool_calls else {}
        final = parsed.content or ""
        if final.startswith(self.sent_content) and final != self.sent_content and not parsed.tool_calls:
            out["content"] = out.get("content", "") + final[len(self.sent_content) :]
        if parsed.tool_calls:
            out["tool_calls"] = [dict(index=i, **tc) for i, tc in enumerate(tool_call_json(parsed))]
        return out, bool(parsed.tool_calls)
