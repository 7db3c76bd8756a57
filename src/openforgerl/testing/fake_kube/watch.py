"""`?watch=true` on a collection: a chunked stream of JSON lines, one watch event per line.

Semantics kept from the real server: no `resourceVersion` (or "0") starts with synthetic ADDED
events for what exists; a version still in the log resumes exactly after it; a compacted version
gets a `410 Expired` ERROR event (HTTP 200, as real servers do for watches). `timeoutSeconds` ends
the stream cleanly; `allowWatchBookmarks=true` adds BOOKMARK events. Injected faults: `watch_resets`
(an ERROR 410 mid-stream after the backlog, plus a log compaction) and `watch_drops` (cut the
connection without a word).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable

from aiohttp import web

from openforgerl.testing.fake_kube.faults import Faults
from openforgerl.testing.fake_kube.store import EXPIRED, ApiStatus, Event, Obj, Store

BOOKMARK_EVERY_S = 5.0
MAX_WATCH_S = 1800.0


def is_watch(request: web.Request) -> bool:
    return request.query.get("watch", "").lower() in ("true", "1")


def event_line(type_: str, obj: Obj) -> bytes:
    return json.dumps({"type": type_, "object": obj}, separators=(",", ":")).encode() + b"\n"


def since(request: web.Request) -> int | None:
    rv = request.query.get("resourceVersion", "")
    return None if rv in ("", "0") else int(rv)


class WatchStream:
    def __init__(self, store: Store, faults: Faults, kind: str, api_version: str) -> None:
        self.store, self.faults, self.kind, self.api_version = store, faults, kind, api_version

    async def serve(
        self, request: web.Request, plural: str, namespace: str | None, matches: Callable[[Obj], bool]
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        try:
            sub, backlog = self.store.subscribe(plural, namespace, since(request), matches)
        except ApiStatus as e:
            await resp.write(event_line("ERROR", e.body()))
            return resp
        try:
            await self._pump(request, resp, backlog, sub.queue)
        finally:
            self.store.unsubscribe(sub)
        return resp

    async def _pump(
        self,
        request: web.Request,
        resp: web.StreamResponse,
        backlog: list[Event],
        queue: asyncio.Queue[Event],
    ) -> None:
        for event in backlog:
            await resp.write(event_line(event.type, event.obj))
        if self.faults.take("watch_drops"):
            if request.transport is not None:
                request.transport.abort()
            return
        if self.faults.take("watch_resets"):
            self.store.compact()
        timeout = float(request.query.get("timeoutSeconds") or MAX_WATCH_S)
        bookmarks = request.query.get("allowWatchBookmarks", "").lower() == "true"
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                await self._live(resp, queue, bookmarks)

    async def _live(self, resp: web.StreamResponse, queue: asyncio.Queue[Event], bookmarks: bool) -> None:
        while True:
            try:
                event = await asyncio.wait_for(queue.get(), BOOKMARK_EVERY_S if bookmarks else None)
            except TimeoutError:
                await resp.write(event_line("BOOKMARK", self._bookmark()))
                continue
            if event.type == EXPIRED:
                gone = ApiStatus(410, "Expired", "too old resource version (compacted)")
                await resp.write(event_line("ERROR", gone.body()))
                return
            await resp.write(event_line(event.type, event.obj))

    def _bookmark(self) -> Obj:
        return {
            "kind": self.kind,
            "apiVersion": self.api_version,
            "metadata": {"resourceVersion": str(self.store.rv)},
        }
