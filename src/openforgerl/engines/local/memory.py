"""Admission by memory: how much a sequence will need, and whether the running batch has room for it.

The engine holds every running sequence's keys and values in one left-padded cache (`batch.BatchKV`), so a
batch of B rows costs B × the longest row, and a prefill adds its own working set on top (activations,
and with eager attention the [heads, L, L] score matrix). Nothing else bounded it: three concurrent
~8k-token prompts on SmolLM2 took the process past 17 GB and the kernel killed it, turning every rollout
on it into infra. So the core admits a waiting sequence only when the estimate for the batch with it,
at the length it may reach (prompt + max_tokens), fits the budget; the rest wait in order; a request
that cannot fit even alone is refused with a 400 before it is queued.

The estimate comes from the model's config (layers, heads, KV heads, head dim, widths, vocab, dtype).
Measured peaks of one 8000-token prefill (RSS above the loaded model, 1 thread):
- tiny (2 layers, 4 heads): eager attention 2330 MiB, SDPA 192 MiB, SDPA + logits of the last position
  only 182 MiB; the estimate (its KV + `prefill_bytes`) is 180 MiB.
- SmolLM2-135M's shape (30 layers, 9 heads / 3 KV heads, vocab 49152): SDPA 1837 MiB, of it 1.5 GiB the
  [L, vocab] logits no one reads; with the last position only 497 MiB; the estimate (KV + working set)
  is 686 MiB. Through the engine (one 8000-token prompt, 8 tokens out, weights paged in first): peak RSS
  +2377 MiB before keeping only the last logits and not holding the batch KV twice, +1001 MiB after.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_FRACTION", "MemoryBudget", "ModelShape", "available_memory", "parse_size"]

DEFAULT_FRACTION = 0.5
"""Without --memory-budget: this share of the memory available at start (the rest is the tokenizer, the
HTTP buffers, the allocator's slack and whatever else shares the machine)."""
SAMPLING_FLOATS_PER_ROW = 4
"""Per decoded row: the logits row, its softmax, its log-softmax and the top-k scratch (vocab floats each)."""


@dataclass(frozen=True)
class ModelShape:
    """What the memory of a forward depends on, read from a transformers config."""

    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden: int
    intermediate: int
    vocab: int
    dtype_bytes: int
    eager_attention: bool = False

    @classmethod
    def of(cls, config: Any, dtype_bytes: int, attn_implementation: str = "sdpa") -> ModelShape:
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        heads = int(text.num_attention_heads)
        hidden = int(text.hidden_size)
        return cls(
            layers=int(text.num_hidden_layers),
            heads=heads,
            kv_heads=int(getattr(text, "num_key_value_heads", None) or heads),
            head_dim=int(getattr(text, "head_dim", None) or hidden // heads),
            hidden=hidden,
            intermediate=int(getattr(text, "intermediate_size", None) or 4 * hidden),
            vocab=int(text.vocab_size),
            dtype_bytes=dtype_bytes,
            eager_attention=attn_implementation == "eager",
        )

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    def prefill_bytes(self, tokens: int) -> int:
        """The transient working set of one prefill forward of `tokens` beyond its own KV: per token the
        residual stream and norms, q/k/v and their rotated copies, the MLP's gate/up/act; with eager
        attention also the fp32 scores and their softmax; one float32 logits row (the engine keeps only
        the last position's)."""
        per_token = (
            6 * self.hidden + 3 * self.intermediate + 3 * (self.heads + 2 * self.kv_heads) * self.head_dim
        )
        scores = 2 * self.heads * tokens * tokens * 4 if self.eager_attention else 0
        return tokens * per_token * self.dtype_bytes + scores + self.vocab * 4

    def batch_bytes(self, lengths: Sequence[int]) -> int:
        """A batch whose rows reach `lengths`: left-padded KV (every row as long as the longest) plus one
        layer of it while a step's concatenation copies that layer, plus the sampling rows."""
        if not lengths:
            return 0
        kv = len(lengths) * max(lengths) * self.kv_bytes_per_token
        return kv + kv // self.layers + len(lengths) * self.vocab * 4 * SAMPLING_FLOATS_PER_ROW

    def need(self, running: Sequence[int], prompt: int, total: int) -> int:
        """Peak bytes while a sequence of `prompt` tokens (growing to `total`) prefills and then decodes
        beside `running` (their lengths when done)."""
        return (
            self.batch_bytes([*running, total])
            + prompt * self.kv_bytes_per_token
            + self.prefill_bytes(prompt)
        )


@dataclass(frozen=True)
class MemoryBudget:
    """The bytes the engine may spend on sequences, and where that number came from."""

    shape: ModelShape
    limit: int
    source: str  # "--memory-budget 4GiB" or "half of the 9.6 GiB available at start"

    def fits(self, running: Sequence[int], prompt: int, total: int) -> bool:
        return self.shape.need(running, prompt, total) <= self.limit

    def refusal(self, prompt: int, total: int) -> str | None:
        """Why a request can never run (alone it needs more than the budget), or None."""
        need = self.shape.need([], prompt, total)
        if need <= self.limit:
            return None
        return (
            f"this request needs ~{_mib(need)} of KV cache and working memory ({prompt} prompt tokens, up to "
            f"{total - prompt} generated), over the engine's memory budget of {_mib(self.limit)}; lower "
            "max_tokens or shorten the prompt"
        )

    def full_context(self, max_model_len: int, cap: int) -> int:
        """How many full-context sequences fit at once, counting up to `cap` (0: not even one)."""
        n = 0
        while n < cap and self.shape.need([max_model_len] * n, max_model_len, max_model_len) <= self.limit:
            n += 1
        return n

    def startup_line(self, max_model_len: int, max_batch: int) -> str:
        """The one line the engine logs at start: the limit, where it came from, and what it means."""
        kv = self.shape.batch_bytes([max_model_len])
        prefill = self.shape.need([], max_model_len, max_model_len) - kv
        head = (
            f"memory budget {_mib(self.limit)} ({self.source}): "
            f"a full-context sequence ({max_model_len} tokens) "
            f"keeps ~{_mib(kv)} of KV cache, its prefill ~{_mib(prefill)} more while it runs"
        )
        n = self.full_context(max_model_len, max_batch)
        if n == 0:
            return (
                f"{head}, more than the budget: requests that long "
                "get a 400; lower --max-model-len or raise it"
            )
        capped = " (--max-batch)" if n == max_batch else ""
        return f"{head}, so up to {n} run at once{capped}; the rest wait in order"


def _mib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "kib": 2**10,
    "m": 10**6,
    "mb": 10**6,
    "mib": 2**20,
    "g": 10**9,
    "gb": 10**9,
    "gib": 2**30,
    "t": 10**12,
    "tb": 10**12,
    "tib": 2**40,
}


def parse_size(text: str) -> int:
    """`4GiB`, `512MiB`, `1.5G`, `2000000` (bytes) → bytes; ValueError naming the accepted forms."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS or float(m.group(1)) <= 0:
        raise ValueError(f"--memory-budget {text!r}: expected a size such as 4GiB, 512MiB or 1.5G")
    return int(float(m.group(1)) * _UNITS[unit])


def _meminfo_available(meminfo: Path) -> int | None:
    try:
        text = meminfo.read_text()
    except OSError:
        return None
    m = re.search(r"^MemAvailable:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) * 1024 if m else None


def _cgroup_room(root: Path) -> int | None:
    """cgroup v2: memory.max - memory.current of this process's group (a container's limit), if any."""
    try:
        rel = next(
            line.split("::", 1)[1]
            for line in Path("/proc/self/cgroup").read_text().splitlines()
            if line.startswith("0::")
        )
        group = root / rel.strip().lstrip("/")
        limit = (group / "memory.max").read_text().strip()
        if limit == "max":
            return None
        return int(limit) - int((group / "memory.current").read_text())
    except (OSError, StopIteration, ValueError):
        return None


def available_memory(
    meminfo: Path = Path("/proc/meminfo"), cgroup_root: Path = Path("/sys/fs/cgroup")
) -> int | None:
    """Bytes this process could still take: the smaller of the kernel's MemAvailable and its cgroup's room."""
    found = [n for n in (_meminfo_available(meminfo), _cgroup_room(cgroup_root)) if n is not None]
    if not found and hasattr(os, "sysconf"):
        try:
            return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError):
            return None
    return min(found) if found else None


def budget_for(model: Any, dtype_bytes: int, requested: str | int | None) -> MemoryBudget:
    """The budget of an engine on `model`: `requested` (bytes or a size string), else DEFAULT_FRACTION of
    the memory available now (after the weights are loaded)."""
    config = model.config
    shape = ModelShape.of(config, dtype_bytes, str(getattr(config, "_attn_implementation", None) or "sdpa"))
    if requested is not None:
        limit = requested if isinstance(requested, int) else parse_size(requested)
        return MemoryBudget(shape, limit, f"--memory-budget {requested}")
    avail = available_memory()
    if avail is None:  # no way to tell: a budget that admits anything, said so at start
        return MemoryBudget(shape, 2**62, "unbounded: available memory unknown; set --memory-budget")
    return MemoryBudget(
        shape,
        int(avail * DEFAULT_FRACTION),
        f"{DEFAULT_FRACTION:.0%} of the {_mib(avail)} available at start; --memory-budget to change",
    )
