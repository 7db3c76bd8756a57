"""Real multimodal traffic for export tests: the local engine serving `tiny-vl`, the gateway, a call log.

`record_gui_rollouts` runs rollouts that send one synthetic screenshot per turn (chat `image_url` data
URLs) and reports their verdicts, so the call log holds what a GUI harness leaves behind: calls with
expanded pad runs, `ImageRef`s, the engine's grids and processor identity, and each image once as a blob.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

import aiohttp
from PIL import Image, ImageDraw

from openforgerl.engines.local.model import resolve_model_path
from openforgerl.store.sqlite import SQLiteCallStore


def screenshot(seed: int, size: tuple[int, int] = (96, 64), mode: str = "RGB") -> bytes:
    img = Image.new(mode, size, (230, 230, 230) if mode == "RGB" else (230, 230, 230, 255))
    d = ImageDraw.Draw(img)
    x = 6 + (seed * 17) % (size[0] - 30)
    d.rectangle((x, 20, x + 24, 34), fill=((seed * 60) % 256, 120, 200))
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def image_part(data: bytes) -> dict[str, Any]:
    return {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(data).decode()},
    }


async def _rollout(gateway: Any, index: int, shots: list[bytes], keep_last: int | None) -> str:
    spec = await gateway.open_rollout(task_id="click", harness="gui-test", group_id="g0", sample_index=index)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Click the blue box."}]
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {spec['api_key']}"}) as http:
        for turn, shot in enumerate(shots):
            messages.append(
                {"role": "user", "content": [image_part(shot), {"type": "text", "text": f"step {turn}"}]}
            )
            if keep_last is not None:
                _prune(messages, keep_last)
            body = {
                "model": "tiny-vl",
                "messages": messages,
                "max_tokens": 5,
                "temperature": 1.0,
                "seed": turn,
            }
            async with http.post(spec["openai_base_url"] + "/chat/completions", json=body) as resp:
                assert resp.status == 200, await resp.text()
                reply = await resp.json()
            messages.append({"role": "assistant", "content": reply["choices"][0]["message"]["content"] or ""})
    outcome = {"status": "ok", "reward": float(index % 2), "in_batch": True, "group_valid": True}
    async with aiohttp.ClientSession(headers=gateway.admin_headers()) as http:
        async with http.post(f"{gateway.admin_url}/rollouts/{spec['rollout_id']}/outcome", json=outcome) as r:
            assert r.status == 200, await r.text()
    return str(spec["rollout_id"])


def _prune(messages: list[dict[str, Any]], keep_last: int) -> None:
    """Drop all but the last `keep_last` screenshots (their text stays), as last-N-images harnesses do."""
    parts = [
        (m, p)
        for m in messages
        if isinstance(m["content"], list)
        for p in m["content"]
        if p["type"] == "image_url"
    ]
    for message, part in parts[: max(0, len(parts) - keep_last)]:
        message["content"].remove(part)


async def record_gui_rollouts(
    path: Path, rollouts: list[list[bytes]], keep_last: int | None = None
) -> list[str]:
    """One rollout per list of screenshots (one per turn), recorded into the call log at `path`;
    `keep_last`: the harness resends only its last N screenshots."""
    from openforgerl.engines.local.background import BackgroundServer
    from openforgerl.engines.openai_compat import OpenAICompatEngine
    from openforgerl.gateway.server import start_gateway

    server = BackgroundServer.start(str(resolve_model_path("tiny-vl")))
    store = SQLiteCallStore(path)
    gateway = await start_gateway(OpenAICompatEngine([server.url]), store, owns_engine=True)
    try:
        return [await _rollout(gateway, i, shots, keep_last) for i, shots in enumerate(rollouts)]
    finally:
        await gateway.aclose()
        await store.aclose()
        server.close()
