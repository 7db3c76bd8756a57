"""Pushing updated weights to the inference engine between training steps.

Protocol: pause the gateway (new calls wait, in-flight calls drain), push weights, resume the gateway
(which bumps and returns the policy version stamped on every later CallRecord). The pushers are the
engines' (`engines/weight_push.py`; the embedded engine's in-process one is `stack.InProcessPusher`).
"""

from __future__ import annotations

from typing import Protocol

import torch

from openforgerl.engines.weight_push import WeightPusher


class GatewayAdmin(Protocol):
    async def pause(self) -> None: ...

    async def resume(self) -> int: ...


async def sync_weights(
    gateway: GatewayAdmin, pusher: WeightPusher, model: torch.nn.Module, version: int
) -> int:
    """Drain the gateway, push the weights, resume; returns the gateway's new policy version."""
    await gateway.pause()
    try:
        await pusher.push(model, version)
    finally:
        new_version = await gateway.resume()
    return new_version
