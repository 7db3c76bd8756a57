"""Call records built in a test, handed to a `CallStore` as the gateway hands them."""

from __future__ import annotations

from openforgerl.records import CallRecord


def stored(record: CallRecord) -> tuple[str, int, bytes]:
    """`CallStore.append_call`'s arguments for `record`: its key and its stored JSON."""
    return record.rollout_id, record.index, record.stored_json()
