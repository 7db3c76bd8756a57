"""Chat template rendering and output parsing for Qwen3-style (ChatML + hermes tool calls) models.

Shared by the scripted engine (tests) and the local engine: both render prompts the way vLLM does;
their output is parsed by `local/parsing.py` (vLLM's `--tool-call-parser hermes --reasoning-parser
qwen3`, exactly). Token ids always come from the real tokenizer.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import jinja2
from tokenizers import Tokenizer

TINY_ASSETS = Path(__file__).resolve().parents[1] / "assets" / "tiny"
EOS_TOKEN = "<|im_end|>"
_TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


@dataclass(frozen=True)
class ParsedToolCall:
    name: str
    arguments: str  # JSON text, re-serialised with json.dumps spacing as vLLM's hermes parser does
    id: str = field(default_factory=lambda: f"call_{uuid.uuid4().hex[:24]}")


@dataclass(frozen=True)
class ParsedOutput:
    content: str | None
    reasoning: str | None
    tool_calls: list[ParsedToolCall]


def content_to_text(content: Any) -> str:
    """Flatten OpenAI content-part arrays to text (images become a placeholder)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = []
    for part in content:
        if isinstance(part, str):
            parts.append(part)
        elif part.get("type") in ("text", "input_text", "output_text"):
            parts.append(part.get("text", ""))
        elif part.get("type") in ("image_url", "input_image", "image"):
            parts.append("<image>")
    return "".join(parts)


def content_to_parts(content: Any) -> Any:
    """A vision model's content: strings stay strings; part lists become `text` and `image` parts (what vLLM
    hands a template with `--chat-template-content-format openai`)."""
    if content is None or isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, str):
            parts.append({"type": "text", "text": part})
        elif part.get("type") in ("text", "input_text", "output_text"):
            parts.append({"type": "text", "text": part.get("text", "")})
        elif part.get("type") in ("image_url", "input_image", "image"):
            parts.append({"type": "image"})
    return parts


def normalize_messages(messages: list[dict[str, Any]], *, keep_images: bool = False) -> list[dict[str, Any]]:
    """What vLLM does before templating: text content, `reasoning` key, tool-call arguments as objects.

    `keep_images` (vision models): content part lists keep their order as text/image parts.

    vLLM parses each history tool call's JSON `arguments` into a mapping, so the template re-renders
    it with `json.dumps` spacing; a harness that re-serialised the arguments compactly (Qwen Code,
    opencode, OpenClaw) then still sends a prompt that extends the model's own sampled tokens.
    """
    out = []
    for m in messages:
        msg = dict(m)
        msg["content"] = (
            content_to_parts(m.get("content")) if keep_images else content_to_text(m.get("content"))
        )
        if "reasoning_content" in msg and "reasoning" not in msg:
            msg["reasoning"] = msg.pop("reasoning_content")
        if msg.get("tool_calls"):
            msg["tool_calls"] = [_parsed_arguments(tc) for tc in msg["tool_calls"]]
        out.append(msg)
    return out


def _parsed_arguments(tool_call: dict[str, Any]) -> dict[str, Any]:
    fn = tool_call.get("function") or {}
    args = fn.get("arguments")
    if not isinstance(args, str):
        return tool_call
    try:
        parsed = json.loads(args)
    except ValueError:
        return tool_call
    if not isinstance(parsed, dict):
        return tool_call
    return {**tool_call, "function": {**fn, "arguments": parsed}}


