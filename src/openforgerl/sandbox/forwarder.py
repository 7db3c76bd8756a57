"""A TCP forwarder from a socket inside a sandbox's namespace to the gateway on the host.

The listening socket lives in the sandbox's network namespace (see `netns.py`), but is served by
the orchestrator's event loop in the host namespace, so each accepted connection is piped to
exactly one fixed host address: the gateway. There is no route, address or helper process inside
the sandbox, so nothing but that one port is reachable from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket

__all__ = ["Forwarder", "open_forwarder"]

_CHUNK = 64 * 1024


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy bytes until EOF, then half-close so the other side sees the end (SSE friendly)."""
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()


class Forwarder:
    """Serves one listening socket; `aclose` stops it and cuts every live connection."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[None]] = set()

    async def start(self, sock: socket.socket) -> None:
        self._server = await asyncio.start_server(self._accept, sock=sock)

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.ensure_future(self._serve(reader, writer))
        self._conns.add(task)
        task.add_done_callback(self._conns.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        try:
            await asyncio.gather(_pipe(reader, up_w), _pipe(up_r, writer))
        finally:
            up_w.close()
            writer.close()

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._conns):
            task.cancel()
        for task in list(self._conns):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def open_forwarder(sock: socket.socket, target: tuple[str, int]) -> Forwarder:
    """Forward every connection accepted on `sock` to `target` (host, port)."""
    fwd = Forwarder(target)
    await fwd.start(sock)
    return fwd
