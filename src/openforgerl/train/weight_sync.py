"""Pushing updated weights to the inference engine between training steps.

Protocol: pause the gateway (new calls wait, in-flight calls drain), push weights, resume the gateway
(which bumps and returns the policy version stamped on every later CallRecord). Pushers: in-process
for the embedded engine (`train/services.py`), HTTP reload-from-disk for vLLM
(`/collective_rpc reload_weights`, needs VLLM_SERVER_DEV_MODE=1) and SGLang (`/update_weights_from_disk`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import torch


class WeightSyncError(Exception):
    """The engine refused or failed a weight update."""


class WeightPusher(Protocol):
    async def push(self, model: torch.nn.Module, version: int) -> None: ...


class DiskReloadPusher:
    """Save to a shared directory, then ask each engine replica to reload from it."""

    def __init__(self, engine_urls: Sequence[str], weights_dir: Path, *, dialect: str = "vllm") -> None:
        if dialect not in ("vllm", "sglang"):
            raise ValueError(f"unknown engine dialect {dialect!r} (expected vllm or sglang)")
        self.engine_urls = [u.rstrip("/").removesuffix("/v1") for u in engine_urls]
        self.weights_dir = Path(weights_dir)
        self.dialect = dialect

    async def push(self, model: torch.nn.Module, version: int) -> None:
        self.weights_dir.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(self.weights_dir, safe_serialization=True)  # type: ignore[operator]
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as http:
            for url in self.engine_urls:
                for path, body in self._requests(version):
                    async with http.post(url + path, json=body) as resp:
                        if resp.status >= 400:
                            raise WeightSyncError(f"{url}{path}: HTTP {resp.status}: {await resp.text()}")

    def _requests(self, version: int) -> list[tuple[str, dict[str, Any]]]:
        path = str(self.weights_dir)
        if self.dialect == "sglang":
            return [("/update_weights_from_disk", {"model_path": path, "weight_version": str(version)})]
        return [
            ("/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": path}}),
            ("/reset_prefix_cache", {}),
        ]


class GatewayAdmin(Protocol):
    async def pause(self) -> None: ...

    async def resume(self) -> int: ...


async def sync_weights(gateway: GatewayAdmin, pusher: WeightPusher, model: torch.nn.Module, version: int) -> int:
    """Drain the gateway, push the weights, resume; returns the gateway's new policy version."""
    await gateway.pause()
    try:
        await pusher.push(model, version)
    finally:
        new_version = await gateway.resume()
    return new_version
