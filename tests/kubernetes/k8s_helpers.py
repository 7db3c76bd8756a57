"""Constants and markers shared by the Kubernetes tests (imported by name, unlike conftest)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from openforgerl.sandbox.kubernetes import KubernetesConfig

NAMESPACE = "rl"
needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None or shutil.which("nsenter") is None,
    reason="the fake kubelet runs Pods with bubblewrap + nsenter",
)
FAST = KubernetesConfig(
    namespace=NAMESPACE,
    boot_timeout_s=20.0,
    retry_base_s=0.01,
    retry_max_s=0.05,
    janitor_interval_s=3600.0,
    boots_per_second=1000.0,
    boot_burst=1000,
    exec_grace_s=10.0,
)


def alive_pids(pids: list[int]) -> list[int]:
    return [pid for pid in pids if Path(f"/proc/{pid}").exists()]
