"""`pods/{name}/exec` over a websocket, in the `channel.k8s.io` framing (v5 and v4).

Every binary frame starts with a channel byte: 0 stdin, 1 stdout, 2 stderr, 3 error/status, 4 resize.
v5 adds a close frame for stdin (`0xff 0x00`). The last frame on channel 3 is a `Status`: `Success`,
or `Failure` with reason `NonZeroExitCode` and a cause `{"reason": "ExitCode", "message": "<n>"}` —
how clients learn the exit code. Injected fault `exec_disconnects`: the socket is closed after the
command started and before the status frame, and the command is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal

from aiohttp import WSMsgType, web

from openforgerl.testing.fake_kube.bwrap import Container
from openforgerl.testing.fake_kube.faults import Faults
from openforgerl.testing.fake_kube.kubelet import Kubelet
from openforgerl.testing.fake_kube.store import ApiStatus, Store

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
CLOSE = 255
FRAME_BYTES = (
    32 * 1024
)  # a kubelet copies streams with 32 KiB buffers; clients cap frames (lightkube: 64 KiB)


def status_frame(code: int, argv: list[str]) -> bytes:
    if code == 0:
        body: dict[str, object] = {"metadata": {}, "status": "Success"}
    else:
        body = {
            "metadata": {},
            "status": "Failure",
            "reason": "NonZeroExitCode",
            "message": f"command terminated with non-zero exit code: error executing command {argv}, "
            f"exit code {code}",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
        }
    return bytes([ERROR]) + json.dumps(body).encode()


def flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("true", "1")


class ExecHandler:
    def __init__(self, store: Store, kubelet: Kubelet, faults: Faults) -> None:
        self.store, self.kubelet, self.faults = store, kubelet, faults

    def _container(self, ns: str, name: str, ctr: str | None) -> Container:  # raises the API's own errors
        pod = self.store.get("pods", ns, name)
        names = [c["name"] for c in pod["spec"]["containers"]]
        if ctr is None and len(names) > 1:
            raise ApiStatus(
                400,
                "BadRequest",
                f"a container name must be specified for pod {name}, choose one of: {names}",
            )
        ctr = ctr or names[0]
        if ctr not in names:
            raise ApiStatus(400, "BadRequest", f"container {ctr} is not valid for pod {name}")
        rt = self.kubelet.pods.get((ns, name))
        if (
            rt is None
            or ctr not in rt.containers
            or ctr in rt.ended
            or rt.terminated
            or pod["status"].get("phase") != "Running"
        ):
            raise ApiStatus(400, "BadRequest", f"container {ctr} not running in pod {name}")
        return rt.containers[ctr]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        ns, name = request.match_info["namespace"], request.match_info["name"]
        argv = request.query.getall("command", [])
        container = self._container(ns, name, request.query.get("container"))
        if not argv:
            raise ApiStatus(400, "BadRequest", "you must specify at least 1 command")
        ws = web.WebSocketResponse(protocols=PROTOCOLS, max_msg_size=64 * 1024 * 1024)
        await ws.prepare(request)
        proc = await container.exec(argv, stdin=flag(request, "stdin"))
        if self.faults.take("exec_disconnects"):
            await self._drop(ws, proc)
            return ws
        code = await self._relay(ws, proc)
        if not ws.closed:
            await ws.send_bytes(status_frame(code, argv))
            await ws.close()
        return ws

    async def _drop(self, ws: web.WebSocketResponse, proc: asyncio.subprocess.Process) -> None:
        kill_group(proc)
        await proc.wait()
        await ws.close(code=1011, message=b"stream reset")

    async def _relay(self, ws: web.WebSocketResponse, proc: asyncio.subprocess.Process) -> int:
        v5 = ws.ws_protocol == PROTOCOLS[0]
        pumps = [
            asyncio.create_task(self._pipe_out(ws, proc.stdout, STDOUT)),
            asyncio.create_task(self._pipe_out(ws, proc.stderr, STDERR)),
        ]
        reader = asyncio.create_task(self._read_client(ws, proc, v5))
        try:
            await asyncio.gather(*pumps)
            code = await proc.wait()
            return 128 - code if code < 0 else code  # killed by signal n: 128 + n, as runc reports
        finally:
            reader.cancel()
            if proc.returncode is None:  # client went away: kill what it started
                kill_group(proc)
                await proc.wait()

    @staticmethod
    async def _pipe_out(ws: web.WebSocketResponse, stream: asyncio.StreamReader | None, ch: int) -> None:
        while stream is not None and (chunk := await stream.read(FRAME_BYTES)):
            if not ws.closed:
                await ws.send_bytes(bytes([ch]) + chunk)

    @staticmethod
    async def _read_client(ws: web.WebSocketResponse, proc: asyncio.subprocess.Process, v5: bool) -> None:
        """Frames from the client: stdin data, stdin close (v5), resize (ignored)."""
        async for msg in ws:
            if msg.type != WSMsgType.BINARY or not msg.data or proc.stdin is None:
                continue
            ch, data = msg.data[0], msg.data[1:]
            if ch == STDIN and data:
                proc.stdin.write(data)
                with contextlib.suppress(ConnectionError):
                    await proc.stdin.drain()
            elif ch == CLOSE and v5 and data[:1] == bytes([STDIN]):
                proc.stdin.close()
        if proc.stdin is not None and proc.returncode is None:
            proc.stdin.close()  # client closed its side: EOF
            if proc.returncode is None:
                kill_group(proc)


def kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
