"""Exact and near-duplicate removal, stdlib only.

Exact: sha256 of the normalised instruction plus the gold actions (tools and arguments). Near: two
tasks with the same gold tool signature whose instructions' word-trigram MinHash estimates a Jaccard
similarity ≥ `threshold` (64 permutations, LSH in 16 bands of 4 rows, so only bucket-mates are
compared). ClawGym dedups by embedding cosine ≥ 0.90; shingles need no model and run on CPU.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

__all__ = ["Deduper", "exact_key", "minhash", "shingles"]

_PERMS = 64
_BANDS = 16
_PRIME = (1 << 61) - 1
_COEFFS = [
    (
        int.from_bytes(hashlib.sha256(f"a{i}".encode()).digest()[:8], "big") % _PRIME | 1,
        int.from_bytes(hashlib.sha256(f"b{i}".encode()).digest()[:8], "big") % _PRIME,
    )
    for i in range(_PERMS)
]


def _norm(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def shingles(text: str, k: int = 3) -> set[str]:
    words = _norm(text)
    return {" ".join(words[i : i + k]) for i in range(max(1, len(words) - k + 1))}


def minhash(items: set[str]) -> tuple[int, ...]:
    hashes = [int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "big") for s in items] or [
        0
    ]
    return tuple(min((a * h + b) % _PRIME for h in hashes) for a, b in _COEFFS)


def exact_key(instruction: str, actions: Sequence[tuple[str, Any]]) -> str:
    body = json.dumps([" ".join(_norm(instruction)), list(actions)], sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


class Deduper:
    """`seen(...)` says "exact_dup", "near_dup" or None (then remembers the task)."""

    def __init__(self, threshold: float = 0.8) -> None:
        self.threshold = threshold
        self.exact: set[str] = set()
        self.buckets: dict[tuple[Any, ...], list[tuple[int, ...]]] = defaultdict(list)

    def seen(self, instruction: str, actions: Sequence[tuple[str, Any]]) -> str | None:
        key = exact_key(instruction, actions)
        if key in self.exact:
            return "exact_dup"
        signature = tuple(tool for tool, _ in actions)
        sig = minhash(shingles(instruction))
        rows = _PERMS // _BANDS
        bands = [(signature, b, sig[b * rows : (b + 1) * rows]) for b in range(_BANDS)]
        for band in bands:
            for other in self.buckets.get(band, ()):
                if sum(x == y for x, y in zip(sig, other, strict=True)) / _PERMS >= self.threshold:
                    return "near_dup"
        self.exact.add(key)
        for band in bands:
            self.buckets[band].append(sig)
        return None
