"""The C-speed token comparisons agree with the obvious definitions."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from openforgerl.trajectory.tokens import common_prefix_len, extends

ids = st.lists(st.integers(0, 3), max_size=1200)


def _naive_cpl(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@given(ids, ids, st.integers(0, 1200))
def test_common_prefix_len(a: list[int], b: list[int], shared: int) -> None:
    b = a[:shared] + b  # long shared prefixes too, not only random ones
    assert common_prefix_len(a, b) == _naive_cpl(a, b) == common_prefix_len(b, a)


@given(ids, ids)
def test_extends(a: list[int], b: list[int]) -> None:
    assert extends(a, b) == (a[: len(b)] == b and len(b) <= len(a))
    assert extends(a + b, a)
