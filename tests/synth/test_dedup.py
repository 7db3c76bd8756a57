"""Exact and near-duplicate removal."""

from __future__ import annotations

from openforgerl.synth.dedup import Deduper, minhash, shingles


def test_exact_near_and_distinct() -> None:
    d = Deduper(threshold=0.8)
    gold = [("todo_add", {"title": "Renew passport"})]
    long = (
        "Please add a todo item to my list so that I remember to renew the passport before the trip to Lisbon"
    )
    assert d.seen(long, gold) is None
    assert d.seen(long.upper() + " ", gold) == "exact_dup"  # normalised text, same gold
    assert d.seen(long + " soon", gold) == "near_dup"  # one word more, same tool signature
    assert d.seen(long + " soon", [("mail_send", {})]) is None  # another signature is another task
    assert (
        d.seen('Add a todo "Order printer toner".', [("todo_add", {"title": "Order printer toner"})]) is None
    )


def test_minhash_estimates_jaccard() -> None:
    a, b = (
        shingles("one two three four five six seven eight"),
        shingles("one two three four five six seven nine"),
    )
    true = len(a & b) / len(a | b)
    est = sum(x == y for x, y in zip(minhash(a), minhash(b), strict=True)) / 64
    assert abs(est - true) < 0.25
