"""A fake vision engine in vLLM's wire shape, and screenshots, for the gateway's image tests.

`FakeVLM` is the model-side double only: an aiohttp server speaking vLLM's chat-completions token
API (`prompt_token_ids`, `token_ids`, logprobs, SSE) that decodes each `image_url` data URL it gets,
expands one placeholder into `t*h*w/4` pads per image (a Qwen-VL-style grid of 16 px patches,
merge 2) and reports `openforgerl_images` as the local engine does. It keeps every body it received,
so tests can check that the engine saw exactly the bytes the client sent. The gateway reaches it
through its real OpenAI-compatible client (`OpenAICompatEngine`).
"""

from __future__ import annotations

import base64
import io
import time
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from PIL import Image, ImageDraw

V_START, V_END, PAD = 4102, 4103, 4104
OUT_IDS = [21, 22, 23, 24, 25]
OUT_TEXT = ["I ", "see ", "a ", "screen", "."]


def screenshot(width: int = 128, height: int = 72, seed: int = 0, fmt: str = "PNG") -> bytes:
    """A small synthetic screenshot: a window with a labelled button, different per `seed`."""
    img = Image.new("RGB", (width, height), (240, 240, 240))
    d = ImageDraw.Draw(img)
    d.rectangle((4, 4, width - 5, height // 5), fill=((seed * 40) % 256, 90, 160))
    x = 8 + (seed * 13) % max(1, width - 40)
    d.rectangle((x, height // 2, x + 30, height // 2 + 12), fill=(30, 140, (seed * 70) % 256))
    d.text((x + 2, height // 2), f"b{seed}", fill=(255, 255, 255))
    out = io.BytesIO()
    img.save(out, format=fmt)
    return out.getvalue()


def data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64," + base64.b64encode(data).decode()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def grid_of(data: bytes) -> tuple[list[int], int]:
    w, h = Image.open(io.BytesIO(data)).size
    grid = [1, max(2, h // 16 // 2 * 2), max(2, w // 16 // 2 * 2)]
    return grid, grid[0] * grid[1] * grid[2] // 4


@dataclass
class FakeVLM:
    """The engine double: what it received, and the prompt ids it answered with, per call."""

    bodies: list[dict[str, Any]] = field(default_factory=list)
    images: list[list[bytes]] = field(default_factory=list)  # decoded image bytes per call, in order
    prompts: list[list[int]] = field(default_factory=list)

    def render(self, body: dict[str, Any]) -> tuple[list[int], list[dict[str, Any]]]:
        ids: list[int] = []
        report: list[dict[str, Any]] = []
        seen: list[bytes] = []
        for m in body["messages"]:
            ids.append({"system": 1, "user": 2, "assistant": 3, "tool": 4}.get(m["role"], 5))
            content = m.get("content")
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            for p in parts:
                if p.get("type") == "text":
                    ids += [10 + ord(c) % 1000 for c in p["text"]]
                elif p.get("type") in ("image_url", "input_image"):
                    url = p["image_url"]["url"] if isinstance(p["image_url"], dict) else p["image_url"]
                    if url.startswith("data:"):
                        data = base64.b64decode(url.split(",", 1)[1])
                        seen.append(data)
                        grid, n = grid_of(data)
                    else:  # a URL the engine would fetch: one pad, nothing decoded here
                        grid, n = [1, 2, 2], 1
                    ids += [V_START] + [PAD] * n + [V_END]
                    report.append({"grid_thw": grid, "tokens": n})
        self.images.append(seen)
        return [*ids, 6], report

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        self.bodies.append(body)
        prompt, report = self.render(body)
        self.prompts.append(prompt)
        head = {"id": "chatcmpl-1", "created": int(time.time()), "model": body.get("model") or "fake-vl"}
        lp = [
            {"content": [{"token": t, "logprob": -0.5, "bytes": list(t.encode()), "top_logprobs": []}]}
            for t in OUT_TEXT
        ]
        if not body.get("stream"):
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": "".join(OUT_TEXT)},
                "logprobs": {"content": [e["content"][0] for e in lp]},
                "finish_reason": "stop",
                "token_ids": OUT_IDS,
            }
            out = {
                **head,
                "object": "chat.completion",
                "choices": [choice],
                "usage": {
                    "prompt_tokens": len(prompt),
                    "completion_tokens": 5,
                    "total_tokens": len(prompt) + 5,
                },
                "prompt_token_ids": prompt,
            }
            if report:
                out["openforgerl_images"] = report
            return web.Response(body=orjson.dumps(out), content_type="application/json")
        return await self._stream(request, head, prompt, report, lp)

    async def _stream(
        self,
        request: web.Request,
        head: dict[str, Any],
        prompt: list[int],
        report: list[dict[str, Any]],
        lp: list[dict[str, Any]],
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        chunk = {**head, "object": "chat.completion.chunk"}
        first = {
            **chunk,
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
            "prompt_token_ids": prompt,
        }
        if report:
            first["openforgerl_images"] = report
        events = [first]
        for i, (tid, text) in enumerate(zip(OUT_IDS, OUT_TEXT, strict=True)):
            events.append(
                {
                    **chunk,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"content": text},
                            "logprobs": lp[i],
                            "finish_reason": "stop" if i == 4 else None,
                            "token_ids": [tid],
                        }
                    ],
                }
            )
        events.append(
            {
                **chunk,
                "choices": [],
                "usage": {
                    "prompt_tokens": len(prompt),
                    "completion_tokens": 5,
                    "total_tokens": len(prompt) + 5,
                },
            }
        )
        for e in events:
            await resp.write(b"data: " + orjson.dumps(e) + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake-vl", "object": "model"}]})

    def app(self) -> web.Application:
        app = web.Application(client_max_size=256 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        return app
