"""Fault injection for the fake API server: what a real cluster does to a client on a bad day.

Counters are consumed one per matching request. Set them from Python (`server.faults`) when the
server runs in-process, or over HTTP with `POST /__fault` and a JSON body of the same field names,
e.g. `{"create_errors": [429, 503]}` or `{"stuck_pending": 1}`. Pod-level faults (OOMKilled,
Evicted) act on a running Pod: `POST /__fault/namespaces/{ns}/pods/{name}` with `{"action": "oom"}` (and
`"container": name` to OOM-kill that container alone). `POST /__fault/reset-watches` (or
`server.reset_watches()`) sends 410 to every watch open right now.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


@dataclass
class Faults:
    create_errors: list[int] = field(default_factory=list)  # next pod creates answer these codes
    delete_errors: list[int] = field(default_factory=list)  # next pod deletes answer these codes
    create_conflicts: int = 0  # next creates store the pod and still answer 409 (lost first answer)
    stuck_pending: int = 0  # next pods stay Pending, waiting on ErrImagePull
    unschedulable: int = 0  # next pods stay Pending, PodScheduled=False reason Unschedulable
    exec_disconnects: int = 0  # next execs drop the websocket before the exit status
    watch_resets: int = 0  # next watch streams get a 410 ERROR event mid-stream (and the log compacts)
    watch_drops: int = 0  # next watch streams are cut without any event

    def take(self, name: str) -> bool:
        """Consume one unit of a counter fault; True if it fired."""
        left: int = getattr(self, name)  # every counter fault is an int field
        if left > 0:
            setattr(self, name, left - 1)
        return left > 0

    def take_create_error(self) -> int | None:
        return self.create_errors.pop(0) if self.create_errors else None

    def take_delete_error(self) -> int | None:
        return self.delete_errors.pop(0) if self.delete_errors else None

    def update(self, body: dict[str, Any]) -> None:
        known = {f.name for f in fields(self)}
        unknown = set(body) - known
        if unknown:
            raise ValueError(f"unknown faults: {sorted(unknown)}")
        for key, value in body.items():
            setattr(self, key, list(value) if key.endswith("_errors") else int(value))
