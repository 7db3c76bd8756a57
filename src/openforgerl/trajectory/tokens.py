"""Token-sequence comparisons that stay in C.

Token ids arrive as Python lists (from JSON). Comparing a slice of two lists runs in C (one
compare per element, no Python-level loop), which is ~2x cheaper here than converting to
``array('i')`` first; so chains keep their tokens as lists and these helpers never iterate in Python
over more than one small block.
"""

from __future__ import annotations

from collections.abc import Sequence

_BLOCK = 256


def extends(prompt: Sequence[int], prefix: Sequence[int]) -> bool:
    """True when ``prompt`` starts with ``prefix`` exactly (cheap rejects first, then one C compare)."""
    n = len(prefix)
    if n > len(prompt):
        return False
    if n == 0:
        return True
    if prompt[n - 1] != prefix[n - 1] or prompt[0] != prefix[0] or prompt[n >> 1] != prefix[n >> 1]:
        return False
    return prompt[:n] == prefix


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix: bisection over slice compares (each runs in C, and only
    the not-yet-known span is compared, so about n element compares in log2(n) Python steps)."""
    lo, hi = 0, min(len(a), len(b))  # a[:lo] == b[:lo] is known; the answer is <= hi
    if a[:hi] == b[:hi]:
        return hi
    while hi - lo > _BLOCK:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo + _first_difference(a[lo:hi], b[lo:hi])


def _first_difference(a: Sequence[int], b: Sequence[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))