def parse_output(text: str, *, tools_available: bool = True) -> ParsedOutput:
    """A lenient split of raw model text into reasoning, content and hermes tool calls, for reading
    transcripts (whitespace stripped; text without `</think>` is content). Not vLLM's exact parse:
    engines use `local.parsing.parse_vllm`."""
    reasoning = None
    rest = text
    if "</think>" in rest:
        head, rest = rest.split("</think>", 1)
        reasoning = head.replace("<think>", "", 1).strip("\n") or None
        rest = rest.lstrip("\n")
    elif rest.startswith("<think>"):
        return ParsedOutput(content=None, reasoning=rest[len("<think>") :].strip("\n"), tool_calls=[])
    calls: list[ParsedToolCall] = []
    if tools_available and "<tool_call>" in rest:
        for raw in _TOOL_CALL_RE.findall(rest):
            try:
                obj = json.loads(raw)
                calls.append(
                    ParsedToolCall(
                        name=obj["name"], arguments=json.dumps(obj.get("arguments", {}), ensure_ascii=False)
                    )
                )
            except (ValueError, KeyError, TypeError):
                calls = []
                break
        if calls:
            rest = rest[: rest.index("<tool_call>")]
    content = rest.strip() if calls else rest
    return ParsedOutput(content=content or None, reasoning=reasoning, tool_calls=calls)


def format_tool_call(name: str, arguments: dict[str, Any]) -> str:
    """The model-native text for one tool call (what a scripted policy 'samples')."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>"


# A model directory may carry this file to say which vLLM output parsers it is served with (the
# `--reasoning-parser` / `--tool-call-parser` flags); absent, the reasoning parser is `qwen3` when the
# tokenizer has a `</think>` token and none otherwise (SmolLM2 has none: with qwen3 every answer became
# `reasoning` with `content: null`).
PARSERS_FILE = "openforgerl_parsers.json"
REASONING_PARSERS = ("qwen3", "none")


def default_reasoning_parser(tokenizer: Tokenizer) -> str | None:
    return "qwen3" if tokenizer.token_to_id("</think>") is not None else None


class ChatFormat:
    """A tokenizer plus its chat template, and the reasoning parser the model is served with."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        template: str,
        *,
        reasoning_parser: str | object | None = ...,
        multimodal: bool = False,
    ) -> None:
        self.tokenizer = tokenizer
        self.multimodal = multimodal  # keep image parts for the template (a vision-language model)
        self.reasoning_parser: str | None = (
            default_reasoning_parser(tokenizer)
            if reasoning_parser is ...
            else None
            if reasoning_parser in (None, "none")
            else str(reasoning_parser)
        )
        env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
        env.filters["tojson"] = lambda v: json.dumps(v, ensure_ascii=False)
        self._template = env.from_string(template)

    @classmethod
    def load(cls, assets: str | Path = TINY_ASSETS) -> ChatFormat:
        assets = Path(assets)
        tok = Tokenizer.from_file(str(assets / "tokenizer.json"))
        return cls(tok, (assets / "chat_template.jinja").read_text())

    @cached_property
    def eos_token_id(self) -> int:
        tid = self.tokenizer.token_to_id(EOS_TOKEN)
        assert tid is not None
        return tid

    def render(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
        **template_kwargs: Any,
    ) -> str:
        return self._template.render(
            messages=normalize_messages(messages, keep_images=self.multimodal),
            tools=tools or None,
            add_generation_prompt=add_generation_prompt,
            **template_kwargs,
        )

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int], *, skip_special_tokens: bool = False) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)

    def prompt_ids(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        **template_kwargs: Any,
    ) -> list[int]:
        return self.encode(self.render(messages, tools, **template_kwargs))


def load_chat_format(path: Path) -> ChatFormat:
    """Tokenizer + template of the directory (template file first, then tokenizer_config.json)."""
    template_file = path / "chat_template.jinja"
    if template_file.exists():
        template = template_file.read_text()
    else:
        template = json.loads((path / "tokenizer_config.json").read_text())["chat_template"]
    parsers_file = path / PARSERS_FILE
    parsers = json.loads(parsers_file.read_text()) if parsers_file.exists() else {}
    reasoning = parsers.get("reasoning_parser", ...)
    return ChatFormat(
        Tokenizer.from_file(str(path / "tokenizer.json")),
        template,
        reasoning_parser=reasoning,
        multimodal=is_multimodal_dir(path),
    )


def is_multimodal_dir(path: Path) -> bool:
    """A vision-language model directory (its config has a `vision_config`)."""
    config = path / "config.json"
    return config.exists() and "vision_config" in json.loads(config.read_text())
