"""Screenshots through the gateway to the real local engine serving `tiny-vl` (no double at all).

Chat (user and tool messages), Responses and Anthropic, streamed and not, with the official SDKs:
the recorded prompt ids are the engine's own (equal to its `/tokenize` of the translated request,
images expanded into `<|image_pad|>` runs), the record's per-image `tokens` are the engine's and
add up to the pads in the prompt, and each screenshot is in the blob store once. Skipped when the
tiny-vl assets are not there (the model is built by another stage's script).
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from anthropic import AsyncAnthropic
from gwkit import gateway_over, serve_local_engine
from imgkit import b64, data_url, screenshot
from openai import AsyncOpenAI

from openforgerl.engines.local.model import TINY_VL_ASSETS
from openforgerl.gateway.server import RunningGateway
from openforgerl.records import BLOB_REF_PREFIX, CallRecord
from openforgerl.store.sqlite import SQLiteCallStore

pytestmark = pytest.mark.skipif(
    not (TINY_VL_ASSETS / "model.safetensors").exists(), reason=f"tiny-vl assets not built ({TINY_VL_ASSETS})"
)
PAD = 4104
SHOTS = [screenshot(160 + 32 * i, 96, seed=i) for i in range(3)]


@pytest.fixture(scope="module")
def engine_url(tmp_path_factory: Any) -> Any:
    yield from serve_local_engine(tmp_path_factory, "tiny-vl")


@pytest.fixture
async def gateway(engine_url: str, tmp_path: Any) -> AsyncIterator[tuple[RunningGateway, SQLiteCallStore]]:
    async with gateway_over(engine_url, tmp_path) as opened:
        yield opened


async def engine_tokens(engine_url: str, rec: CallRecord, blobs: SQLiteCallStore) -> list[int]:
    """The engine's own `/tokenize` of the request it got (references swapped back for the bytes)."""
    body = dict(rec.engine_request or rec.request)

    def restore(v: Any) -> Any:
        if isinstance(v, str) and v.startswith(BLOB_REF_PREFIX):
            return data_url(blobs.read_blob(v[len(BLOB_REF_PREFIX) :]) or b"")
        if isinstance(v, dict):
            return {k: restore(x) for k, x in v.items()}
        if isinstance(v, list):
            return [restore(x) for x in v]
        return v

    payload = {"messages": restore(body["messages"]), "tools": body.get("tools")}
    async with aiohttp.ClientSession() as s, s.post(engine_url + "/tokenize", json=payload) as r:
        return (await r.json())["tokens"]


def check(rec: CallRecord, shots: list[bytes]) -> None:
    assert rec.error is None, rec.error
    assert [i.sha256 for i in rec.images] == [hashlib.sha256(s).hexdigest() for s in shots]
    assert all(i.tokens and i.grid_thw for i in rec.images)
    assert rec.prompt_token_ids.count(PAD) == sum(i.tokens or 0 for i in rec.images)
    # the processor the engine used, from its /v1/models card (read once per replica)
    assert rec.processor is not None and rec.processor.get("image_token_id") == PAD
    assert ";base64," not in rec.model_dump_json()


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
async def test_tiny_vl_chat_user_and_tool_images(gateway, engine_url, stream):
    gw, store = gateway
    ro = await gw.open_rollout(harness="gui")
    c = AsyncOpenAI(base_url=ro["openai_base_url"], api_key=ro["api_key"], max_retries=0)
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "click"},
                {"type": "image_url", "image_url": {"url": data_url(SHOTS[0])}},
            ],
        },
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_url(SHOTS[1])}}]},
    ]
    if stream:
        s = await c.chat.completions.create(model="tiny-vl", messages=messages, max_tokens=8, stream=True)
        async for _ in s:
            pass
    else:
        await c.chat.completions.create(model="tiny-vl", messages=messages, max_tokens=8)
    (rec,) = await store.list_calls(ro["rollout_id"])
    check(rec, SHOTS[:2])
    assert rec.prompt_token_ids == await engine_tokens(engine_url, rec, store)


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
async def test_tiny_vl_anthropic_tool_result_and_responses(gateway, engine_url, stream):
    gw, store = gateway
    ro = await gw.open_rollout(harness="gui")
    a = AsyncAnthropic(base_url=ro["anthropic_base_url"], api_key=ro["api_key"], max_retries=0)
    img = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(SHOTS[2])}}
    messages = [
        {"role": "user", "content": "look"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "shot", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [img]}]},
    ]
    tools = [
        {
            "name": "shot",
            "description": "take a screenshot",
            "input_schema": {"type": "object", "properties": {}},
        }
    ]
    if stream:
        async with a.messages.stream(model="tiny-vl", max_tokens=8, messages=messages, tools=tools) as s:
            async for _ in s:
                pass
    else:
        await a.messages.create(model="tiny-vl", max_tokens=8, messages=messages, tools=tools)
    o = AsyncOpenAI(base_url=ro["openai_base_url"], api_key=ro["api_key"], max_retries=0)
    items = [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "click"},
                {"type": "input_image", "image_url": data_url(SHOTS[0])},
            ],
        }
    ]
    if stream:
        async for _ in await o.responses.create(
            model="tiny-vl", input=items, max_output_tokens=8, stream=True
        ):
            pass
    else:
        await o.responses.create(model="tiny-vl", input=items, max_output_tokens=8)
    first, second = await store.list_calls(ro["rollout_id"])
    check(first, SHOTS[2:3])
    check(second, SHOTS[:1])
    for rec in (first, second):
        assert rec.prompt_token_ids == await engine_tokens(engine_url, rec, store)
    assert store.read_blob(first.images[0].sha256) == SHOTS[2]
