"""`KubeApi` over lightkube's async client (REST, watch and the v5/v4 websocket exec protocol).

lightkube ≥ 1.0 ships `AsyncClient.exec` with exit codes (the `ExitCode` cause of the status
frame on channel 3), stdin (v5 only) and a timeout, so no hand-written websocket client is needed.
Library errors are mapped here, once: `ApiError`/`HTTPStatusError` to `KubeApiError` by status code,
transport errors to code 0, a broken exec stream to `ExecChannelLost`.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx2
from lightkube import ApiError, AsyncClient, KubeConfig, codecs
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Pod, Service
from lightkube.resources.networking_v1 import NetworkPolicy
from lightkube.types import on_error_raise

from openforgerl.sandbox.kubernetes.client import ExecOutput, ExecTimedOut, KubeApiError, Obj, WatchExpired
from openforgerl.sandbox.kubernetes.errors import ExecChannelLost

KINDS: dict[str, Any] = {
    "Pod": Pod,
    "Service": Service,
    "Deployment": Deployment,
    "NetworkPolicy": NetworkPolicy,
}
WATCH_SERVER_TIMEOUT_S = 290


def api_error(exc: Exception) -> KubeApiError:
    """One mapping from whatever lightkube/httpx2 raised to our error (by status code)."""
    if isinstance(exc, ApiError):
        st = exc.status
        code = st.code or (exc.response.status_code if exc.response is not None else 0)
        if code == 410:
            return WatchExpired(st.message or "")
        return KubeApiError(code, st.reason or "", st.message or "")
    if isinstance(exc, httpx2.HTTPStatusError):
        code = exc.response.status_code
        return WatchExpired(exc.response.text) if code == 410 else KubeApiError(code, "", exc.response.text)
    return KubeApiError(0, type(exc).__name__, str(exc))


def server_config(url: str) -> KubeConfig:
    """A kubeconfig for a bare URL with an anonymous user (lightkube's `from_server` has no user)."""
    return KubeConfig.from_dict(
        {
            "clusters": [{"name": "c", "cluster": {"server": url}}],
            "users": [{"name": "u", "user": {}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "c",
        }
    )


class LightkubeApi:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self.server = ""  # the API server's URL, for error messages

    @classmethod
    def from_kubeconfig(
        cls,
        path: str | Path | None = None,
        *,
        server: str | None = None,
        namespace: str | None = None,
        timeout_s: float = 30.0,
    ) -> LightkubeApi:
        """From a kubeconfig file, a bare server URL (tests), or the usual discovery when both are None."""
        config = server_config(server) if server else (KubeConfig.from_file(path) if path else None)
        timeout = httpx2.Timeout(timeout_s)
        api = cls(AsyncClient(config=config, namespace=namespace, timeout=timeout, trust_env=config is None))
        # what lightkube itself discovers when config is None: $KUBECONFIG, ~/.kube/config, in-cluster
        single = (config or KubeConfig.from_env()).get()
        api.server = single.cluster.server if single is not None else ""
        return api

    async def create(self, obj: Obj) -> Obj:
        try:
            created = await self._client.create(codecs.from_dict(obj))
        except (ApiError, httpx2.HTTPError) as e:
            raise api_error(e) from e
        # lightkube's GenericResource.to_dict (one of the resources from_dict may build) has no annotations
        out: Obj = created.to_dict()  # type: ignore[no-untyped-call]
        return out

    async def get_pod(self, namespace: str, name: str) -> Obj | None:
        try:
            return (await self._client.get(Pod, name, namespace=namespace)).to_dict()
        except (ApiError, httpx2.HTTPError) as e:
            err = api_error(e)
            if err.code == 404:
                return None
            raise err from e

    async def list_pods(self, namespace: str, labels: Mapping[str, str]) -> tuple[list[Obj], str]:
        try:
            listing = self._client.list(Pod, namespace=namespace, labels=dict(labels))
            pods = [p.to_dict() async for p in listing]
            return pods, listing.resourceVersion
        except (ApiError, httpx2.HTTPError) as e:
            raise api_error(e) from e

    async def watch_pods(
        self, namespace: str, labels: Mapping[str, str], resource_version: str
    ) -> AsyncIterator[tuple[str, Obj]]:
        stream = self._client.watch(
            Pod,
            namespace=namespace,
            labels=dict(labels),
            resource_version=resource_version,
            server_timeout=WATCH_SERVER_TIMEOUT_S,
            on_error=on_error_raise,
        )
        try:
            async for kind, pod in stream:
                yield kind, pod.to_dict()
        except (ApiError, httpx2.HTTPError) as e:
            raise api_error(e) from e

    async def delete(self, kind: str, namespace: str, name: str, grace_s: int = 0) -> bool:
        try:
            await self._client.delete(KINDS[kind], name, namespace=namespace, grace_period=grace_s)
        except (ApiError, httpx2.HTTPError) as e:
            err = api_error(e)
            if err.code == 404:
                return False
            raise err from e
        return True

    async def exec(
        self,
        namespace: str,
        name: str,
        container: str,
        argv: Sequence[str],
        stdin: bytes,
        timeout_s: float | None,
    ) -> ExecOutput:
        try:
            res = await self._client.exec(
                name,
                namespace=namespace,
                container=container,
                command=list(argv),
                stdin=io.BytesIO(stdin),
                stdout=True,
                stderr=True,
                decode=None,
                timeout=timeout_s,
            )
        except httpx2.TimeoutException as e:
            raise ExecTimedOut(str(e)) from e
        except Exception as e:  # any other end of the stream without an exit status
            raise ExecChannelLost(f"exec in pod {name} broke: {type(e).__name__}: {e}", pod=name) from e
        return ExecOutput(res.exit_code, _raw(res.stdout), _raw(res.stderr))

    async def logs(self, namespace: str, name: str, container: str) -> bytes:
        try:
            lines = [line async for line in self._client.log(name, namespace=namespace, container=container)]
        except (ApiError, httpx2.HTTPError) as e:
            raise api_error(e) from e
        return "".join(lines).encode()

    async def aclose(self) -> None:
        await self._client.close()


def _raw(captured: str | bytes | None) -> bytes:
    """A captured stream as bytes (`decode=None` asks lightkube for bytes; nothing captured is b"")."""
    if isinstance(captured, str):
        return captured.encode()
    return captured or b""
