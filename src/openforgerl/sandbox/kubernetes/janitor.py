"""Reaps sandbox Pods nobody owns any more: leftovers of a crashed run, deletes that exhausted
their retries, creations whose answer was lost. Selection is by our labels, never by name pattern.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from openforgerl.sandbox.kubernetes.client import KubeApi, KubeApiError, Obj


def age_s(pod: Obj, now: datetime) -> float:
    stamp = pod.get("metadata", {}).get("creationTimestamp")
    if not stamp:
        return 0.0
    created = (
        stamp if isinstance(stamp, datetime) else datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    )
    return (now - created).total_seconds()


def is_stale(pod: Obj, now: datetime, min_age_s: float, owned: Callable[[str], bool]) -> bool:
    return not owned(pod["metadata"]["name"]) and age_s(pod, now) >= min_age_s


def is_finished(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


async def delete_all(api: KubeApi, namespace: str, pods: list[Obj]) -> list[str]:
    reaped = []
    for pod in pods:
        name = pod["metadata"]["name"]
        try:
            await api.delete("Pod", namespace, name)
            reaped.append(name)
        except KubeApiError:
            continue  # the next reap pass tries it again
    return reaped


async def reap(
    api: KubeApi,
    namespace: str,
    labels: Mapping[str, str],
    owned: Callable[[str], bool],
    min_age_s: float,
    now: datetime | None = None,
) -> list[str]:
    """Delete every labelled Pod that is not `owned` and at least `min_age_s` old; returns names."""
    now = now or datetime.now(UTC)
    pods, _ = await api.list_pods(namespace, labels)
    return await delete_all(api, namespace, [p for p in pods if is_stale(p, now, min_age_s, owned)])


async def reap_finished(
    api: KubeApi, namespace: str, labels: Mapping[str, str], min_age_s: float, now: datetime | None = None
) -> list[str]:
    """Delete finished Pods (any backend id: nobody can use them) at least `min_age_s` old."""
    now = now or datetime.now(UTC)
    pods, _ = await api.list_pods(namespace, labels)
    done = [p for p in pods if is_finished(p) and age_s(p, now) >= min_age_s]
    return await delete_all(api, namespace, done)
