"""The fake API server's storage: objects, resourceVersions, an event log and watch subscriptions.

Like etcd behind a real API server, every write bumps one global resourceVersion and appends an
event; watches resume from any version still in the log and get 410 Gone for versions that were
compacted away (`compact()` forces that, to test clients' re-list path). All methods are plain
synchronous code on the event loop, so a snapshot and a subscription taken together are atomic.
"""

from __future__ import annotations

import asyncio
import builtins  # `Store.list` shadows the builtin inside the class
import copy
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]
Key = tuple[str, str, str]  # (plural, namespace, name)
EXPIRED = "EXPIRED"  # pseudo event type telling open watches that their version is gone


class ApiStatus(Exception):
    """An error answer in Kubernetes' `Status` shape."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def body(self) -> Obj:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


@dataclass(frozen=True)
class Event:
    rv: int
    plural: str
    type: str
    obj: Obj


@dataclass(eq=False)
class Subscription:
    plural: str
    namespace: str | None
    matches: Callable[[Obj], bool]
    queue: asyncio.Queue[Event] = field(default_factory=asyncio.Queue)


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_selector(text: str | None) -> Callable[[Mapping[str, str]], bool]:
    """Label selector subset: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`."""
    terms = [t.strip() for t in _split_terms(text or "") if t.strip()]
    return lambda labels: all(_term_matches(t, labels) for t in terms)


def _split_terms(text: str) -> Iterator[str]:
    depth, start = 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            yield text[start:i]
            start = i + 1
    yield text[start:]


def _term_matches(term: str, labels: Mapping[str, str]) -> bool:
    for op in (" notin ", " in "):
        if op in term:
            key, values = term.split(op, 1)
            allowed = {v.strip() for v in values.strip().strip("()").split(",")}
            return (labels.get(key.strip()) in allowed) == (op == " in ")
    if "!=" in term:
        key, value = term.split("!=", 1)
        return labels.get(key.strip()) != value.strip()
    if "=" in term:
        key, value = term.replace("==", "=").split("=", 1)
        return labels.get(key.strip()) == value.strip()
    if term.startswith("!"):
        return term[1:].strip() not in labels
    return term in labels


def parse_field_selector(text: str | None) -> Callable[[Obj], bool]:
    """Field selector subset: `metadata.name=x`, `metadata.namespace=y`, `status.phase!=z`."""

    def value(obj: Obj, path: str) -> Any:
        for part in path.split("."):
            obj = obj.get(part, {}) if isinstance(obj, dict) else {}
        return obj if obj != {} else ""

    def ok(obj: Obj, term: str) -> bool:
        neg = "!=" in term
        path, want = term.replace("!=", "=").replace("==", "=").split("=", 1)
        return (str(value(obj, path.strip())) == want.strip()) != neg

    terms = [t for t in (text or "").split(",") if t.strip()]
    return lambda obj: all(ok(obj, t) for t in terms)


class Store:
    def __init__(self, history: int = 10_000) -> None:
        self.rv = 0
        self.objects: dict[Key, Obj] = {}
        self.log: deque[Event] = deque(maxlen=history)
        self.compacted_rv = 0
        self.subscriptions: set[Subscription] = set()
        self.on_create: list[Callable[[str, Obj], None]] = []

    def _emit(self, plural: str, type_: str, obj: Obj) -> None:
        event = Event(self.rv, plural, type_, copy.deepcopy(obj))
        if len(self.log) == self.log.maxlen:
            self.compacted_rv = self.log[0].rv
        self.log.append(event)
        for sub in list(self.subscriptions):
            if self._wants(sub, event):
                sub.queue.put_nowait(event)

    @staticmethod
    def _wants(sub: Subscription, event: Event) -> bool:
        ns = event.obj["metadata"].get("namespace")
        return event.plural == sub.plural and sub.namespace in (None, ns) and sub.matches(event.obj)

    def _bump(self, obj: Obj) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)

    def get(self, plural: str, namespace: str, name: str) -> Obj:
        try:
            return self.objects[(plural, namespace, name)]
        except KeyError:
            raise ApiStatus(404, "NotFound", f'{plural} "{name}" not found') from None

    def create(self, plural: str, namespace: str, obj: Obj) -> Obj:
        name = obj.get("metadata", {}).get("name")
        if not name:
            raise ApiStatus(422, "Invalid", "metadata.name: Required value")
        if (plural, namespace, name) in self.objects:
            raise ApiStatus(409, "AlreadyExists", f'{plural} "{name}" already exists')
        obj = copy.deepcopy(obj)
        meta = obj["metadata"]
        meta.update(namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp=now_iso(), generation=1)
        self._bump(obj)
        self.objects[(plural, namespace, name)] = obj
        self._emit(plural, "ADDED", obj)
        for hook in self.on_create:
            hook(plural, obj)
        return obj

    def update(self, plural: str, namespace: str, name: str, mutate: Callable[[Obj], None]) -> Obj:
        obj = self.get(plural, namespace, name)
        mutate(obj)
        self._bump(obj)
        self._emit(plural, "MODIFIED", obj)
        return obj

    def delete(self, plural: str, namespace: str, name: str) -> Obj:
        obj = self.objects.pop((plural, namespace, name), None)
        if obj is None:
            raise ApiStatus(404, "NotFound", f'{plural} "{name}" not found')
        self._bump(obj)
        self._emit(plural, "DELETED", obj)
        return obj

    def list(self, plural: str, namespace: str | None, matches: Callable[[Obj], bool]) -> list[Obj]:
        return [
            o
            for (p, ns, _), o in sorted(self.objects.items())
            if p == plural and namespace in (None, ns) and matches(o)
        ]

    def subscribe(
        self, plural: str, namespace: str | None, since_rv: int | None, matches: Callable[[Obj], bool]
    ) -> tuple[Subscription, builtins.list[Event]]:
        """Atomically: the logged events after `since_rv` plus a queue of all later ones.

        `since_rv=None` means "from now", with synthetic ADDED events for the current objects."""
        sub = Subscription(plural, namespace, matches)
        if since_rv is None:
            backlog = [
                Event(self.rv, plural, "ADDED", copy.deepcopy(o))
                for o in self.list(plural, namespace, matches)
            ]
        elif since_rv < self.compacted_rv:
            raise ApiStatus(410, "Expired", f"too old resource version: {since_rv} ({self.compacted_rv})")
        else:
            backlog = [e for e in self.log if e.rv > since_rv and self._wants(sub, e)]
        self.subscriptions.add(sub)
        return sub, backlog

    def unsubscribe(self, sub: Subscription) -> None:
        self.subscriptions.discard(sub)

    def compact(self) -> None:
        """Forget the whole event log (like etcd compaction) and expire every open watch."""
        self.compacted_rv = self.rv
        self.log.clear()
        for sub in list(self.subscriptions):
            sub.queue.put_nowait(Event(self.rv, sub.plural, EXPIRED, {}))
