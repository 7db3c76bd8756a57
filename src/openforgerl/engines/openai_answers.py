"""What an OpenAI-compatible engine's answers mean: token ids, logprobs, text and finish reason read out of
each dialect's bodies (`Extract`), or straight out of the bytes when that is certain (`scan_events`,
`split_prompt_ids`), and its SSE and error framing. Pure: no I/O (the client is openai_compat.py).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

import orjson

from openforgerl.engines.base import EngineChunk, EngineError, PromptIds
from openforgerl.records import CallErrorKind

__all__ = [
    "DONE",
    "DONE_EVENT",
    "ERROR_KEY",
    "FINISHED",
    "NO_CHOICES",
    "Dialect",
    "Extract",
    "chunk_of_bodies",
    "data_of",
    "error_message",
    "protocol_error",
    "scan_events",
    "split_prompt_ids",
]

ERROR_KEY = b'"error"'
NO_CHOICES = b'"choices":[]'  # a usage-only event: the last before [DONE]
FINISHED = b'"finish_reason":"'  # a non-null finish reason (the key cannot occur inside a string)
DONE = b"[DONE]"
DONE_EVENT = b"data: [DONE]\n\n"


class Dialect(StrEnum):
    VLLM = "vllm"
    SGLANG = "sglang"


def _logprobs(choice: dict[str, Any]) -> list[float]:
    content = (choice.get("logprobs") or {}).get("content") or []
    return [entry["logprob"] for entry in content]


def protocol_error(message: str) -> EngineError:
    return EngineError(CallErrorKind.ENGINE_PROTOCOL, message)


class Extract:
    """Reads ids/logprobs out of a dialect's bodies (pure; one instance per dialect)."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect

    def result(
        self, body: dict[str, Any], prompt_split: bool = False
    ) -> tuple[list[int] | None, list[int], list[float], str | None]:
        """Prompt ids, sampled ids, logprobs, finish reason; `prompt_split`: the prompt ids were
        already cut out of the body (`split_prompt_ids`), so None stands for them here."""
        choices = body.get("choices") or []
        if not choices:
            raise protocol_error("engine answer has no choices")
        choice = choices[0]
        if self.dialect == Dialect.VLLM:
            prompt, ids = body.get("prompt_token_ids"), choice.get("token_ids")
            lps = _logprobs(choice)
        else:
            prompt, ids, lps = self._sglang(body, choice)
        if (prompt is None and not prompt_split) or ids is None:
            raise protocol_error("engine answer lacks token ids (is return_token_ids supported?)")
        return prompt, ids, lps, choice.get("finish_reason")

    @staticmethod
    def _sglang(body: dict[str, Any], choice: dict[str, Any]) -> tuple[Any, Any, list[float]]:
        ext = body.get("sglext") or {}
        meta = choice.get("meta_info") or body.get("meta_info") or {}
        prompt = choice.get("prompt_token_ids") or ext.get("input_ids")
        ids = choice.get("response_token_ids") or choice.get("token_ids") or ext.get("output_ids")
        lps = _logprobs(choice) or [t[0] for t in meta.get("output_token_logprobs") or []]
        return prompt, ids, lps

    @staticmethod
    def events(bodies: list[dict[str, Any]], raw: bytes | None, engine_id: str) -> EngineChunk:
        """One EngineChunk for the chunk dicts of one network read (a tight loop: hot path)."""
        ids: list[int] = []
        lps: list[float] = []
        text: list[str] = []
        prompt, finish = None, None
        for body in bodies:
            if "prompt_token_ids" in body:
                prompt = body["prompt_token_ids"]
            choices = body.get("choices")
            if choices:
                c0 = choices[0]
                if tids := c0.get("token_ids"):
                    ids += tids
                if (lp := c0.get("logprobs")) and (content := lp.get("content")):
                    lps += [e["logprob"] for e in content]
                if (delta := c0.get("delta")) and (piece := delta.get("content")):
                    text.append(piece)
                if c0.get("finish_reason") is not None:
                    finish = c0["finish_reason"]
            elif (ext := body.get("sglext")) is not None:  # SGLang's final ids chunk
                ids += ext.get("output_ids") or []
                prompt = ext.get("input_ids", prompt)
        final = finish is not None or not bodies[-1].get("choices")
        prompt_ids = None if prompt is None else PromptIds(ids=prompt)
        return EngineChunk(
            bodies[-1],
            ids,
            lps,
            prompt_ids,
            finish,
            engine_id,
            raw,
            bodies if len(bodies) > 1 else None,
            "".join(text),
            final,
        )


# One chunk's ids, logprobs, text and finish out of parsed chunk dicts: also how the local engine's
# in-process stream reads the chunk dicts it would have sent over the wire.
chunk_of_bodies = Extract.events


