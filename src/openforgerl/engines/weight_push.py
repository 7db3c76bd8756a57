"""Pushing updated weights into a running engine: `WeightPusher`, and `DiskReloadPusher`, which saves them
to a shared directory and asks each replica to reload, in its dialect: vLLM's `/collective_rpc
reload_weights` (needs VLLM_SERVER_DEV_MODE=1) or SGLang's `/update_weights_from_disk`. The embedded
engine's in-process pusher is `stack.InProcessPusher`; pausing the gateway around a push is
`train/weight_sync.py`.
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
