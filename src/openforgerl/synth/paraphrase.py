"""Optional paraphrase of template instructions by an engine the user names (OpenAI-compatible).

The rule that keeps a paraphrase honest: every slot value (names, addresses, titles, the literal
answer "NOT FOUND", the retry note) must appear in it verbatim, or the template is kept. The checks
never read the instruction, so a kept paraphrase cannot change what passes; it can only change
whether the instruction still says what the checks want, and the verbatim rule guards that.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable, Sequence

__all__ = ["Paraphraser", "accept", "http_paraphraser", "paraphrase"]

Paraphraser = Callable[[str, Sequence[str]], str | None]
"""(template instruction, slot values) → a rewording, or None."""

_PROMPT = (
    "Rewrite the following task instruction in different words, as a user would ask it. Keep every one of "
    "these exact strings unchanged, character for character: {slots}. Reply with the rewritten instruction "
    "only.\n\nInstruction: {text}"
)


def accept(original: str, candidate: str | None, slots: Sequence[str]) -> bool:
    """A paraphrase is kept only if every slot value survives verbatim and it is a sane length."""
    if not candidate or candidate.strip() == original.strip():
        return False
    text = candidate.strip()
    return 0.5 * len(original) <= len(text) <= 2.5 * len(original) + 40 and all(s in text for s in slots if s)


def paraphrase(text: str, slots: Sequence[str], engine: Paraphraser | None) -> tuple[str, bool]:
    """(instruction to use, whether it is a paraphrase)."""
    if engine is None:
        return text, False
    try:
        out = engine(text, slots)
    except OSError:
        return text, False
    return ((out or "").strip(), True) if accept(text, out, slots) else (text, False)


def http_paraphraser(
    url: str, model: str = "", timeout_s: float = 60.0, max_tokens: int = 200
) -> Paraphraser:
    """Paraphrase through `POST {url}/v1/chat/completions` (vLLM, the local engine, any OpenAI-compatible)."""
    base = url.rstrip("/")
    base = base[:-3] if base.endswith("/v1") else base

    def call(text: str, slots: Sequence[str]) -> str | None:
        prompt = _PROMPT.format(slots=", ".join(json.dumps(s) for s in slots), text=text)
        body = {
            "model": model or "default",
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0.7,
        }
        req = urllib.request.Request(
            f"{base}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            data = json.loads(resp.read())
        content = (data.get("choices") or [{}])[0].get("message", {}).get("content")
        return content if isinstance(content, str) else None

    return call
