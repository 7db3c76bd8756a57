"""The token view of one rollout: each chain `trajectory/` builds, token by token (pure but for decoding).

Every response token carries its mask (1 = sampled by the policy and trained, 0 = context the
harness inserted: tool output, template glue) and its logprob; each chain says why it started (the
`BreakEvent` of `trajectory.breaks`: sub-agent, compaction, prefix mismatch, new context, rewind,
length) and calls left out of every chain say why (`ExcludeCause`). The view uses the same
`build_chains` the trainer uses, so what it shows is what would be trained.

An image is hundreds of placeholder tokens (`<|image_pad|>`: 880 for a 1280x720 screenshot in
Qwen3-VL), which buried the text around it: each run of one placeholder token with one mask becomes
a single `TokenSpan` (`count` > 1, `label` "image 2 · 880 tokens"), its mask and logprobs kept in
its title. Images are numbered through the whole chain, hidden prompt head included.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from openforgerl.records import CallRecord
from openforgerl.trajectory.building import build_chains, exclude_cause
from openforgerl.trajectory.chains import Chain
from openforgerl.trajectory.options import ReconstructionOptions

__all__ = ["ChainView", "TokenSpan", "chain_view", "chain_views", "collapse_images", "load_decoder"]

Decoder = Callable[[int], str]
PROMPT_TAIL = 400
"""Prompt spans shown before the response (the head is collapsed; an image run is one span)."""
PLACEHOLDERS = frozenset({"<|image_pad|>", "<|video_pad|>", "<image>", "<|image|>", "<image_soft_token>"})
"""Decoded texts of the vision placeholder tokens a chat template repeats once per image patch."""


@dataclass(frozen=True, slots=True)
class TokenSpan:
    text: str
    token_id: int
    trained: bool
    logprob: float | None
    heat: float
    """0 (p≈1, confident) .. 1 (p≈0): the colour of a trained token."""
    count: int = 1
    """Tokens this span stands for: > 1 for a collapsed image placeholder run."""
    label: str = ""
    """The chip's text for a collapsed run ("image 1 · 880 tokens")."""

    @property
    def title(self) -> str:
        """What a hover shows: id, mask and logprob (for a run: its count and mean logprob)."""
        mask = "mask 1, trained" if self.trained else "mask 0, not trained"
        lp = f" · logprob {self.logprob:.3f}" if self.logprob is not None else ""
        if self.count > 1:
            lp = f" · mean logprob {self.logprob:.3f}" if self.logprob is not None else ""
            return f"{self.label}: {self.count} × {self.text} (id {self.token_id}) · {mask}{lp}"
        return f"id {self.token_id} · {mask}{lp}" if self.trained else f"id {self.token_id} ({mask})"


@dataclass(frozen=True, slots=True)
class ChainView:
    index: int
    agent: str | None
    call_indices: tuple[int, ...]
    started_by: str | None
    break_detail: str
    prompt_len: int
    prompt_hidden: int
    prompt: tuple[TokenSpan, ...]
    response: tuple[TokenSpan, ...]
    trained_tokens: int
    mean_logprob: float | None
    version_min: int
    version_max: int


def load_decoder(spec: str | None, run_root: Path | None = None) -> Decoder:
    """Token id → text: a tokenizer.json (file or folder), the `tiny` preset, or ids as `⟨id⟩`."""
    path = _tokenizer_path(spec, run_root)
    if path is None:
        return lambda i: f"⟨{i}⟩"
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    cache: dict[int, str] = {}

    def decode(i: int) -> str:
        if i not in cache:
            cache[i] = tok.decode([i], skip_special_tokens=False) or tok.id_to_token(i) or f"⟨{i}⟩"
        return cache[i]

    return decode


def _tokenizer_path(spec: str | None, run_root: Path | None) -> Path | None:
    if run_root is not None and (run_root / "tokenizer.json").is_file():
        return run_root / "tokenizer.json"
    if not spec or spec == "none":
        return None
    if spec in ("tiny", "tiny-vl"):
        from openforgerl.engines.local.model import PRESETS

        path = PRESETS[spec] / "tokenizer.json"
    else:
        path = Path(spec)
        path = path / "tokenizer.json" if path.is_dir() else path
    return path if path.is_file() else None


def _heat(logprob: float) -> float:
    return max(0.0, min(1.0, 1.0 - math.exp(logprob)))


def chain_views(
    calls: Sequence[CallRecord], decode: Decoder, options: ReconstructionOptions | None = None
) -> tuple[list[ChainView], list[tuple[int, str]]]:
    """(chains, excluded calls as (index, cause))."""
    ordered = sorted(calls, key=lambda c: c.index)
    build = build_chains(ordered, options or ReconstructionOptions())
    excluded = [(c.index, str(cause)) for c in ordered if (cause := exclude_cause(c)) is not None]
    return [chain_view(chain, decode) for chain in build.chains], excluded


def collapse_images(spans: Sequence[TokenSpan], first_image: int = 1) -> list[TokenSpan]:
    """Each run of one placeholder token with one mask as a single span, numbered from `first_image`."""
    out: list[TokenSpan] = []
    run: list[TokenSpan] = []
    image = first_image

    def flush() -> None:
        nonlocal image
        if len(run) > 1:
            lps = [t.logprob for t in run if t.logprob is not None]
            mean = sum(lps) / len(lps) if lps else None
            out.append(
                TokenSpan(
                    run[0].text,
                    run[0].token_id,
                    run[0].trained,
                    mean,
                    _heat(mean) if mean is not None else 0.0,
                    len(run),
                    f"image {image} · {len(run)} tokens",
                )
            )
            image += 1
        else:
            out.extend(run)
        run.clear()

    for span in spans:
        if run and (span.token_id != run[0].token_id or span.trained != run[0].trained):
            flush()
        if span.text in PLACEHOLDERS:
            run.append(span)
        else:
            flush()
            out.append(span)
    flush()
    return out


def chain_view(chain: Chain, decode: Decoder) -> ChainView:
    tokens, plen, mask, lps = chain.tokens, chain.prompt_len, chain.mask, chain.logprobs
    full_prompt = collapse_images([TokenSpan(decode(t), t, False, None, 0.0) for t in tokens[:plen]])
    shown = full_prompt[-PROMPT_TAIL:]
    start = sum(t.count for t in full_prompt[: len(full_prompt) - len(shown)])
    prompt = tuple(shown)
    images_before = sum(1 for t in full_prompt if t.count > 1)
    response = tuple(
        collapse_images(
            [
                TokenSpan(decode(t), t, bool(m), lp if m else None, _heat(lp) if m else 0.0)
                for t, m, lp in zip(tokens[plen:], mask, lps, strict=False)
            ],
            images_before + 1,
        )
    )
    trained = [lp for m, lp in zip(mask, lps, strict=False) if m]
    event = chain.started_by
    detail = ""
    if event is not None:
        detail = (
            f"at call {event.call_index}: prompt {event.prompt_len} tokens, closest chain {event.chain_len}, "
            "common prefix "
            f"{event.common_prefix}{', diverged on a sampled token' if event.at_sampled else ''}"
        )
    return ChainView(
        chain.index,
        chain.agent,
        tuple(chain.call_indices),
        event.label if event is not None else None,
        detail,
        plen,
        start,
        prompt,
        response,
        len(trained),
        sum(trained) / len(trained) if trained else None,
        chain.version_min,
        chain.version_max,
    )
