"""The thin contract between the backend and a Kubernetes client library.

Objects cross it as plain dicts (the JSON the API server speaks), errors as `KubeApiError` with the
HTTP status code, so the backend's retry and fault logic never sees a library type. `lightkube_api`
implements it; a test or another library (kubernetes-asyncio) can implement it too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

Obj = dict[str, Any]
RETRYABLE = frozenset({0, 429, 500, 502, 503, 504})


class KubeApiError(Exception):
    """An API call failed; `code` is the HTTP status (0 when the server could not be reached)."""

    def __init__(self, code: int, reason: str = "", message: str = "") -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code, self.reason, self.message = code, reason, message

    @property
    def retryable(self) -> bool:
        return self.code in RETRYABLE


class WatchExpired(KubeApiError):
    """410 Gone: the resourceVersion we resumed from was compacted away; re-list and start over."""

    def __init__(self, message: str = "too old resource version") -> None:
        super().__init__(410, "Expired", message)


class ExecTimedOut(Exception):
    """The exec stream gave no exit status within the client-side wait."""


@dataclass(frozen=True)
class ExecOutput:
    exit_code: int
    stdout: bytes
    stderr: bytes


class KubeApi(Protocol):
    async def create(self, obj: Obj) -> Obj:
        """Create any object; raises `KubeApiError` (409 when it already exists)."""
        ...

    async def get_pod(self, namespace: str, name: str) -> Obj | None: ...

    async def list_pods(self, namespace: str, labels: Mapping[str, str]) -> tuple[list[Obj], str]:
        """The Pods matching `labels` and the list's resourceVersion (to start a watch from)."""
        ...

    def watch_pods(
        self, namespace: str, labels: Mapping[str, str], resource_version: str
    ) -> AsyncIterator[tuple[str, Obj]]:
        """(ADDED|MODIFIED|DELETED, pod) events after `resource_version`; raises `WatchExpired`."""
        ...

    async def delete(self, kind: str, namespace: str, name: str, grace_s: int = 0) -> bool:
        """Delete; False when it was already gone."""
        ...

    async def exec(
        self,
        namespace: str,
        name: str,
        container: str,
        argv: Sequence[str],
        stdin: bytes,
        timeout_s: float | None,
    ) -> ExecOutput:
        """Run argv in the container; raises `ExecChannelLost` or `ExecTimedOut`."""
        ...

    async def logs(self, namespace: str, name: str, container: str) -> bytes: ...

    async def aclose(self) -> None: ...