_PROMPT_IDS_KEY = b'"prompt_token_ids":['
_ID_CHARS = b"0123456789,"
_TOKEN_IDS = re.compile(rb'"token_ids":\[([0-9][0-9,]*)\]')
_LOGPROB = re.compile(rb'"logprob":(-?[0-9][0-9.eE+-]*)[,}]')
# The delta shapes the scan knows: content (maybe after the role; group 1 is its JSON string),
# reasoning (not part of the response text), empty. Any other (tool calls, ...) goes to the parser.
_DELTA = re.compile(
    rb'"delta":\{(?:(?:"role":"assistant",)?"content":("(?:[^"\\]|\\.)*")|\}|"reasoning(?:_content)?":")'
)


def _array_bytes(raw: bytes, key: bytes, start_at: int = 0) -> bytes | None:
    """The compact array of non-negative ints after `key` (which ends in `[`), as bytes."""
    at = raw.find(key, start_at)
    if at < 0:
        return None
    start = at + len(key) - 1
    end = raw.find(b"]", start) + 1
    ids = raw[start:end]
    if (
        end == 0
        or ids.translate(None, _ID_CHARS) != b"[]"
        or b",," in ids
        or ids[1:2] == b","
        or ids[-2:-1] == b","
    ):
        return None
    return ids


def scan_events(raw: bytes) -> EngineChunk | None:
    """A run of vLLM chat.completion.chunk events read from their bytes, without parsing them:
    sampled ids and their logprobs (counts must agree), the content text, the finish reason, and
    the prompt ids kept as the engine's own JSON array. None when the run holds anything the scan
    is not certain of (top-k logprobs, tool calls, another delta shape, an error), so the caller
    parses it. Sound because these keys cannot occur inside a string value (quotes are escaped).
    On a 128-token stream it costs about half of parsing every event."""
    if ERROR_KEY in raw or b'"top_logprobs":[{' in raw:
        return None
    # Framing: every event is one `data: {...}` line (what is inside is taken on trust, with the
    # counts below cross-checked; a malformed event sends the run to the parser, which says so).
    if not (
        raw.startswith(b"data: {")
        and raw.endswith(b"}\n\n")
        and raw.count(b"}\n\ndata: {") == raw.count(b"\n\n") - 1 == raw.count(b"\n") // 2 - 1
    ):
        return None
    deltas = _DELTA.findall(raw)
    if len(deltas) != raw.count(b'"delta":'):
        return None
    texts = [t for t in deltas if t]
    try:
        ids = [int(x) for m in _TOKEN_IDS.findall(raw) for x in m.split(b",")]
        lps = [float(x) for x in _LOGPROB.findall(raw)]
        text = "".join(orjson.loads(b"[" + b",".join(texts) + b"]")) if texts else ""
    except (ValueError, orjson.JSONDecodeError):
        return None
    if len(ids) != len(lps):
        return None
    prompt = None
    if _PROMPT_IDS_KEY in raw:
        prompt = _array_bytes(raw, _PROMPT_IDS_KEY)
        if prompt is None:
            return None
    at = raw.rfind(FINISHED)
    finish = raw[at + len(FINISHED) : raw.index(b'"', at + len(FINISHED))].decode() if at >= 0 else None
    return EngineChunk(
        {},
        ids,
        lps,
        None if prompt is None else PromptIds(json=prompt),
        finish,
        "",
        raw,
        None,
        text,
        finish is not None,
    )


def split_prompt_ids(raw: bytes) -> tuple[bytes, bytes] | None:
    """A vLLM answer's top-level `prompt_token_ids` cut out of its compact JSON: (the body without
    them, the ids as their JSON array bytes). None when the bytes are not laid out that way, and
    the caller parses the whole body.

    Why: the gateway stores prompt ids but never reads them, and parsing a 20k-token prompt's ids
    costs more than everything else the gateway does per call. The key cannot occur inside a string
    value (its quotes would be escaped), and the array is checked to hold only digits and commas,
    so the bytes spliced into the record are a valid JSON array of ints.
    """
    at = raw.rfind(_PROMPT_IDS_KEY)
    if at < 0:
        return None
    ids = _array_bytes(raw, _PROMPT_IDS_KEY, at)
    if ids is None:
        return None
    end = at + len(_PROMPT_IDS_KEY) - 1 + len(ids)
    if raw[at - 1 : at] == b",":
        return raw[: at - 1] + raw[end:], ids
    if raw[end : end + 1] == b",":
        return raw[:at] + raw[end + 1 :], ids
    return None


def data_of(block: bytes) -> bytes | None:
    """The `data:` payload of one SSE event block (None for comments / named non-data events)."""
    if block[:6] == b"data: " and b"\n" not in block:
        return block[6:]
    block = block.strip(b"\r\n")
    lines = [
        ln[5:].lstrip(b" ") for ln in block.replace(b"\r\n", b"\n").split(b"\n") if ln.startswith(b"data:")
    ]
    return b"\n".join(lines) if lines else None


def error_message(data: bytes, status: int) -> str:
    """A readable error message from an engine's error body (OpenAI or FastAPI shape)."""
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return f"engine answered {status}: {data[:500].decode('utf-8', 'replace')}"
    if isinstance(body, dict):
        err = body.get("error", body.get("detail", body.get("message")))
        if isinstance(err, dict):
            err = err.get("message", err)
        return f"engine answered {status}: {err}"
    return f"engine answered {status}: {body}"
