"""Split raw model text exactly like vLLM 0.32 `--reasoning-parser qwen3 --tool-call-parser hermes`.

Measured against vLLM's own parser classes (vllm 0.32.0, `ParserManager.get_parser("hermes", "qwen3")`):
* thinking is on unless `chat_template_kwargs.enable_thinking` is false: text before `</think>` is
  reasoning even without an opening `<think>`; every `<think>` in it is dropped; a `<tool_call>` ends
  reasoning implicitly; no `</think>` and no `<tool_call>` → everything is reasoning, content null;
* reasoning and content are NOT stripped (`"\\nplan\\n"`, `"\\n\\nAnswer."`); extra `</think>` are dropped;
* hermes: `<tool_call>(.*?)</tool_call>` or an unclosed `<tool_call>(.*)`, JSON with `name` and
  `arguments`, arguments re-serialised with `json.dumps(..., ensure_ascii=False)`; any bad call →
  no tool calls and the text stays content; with calls, content is the text before the first
  `<tool_call>` (null when only whitespace) and text after the last call is dropped.
Both engines that answer chat requests in process (the local engine and the scripted test engine,
through `chat.py`) parse with this module, so they match vLLM on the wire. `ChatFormat.parse_output`
is a lenient reading for transcripts (it strips whitespace and treats text without `</think>` as
content); no engine uses it.
"""

from __future__ import annotations

import json
import re

from openforgerl.engines.chat_format import ParsedOutput, ParsedToolCall

_TOOL_RE = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)
THINK_OPEN, THINK_CLOSE, TOOL_OPEN = "<think>", "</think>", "<tool_call>"


def split_reasoning(text: str, thinking: bool = True) -> tuple[str | None, str | None]:
    """(reasoning, rest) following the qwen3 reasoning parser's state machine."""
    if THINK_CLOSE in text:
        head, rest = text.split(THINK_CLOSE, 1)
        return head.replace(THINK_OPEN, "") or None, rest.replace(THINK_CLOSE, "") or None
    if not thinking:
        return None, text or None
    if TOOL_OPEN in text:
        i = text.index(TOOL_OPEN)
        return text[:i].replace(THINK_OPEN, "") or None, text[i:]
    return text.replace(THINK_OPEN, "") or None, None


def extract_tool_calls(content: str) -> tuple[list[ParsedToolCall], str | None]:
    """Hermes tool calls out of `content`; on any malformed call, no calls and content unchanged."""
    try:
        objs = [json.loads(a or b) for a, b in _TOOL_RE.findall(content)]
        calls = [
            ParsedToolCall(name=o["name"], arguments=json.dumps(o["arguments"], ensure_ascii=False))
            for o in objs
        ]
    except (ValueError, KeyError, TypeError):
        return [], content
    head = content[: content.index(TOOL_OPEN)]
    return calls, head if head.strip() else None


def parse_vllm(
    text: str, *, parse_tools: bool, thinking: bool = True, reasoning: bool = True
) -> ParsedOutput:
    """`reasoning=False`: the model is served without a reasoning parser, so every byte is content."""
    reasoning_text, content = split_reasoning(text, thinking) if reasoning else (None, text or None)
    calls: list[ParsedToolCall] = []
    if parse_tools and content and TOOL_OPEN in content:
        calls, content = extract_tool_calls(content)
    return ParsedOutput(content=content, reasoning=reasoning_text, tool_calls=calls)


def _held_back(text: str, markers: tuple[str, ...]) -> str:
    """Drop a trailing partial marker (e.g. '<tool_' of '<tool_call>') and incomplete UTF-8."""
    text = text.rstrip("\ufffd")
    for marker in markers:
        for k in range(len(marker) - 1, 0, -1):
            if text.endswith(marker[:k]):
                return text[:-k]
    return text


def stream_view(
    text: str, *, parse_tools: bool, thinking: bool = True, reasoning: bool = True
) -> tuple[str, str]:
    """(reasoning, content) that is safe to show while `text` is still growing."""
    if not reasoning:
        content = text[: text.index(TOOL_OPEN)] if parse_tools and TOOL_OPEN in text else text
        return "", _held_back(content, (TOOL_OPEN,) if parse_tools else ())
    # `thought`, not `reasoning`: that name is the flag saying whether the model reasons at all
    if THINK_CLOSE in text or not thinking:
        split_thought, split_content = split_reasoning(text, thinking)
        thought, content = split_thought or "", split_content or ""
    elif TOOL_OPEN in text:
        i = text.index(TOOL_OPEN)
        thought, content = text[:i].replace(THINK_OPEN, ""), text[i:]
    else:
        return _held_back(text.replace(THINK_OPEN, ""), (THINK_CLOSE, TOOL_OPEN, THINK_OPEN)), ""
    if parse_tools and TOOL_OPEN in content:
        content = content[: content.index(TOOL_OPEN)]
    return thought, _held_back(content, (TOOL_OPEN, THINK_CLOSE) if parse_tools else (THINK_CLOSE,))
