"""OpenAI/vLLM request bodies → prompt ids + `SamplingParams` (vLLM defaults and validation)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openforgerl.engines.local.sampling import SamplingParams

MAX_TOP_LOGPROBS = 20


class ApiError(Exception):
    """An error answered in vLLM's JSON error shape."""

    def __init__(self, message: str, status: int = 400, err_type: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status, self.err_type = status, err_type

    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": self.err_type, "param": None, "code": self.status}}


@dataclass(frozen=True)
class ChatOptions:
    """The non-sampling knobs of a chat request."""

    tools: list[dict[str, Any]] | None
    parse_tools: bool
    include_reasoning: bool
    return_token_ids: bool
    logprobs: bool
    stream: bool
    include_usage: bool
    n: int
    thinking: bool = True  # chat_template_kwargs.enable_thinking (vLLM's qwen3 parser reads it too)
    reasoning: bool = True  # the model is served with a reasoning parser (else all text is content)


def _stop_list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def _max_tokens(requested: Any, prompt_len: int, max_model_len: int, default: int | None) -> int:
    if prompt_len >= max_model_len:
        raise ApiError(
            f"This model's maximum context length is {max_model_len} tokens. However, your request has "
            f"{prompt_len} input tokens. Please reduce the length of the input messages."
        )
    room = max_model_len - prompt_len
    if requested is None:
        return room if default is None else min(default, room)
    if int(requested) < 1:
        raise ApiError("max_tokens must be at least 1")
    if int(requested) > room:
        raise ApiError(
            f"This model's maximum context length is {max_model_len} tokens. However, you requested "
            f"{int(requested) + prompt_len} tokens ({prompt_len} in the messages, {requested} in the "
            "completion). Please reduce the length of the messages or completion."
        )
    return int(requested)


def sampling_params(
    body: dict[str, Any],
    *,
    prompt_len: int,
    max_model_len: int,
    logprobs: int | None,
    default_max: int | None,
) -> SamplingParams:
    requested = body.get("max_completion_tokens", body.get("max_tokens"))
    temperature = body.get("temperature")
    if logprobs is not None and not 0 <= logprobs <= MAX_TOP_LOGPROBS:
        raise ApiError(f"top_logprobs must be between 0 and {MAX_TOP_LOGPROBS}")
    return SamplingParams(
        max_tokens=_max_tokens(requested, prompt_len, max_model_len, default_max),
        temperature=1.0 if temperature is None else float(temperature),
        top_p=1.0 if body.get("top_p") is None else float(body["top_p"]),
        top_k=int(body.get("top_k") or 0),
        seed=body.get("seed"),
        stop=_stop_list(body.get("stop")),
        stop_token_ids=tuple(body.get("stop_token_ids") or ()),
        ignore_eos=bool(body.get("ignore_eos", False)),
        min_tokens=int(body.get("min_tokens") or 0),
        logprobs=logprobs,
        include_stop_str_in_output=bool(body.get("include_stop_str_in_output", False)),
    )


def chat_options(body: dict[str, Any], *, reasoning_parser: str | None = "qwen3") -> ChatOptions:
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        raise ApiError("messages must be a non-empty list")
    tools = body.get("tools") or None
    tool_choice = body.get("tool_choice", "auto" if tools else "none")
    stream_options = body.get("stream_options") or {}
    return ChatOptions(
        tools=tools,
        parse_tools=bool(tools) and tool_choice != "none",
        include_reasoning=body.get("include_reasoning", True) is not False,
        return_token_ids=bool(body.get("return_token_ids", False)),
        logprobs=bool(body.get("logprobs", False)),
        stream=bool(body.get("stream", False)),
        include_usage=bool(stream_options.get("include_usage", False)),
        n=int(body.get("n") or 1),
        thinking=(body.get("chat_template_kwargs") or {}).get("enable_thinking", True) is not False,
        reasoning=reasoning_parser is not None,
    )


def chat_logprobs(body: dict[str, Any]) -> int | None:
    if not body.get("logprobs"):
        return None
    return int(body.get("top_logprobs") or 0)


def completion_prompts(prompt: Any, encode: Any) -> list[list[int]]:
    """`prompt` may be a string, a list of strings, a list of ids or a list of id lists."""
    if isinstance(prompt, str):
        prompts = [encode(prompt)]
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        prompts = [list(prompt)]
    elif isinstance(prompt, list) and prompt:
        prompts = [encode(p) if isinstance(p, str) else list(p) for p in prompt]
    else:
        raise ApiError("prompt must be a string, a list of token ids, or a list of either")
    if not all(prompts):
        raise ApiError("prompt cannot be empty")
    return prompts
