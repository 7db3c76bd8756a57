"""Screenshots through the gateway in all three protocols, driven by the official SDKs.

The engine is `imgkit.FakeVLM` (vLLM's wire shape, image pads expanded, `openforgerl_images`
reported) behind the gateway's real OpenAI-compatible client. Checked per call: the engine got the
client's exact image bytes, the recorded prompt ids are the engine's, the record lists the images in
order with the engine's grids, each distinct image is in the blob store once, and the stored request
holds blob references instead of base64. Bad images are 4xx in the protocol's own shape.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import anthropic
import openai
import pytest
from aiohttp import web
from anthropic import AsyncAnthropic
from imgkit import FakeVLM, b64, data_url, grid_of, screenshot
from openai import AsyncOpenAI

from openforgerl.engines.openai_compat import OpenAICompatEngine
from openforgerl.gateway.images import ImagePolicy, image_header, may_have_images
from openforgerl.gateway.server import RunningGateway, start_gateway
from openforgerl.records import BLOB_REF_PREFIX, CallRecord
from openforgerl.store.sqlite import SQLiteCallStore

SHOTS = [screenshot(96 + 32 * i, 64, seed=i) for i in range(6)]
SHAS = [hashlib.sha256(s).hexdigest() for s in SHOTS]
TOOL = {
    "type": "function",
    "function": {
        "name": "click",
        "description": "click",
        "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}},
    },
}


class Rig:
    def __init__(self, gw: RunningGateway, fake: FakeVLM, store: SQLiteCallStore) -> None:
        self.gw, self.fake, self.store = gw, fake, store

    async def rollout(self) -> dict[str, str]:
        return await self.gw.open_rollout(harness="gui")

    async def records(self, ro: dict[str, str]) -> list[CallRecord]:
        return await self.store.list_calls(ro["rollout_id"])

    def check(self, rec: CallRecord, shots: list[bytes]) -> None:
        """The record of the last call, which sent `shots` in this order."""
        assert self.fake.images[-1] == shots  # the engine decoded exactly the client's bytes
        assert rec.error is None and rec.prompt_token_ids == self.fake.prompts[-1]
        assert rec.completion_token_ids == [21, 22, 23, 24, 25]
        want = [hashlib.sha256(s).hexdigest() for s in shots]
        assert [i.sha256 for i in rec.images] == want
        for ref, shot in zip(rec.images, shots, strict=True):
            assert ref.media_type == "image/png"
            assert [ref.width, ref.height] == list(image_header(shot)[1:])
            grid, tokens = grid_of(shot)
            assert ref.grid_thw == grid and ref.tokens == tokens
            assert self.store.read_blob(ref.sha256) == shot
        assert sum(rec.prompt_token_ids.count(4104) for _ in [0]) == sum(i.tokens or 0 for i in rec.images)
        stored = rec.model_dump_json()
        assert not any(b64(s)[:200] in stored for s in shots)  # no inline base64 anywhere in the record
        assert stored.count(BLOB_REF_PREFIX) >= len(shots)


@pytest.fixture
async def rig(tmp_path: Any) -> AsyncIterator[Callable[..., Any]]:
    closers: list[Any] = []

    async def make(fake: FakeVLM | None = None, **policy: Any) -> Rig:
        fake = fake or FakeVLM()
        runner = web.AppRunner(fake.app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        closers.append(runner.cleanup)
        store = SQLiteCallStore(tmp_path / f"calls{len(closers)}.db")
        engine = OpenAICompatEngine(f"http://127.0.0.1:{port}/v1")
        gw = await start_gateway(engine, store, images=ImagePolicy(**policy))
        closers.extend([gw.aclose, engine.aclose, store.aclose])
        return Rig(gw, fake, store)

    yield make
    for close in reversed(closers):
        await close()


def oai(ro: dict[str, str]) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=ro["openai_base_url"], api_key=ro["api_key"], max_retries=0)


def ant(ro: dict[str, str]) -> AsyncAnthropic:
    return AsyncAnthropic(base_url=ro["anthropic_base_url"], api_key=ro["api_key"], max_retries=0)


def chat_part(shot: bytes) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": data_url(shot)}}


# -- the three protocols -------------------------------------------------------------------------
@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
async def test_chat_images_in_user_and_tool_messages(rig, stream):
    r = await rig()
    ro = await r.rollout()
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "click the button"}, chat_part(SHOTS[0])]},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "click", "arguments": '{"x": 3}'}}
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": [{"type": "text", "text": "clicked"}, chat_part(SHOTS[1])],
        },
    ]
    c = oai(ro)
    if stream:
        s = await c.chat.completions.create(model="m", messages=messages, tools=[TOOL], stream=True)
        text = "".join([ch.choices[0].delta.content or "" async for ch in s if ch.choices])
    else:
        text = (
            (await c.chat.completions.create(model="m", messages=messages, tools=[TOOL]))
            .choices[0]
            .message.content
        )
    assert text == "I see a screen."
    (rec,) = await r.records(ro)
    r.check(rec, SHOTS[:2])
    sent = r.fake.bodies[-1]["messages"][2]["content"][1]["image_url"]["url"]
    assert sent == data_url(SHOTS[1])  # the engine got the data URL as sent, character for character
    assert rec.request["messages"][0]["content"][1]["image_url"]["url"] == BLOB_REF_PREFIX + SHAS[0]


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
async def test_responses_input_image_in_message_and_function_call_output(rig, stream):
    r = await rig()
    ro = await r.rollout()
    items = [
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "click it"},
                {"type": "input_image", "image_url": data_url(SHOTS[2])},
            ],
        },
        {"type": "function_call", "call_id": "c1", "name": "click", "arguments": '{"x": 1}'},
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [
                {"type": "input_text", "text": "clicked"},
                {"type": "input_image", "image_url": data_url(SHOTS[3])},
            ],
        },
    ]
    tools = [{"type": "function", "name": "click", "parameters": TOOL["function"]["parameters"]}]
    c = oai(ro)
    if stream:
        s = await c.responses.create(model="m", input=items, tools=tools, stream=True)
        text = "".join([e.delta async for e in s if e.type == "response.output_text.delta"])
    else:
        text = (await c.responses.create(model="m", input=items, tools=tools)).output_text
    assert text == "I see a screen."
    (rec,) = await r.records(ro)
    r.check(rec, SHOTS[2:4])
    assert rec.engine_request is not None
    assert rec.request["input"][2]["output"][1]["image_url"] == BLOB_REF_PREFIX + SHAS[3]
    assert (
        r.fake.bodies[-1]["messages"][-1]["role"] == "tool"
    )  # the tool result's image went in the tool turn


@pytest.mark.parametrize("stream", [False, True], ids=["nonstream", "stream"])
async def test_anthropic_image_blocks_in_user_and_tool_result(rig, stream):
    r = await rig()
    ro = await r.rollout()

    def img(shot: bytes) -> dict[str, Any]:
        return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(shot)}}

    messages = [
        {"role": "user", "content": [{"type": "text", "text": "click it"}, img(SHOTS[4])]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "click", "input": {"x": 2}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "clicked"}, img(SHOTS[5])],
                }
            ],
        },
    ]
    tools = [{"name": "click", "description": "click", "input_schema": TOOL["function"]["parameters"]}]
    c = ant(ro)
    if stream:
        async with c.messages.stream(model="m", max_tokens=16, messages=messages, tools=tools) as s:
            text = "".join([t async for t in s.text_stream])
    else:
        msg = await c.messages.create(model="m", max_tokens=16, messages=messages, tools=tools)
        text = "".join(b.text for b in msg.content if b.type == "text")
    assert text == "I see a screen."
    (rec,) = await r.records(ro)
    r.check(rec, SHOTS[4:6])
    assert (
        rec.request["messages"][2]["content"][0]["content"][1]["source"]["data"] == BLOB_REF_PREFIX + SHAS[5]
    )


# -- storage ---------------------------------------------------------------------------------------
async def test_a_rollout_resending_its_last_five_screenshots_stores_each_once(rig):
    r = await rig()
    ro = await r.rollout()
    shots = [screenshot(64, 48, seed=100 + i) for i in range(24)]
    c = oai(ro)
    for step in range(20):
        window = shots[step : step + 5]
        content = [{"type": "text", "text": f"step {step}"}, *[chat_part(s) for s in window]]
        await c.chat.completions.create(model="m", messages=[{"role": "user", "content": content}])
    recs = await r.records(ro)
    assert len(recs) == 20
    for step, rec in enumerate(recs):
        assert [i.sha256 for i in rec.images] == [
            hashlib.sha256(s).hexdigest() for s in shots[step : step + 5]
        ]
    count, size = r.store.read_blob_usage()
    assert count == 24 and size == sum(len(s) for s in shots)
    assert all(r.store.read_blob(i.sha256) is not None for rec in recs for i in rec.images)


async def test_the_images_that_reached_the_model_are_claw_evals_media_events(rig):
    """What a Claw-Eval image-QA grader gets as `media_events`: one `loaded` image per distinct image the
    gateway recorded in the rollout's prompts, first-seen order, from the real records of a rollout that
    resends its screenshots; a text-only rollout has none."""
    from openforgerl.tasks.transcript import media_events

    r = await rig()
    ro, text_only = await r.rollout(), await r.rollout()
    c = oai(ro)
    for window in (SHOTS[:2], SHOTS[1:3], SHOTS[2:3]):
        content = [{"type": "text", "text": "look"}, *[chat_part(s) for s in window]]
        await c.chat.completions.create(model="m", messages=[{"role": "user", "content": content}])
    await oai(text_only).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    events = media_events(await r.records(ro))
    assert [(e["sha256"], e["modality"], e["status"], e["mime_type"]) for e in events] == [
        (h, "image", "loaded", "image/png") for h in SHAS[:3]
    ]
    assert media_events(await r.records(text_only)) == []


async def test_text_calls_record_no_images(rig):
    r = await rig()
    ro = await r.rollout()
    await oai(ro).chat.completions.create(model="m", messages=[{"role": "user", "content": "no image here"}])
    (rec,) = await r.records(ro)
    assert rec.images == [] and rec.processor is None
    assert rec.request["messages"][0]["content"] == "no image here"


# -- refusals, in each protocol's shape --------------------------------------------------------------
def png_header(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", 13)
        + b"IHDR"
        + ihdr
        + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    )


BAD = {
    "undecodable": ("data:image/png;base64," + b64(b"this is not an image at all"), 400),
    "not_base64_url": ("data:image/png,rawbytes", 400),
    "huge_pixels": (data_url(png_header(20000, 20000)), 413),
    "too_many_bytes": (data_url(SHOTS[0] + b"\0" * 5000), 413),
    "http_url": ("https://example.com/a.png", 400),
    "file_url": ("file:///etc/passwd", 400),
}


async def post(url: str, key: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as s,
        s.post(url, json=body, headers={"Authorization": f"Bearer {key}"}) as resp,
    ):
        return resp.status, await resp.json()


@pytest.mark.parametrize("case", sorted(BAD))
async def test_bad_images_are_4xx_in_each_protocol_shape(rig, case):
    url, status = BAD[case]
    r = await rig(max_bytes=len(SHOTS[0]) + 100)
    ro = await r.rollout()
    base, key = ro["openai_base_url"], ro["api_key"]
    chat = {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}],
    }
    resp = {"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": url}]}]}
    if url.startswith("data:") and ";base64," in url:
        mt, data = url[5:].split(";base64,")
        source = {"type": "base64", "media_type": mt, "data": data}
    else:
        source = {"type": "url", "url": url}
    msgs = {
        "model": "m",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": [{"type": "image", "source": source}]}],
    }
    for path, body in (("/chat/completions", chat), ("/responses", resp)):
        got, err = await post(base + path, key, body)
        assert got == status and err["error"]["type"] == "invalid_request_error", (path, err)
    got, err = await post(ro["anthropic_base_url"] + "/v1/messages", key, msgs)
    if case != "not_base64_url":  # that shape cannot be written as an Anthropic block
        assert (
            got == status
            and err["type"] == "error"
            and err["error"]["type"] in ("invalid_request_error", "request_too_large")
        ), err
    assert r.fake.bodies == [] and await r.records(ro) == []  # refused before the engine, never recorded
    with pytest.raises(openai.BadRequestError):
        await oai(ro).chat.completions.create(
            model="m",
            messages=[
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": BAD["undecodable"][0]}}],
                }
            ],
        )
    with pytest.raises(anthropic.BadRequestError):
        await ant(ro).messages.create(
            model="m",
            max_tokens=8,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": b64(b"junk")},
                        }
                    ],
                }
            ],
        )


async def test_http_image_urls_are_forwarded_only_when_allowed(rig):
    r = await rig(allow_urls=True)
    ro = await r.rollout()
    content = [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}, chat_part(SHOTS[0])]
    await oai(ro).chat.completions.create(model="m", messages=[{"role": "user", "content": content}])
    (rec,) = await r.records(ro)
    assert r.fake.bodies[-1]["messages"][0]["content"][0]["image_url"]["url"] == "https://example.com/a.png"
    assert [i.url for i in rec.images] == ["https://example.com/a.png", None]
    assert rec.images[1].sha256 == SHAS[0]


def test_header_parsing_without_decoding():
    import io

    from PIL import Image

    for fmt, mt in (
        ("PNG", "image/png"),
        ("JPEG", "image/jpeg"),
        ("GIF", "image/gif"),
        ("WEBP", "image/webp"),
        ("BMP", "image/bmp"),
    ):
        assert image_header(screenshot(123, 45, fmt=fmt)) == (mt, 123, 45), fmt
    lossless = io.BytesIO()
    Image.new("RGB", (77, 33)).save(lossless, format="WEBP", lossless=True)
    assert image_header(lossless.getvalue()) == ("image/webp", 77, 33)
    assert image_header(png_header(20000, 10)) == ("image/png", 20000, 10)


def test_the_chat_gate_sees_image_parts_and_no_text():
    many = {"messages": [{"role": "user", "content": "x"}] * 50}  # short messages: the gate scans
    assert may_have_images(many, b'{"type":"image_url","image_url":{"url":"data:"}}', False)
    assert may_have_images(many, b'{"type": "image_url", "image_url": "x"}', False)
    assert may_have_images({}, b"{}", True)  # translated protocols: their chat output is walked instead
    assert may_have_images(many, b'{"type": "image_embeds"}', False)
    assert not may_have_images(
        many, b'{"messages":[{"role":"user","content":"an image of a docker image"}]}', False
    )
    assert not may_have_images(
        many, b'{"content":"build the image","x":"my_images/","y":"input_image"}', False
    )
    assert may_have_images({"messages": [{"role": "user", "content": "x"}]}, b"x" * 1000, False)  # long: walk


def mangled_images(rng: Any) -> list[Any]:
    """Image payloads a broken or hostile client might send: never a 5xx."""
    good = SHOTS[0]
    blobs = [
        good[: rng.randint(0, len(good))],
        b"\x89PNG\r\n\x1a\n" + bytes(rng.getrandbits(8) for _ in range(40)),
        b"\xff\xd8" + bytes(rng.getrandbits(8) for _ in range(60)),
        b"RIFF\0\0\0\0WEBPVP8X" + b"\xff" * 20,
        b"GIF89a\xff\xff\xff\xff",
        png_header(0, 5),
        png_header(2**32 - 1, 2**32 - 1),
        b"",
        b"BM" + b"\0" * 30,
    ]
    urls: list[Any] = [data_url(b) for b in blobs]
    urls += [
        {"type": ["image_url"]},
        "data:image/png;base64,@@@@",
        "data:image/png;base64," + "A" * 5,
        "data:;base64,AAAA",
        "data:image/png",
        "data:image/png;base64,\u00e9\u00e9",
        "",
        "ftp://x",
        7,
        None,
        {"url": 3},
        ["x"],
    ]
    return urls


async def test_mangled_images_are_never_5xx(rig):
    import random

    rng = random.Random(7)
    r = await rig()
    ro = await r.rollout()
    base, key = ro["openai_base_url"], ro["api_key"]
    for url in mangled_images(rng):
        shapes = [
            (
                base + "/chat/completions",
                {
                    "model": "m",
                    "messages": [
                        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}
                    ],
                },
            ),
            (
                base + "/chat/completions",
                {
                    "model": "m",
                    "messages": [
                        {
                            "role": "tool",
                            "tool_call_id": "x",
                            "content": [{"type": "image_url", "image_url": url}],
                        }
                    ],
                },
            ),
            (
                base + "/chat/completions",
                {
                    "model": "m",
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {"type": url, "image_url": {"url": "data:image/png;base64,AAAA"}},
                                {"type": "image_url"},
                            ],
                        }
                    ],
                },
            ),
            (
                base + "/responses",
                {
                    "model": "m",
                    "input": [
                        {
                            "type": "function_call_output",
                            "call_id": "c",
                            "output": [{"type": "input_image", "image_url": url}],
                        }
                    ],
                },
            ),
            (
                ro["anthropic_base_url"] + "/v1/messages",
                {
                    "model": "m",
                    "max_tokens": 4,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {
                                    "type": "tool_result",
                                    "tool_use_id": "t",
                                    "content": [
                                        {
                                            "type": "image",
                                            "source": {
                                                "type": "base64",
                                                "media_type": "image/png",
                                                "data": url.split(",")[-1] if isinstance(url, str) else url,
                                            },
                                        }
                                    ],
                                }
                            ],
                        }
                    ],
                },
            ),
        ]
        for path, body in shapes:
            status, _ = await post(path, key, body)
            assert status < 500, (path, repr(url)[:80], status)


async def test_processor_settings_come_from_the_engine_when_it_knows_them(rig):
    r = await rig()
    settings = {"image_processor": "Qwen2VLImageProcessorPil", "patch_size": 16, "merge_size": 2}

    async def image_processor(route_key: str) -> dict[str, Any]:
        return settings

    r.gw.gateway.engine.image_processor = image_processor  # type: ignore[attr-defined]
    ro = await r.rollout()
    c = oai(ro)
    await c.chat.completions.create(model="m", messages=[{"role": "user", "content": [chat_part(SHOTS[0])]}])
    await c.chat.completions.create(model="m", messages=[{"role": "user", "content": "text only"}])
    with_image, text = await r.records(ro)
    assert with_image.processor == settings and text.processor is None


async def test_translated_protocols_need_no_gate(rig):
    """A Responses or Anthropic image is found in the translated body, however its JSON was spelled."""
    r = await rig()
    ro = await r.rollout()
    raw = (
        '{"model":"m","max_tokens":8,"messages":[{"role":"user","content":[{"type":"\\u0069mage","source":'
        '{"type":"base64","media_type":"image/png","data":"' + b64(SHOTS[1]) + '"}}]}]}'
    )
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            ro["anthropic_base_url"] + "/v1/messages", data=raw, headers={"x-api-key": ro["api_key"]}
        ) as resp,
    ):
        assert resp.status == 200
    (rec,) = await r.records(ro)
    assert [i.sha256 for i in rec.images] == [SHAS[1]]


async def test_blobs_are_served_on_the_admin_plane_only(rig):
    r = await rig()
    ro = await r.rollout()
    await oai(ro).chat.completions.create(
        model="m", messages=[{"role": "user", "content": [chat_part(SHOTS[2])]}]
    )
    admin, auth = r.gw.admin_url, r.gw.admin_headers()
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{admin}/blobs/{SHAS[2]}", headers=auth) as resp:
            assert resp.status == 200 and await resp.read() == SHOTS[2]
        for path, status in ((f"/blobs/{SHAS[3]}", 404), ("/blobs/XYZ", 400)):
            async with s.get(admin + path, headers=auth) as resp:
                assert resp.status == status
        async with s.get(f"{admin}/blobs/{SHAS[2]}") as resp:
            assert resp.status == 401
        async with s.get(
            f"{r.gw.model_url}/blobs/{SHAS[2]}", headers={"Authorization": f"Bearer {ro['api_key']}"}
        ) as resp:
            assert resp.status == 404


async def test_chat_input_image_alias_is_recorded_and_raw_pixels_refused(rig):
    r = await rig()
    ro = await r.rollout()
    c = oai(ro)
    await c.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": [{"type": "input_image", "image_url": data_url(SHOTS[3])}]}],
    )
    (rec,) = await r.records(ro)
    assert [i.sha256 for i in rec.images] == [SHAS[3]]
    assert rec.request["messages"][0]["content"][0]["image_url"] == BLOB_REF_PREFIX + SHAS[3]
    status, err = await post(
        ro["openai_base_url"] + "/chat/completions",
        ro["api_key"],
        {
            "model": "m",
            "messages": [{"role": "user", "content": [{"type": "image_embeds", "image_embeds": "AAAA"}]}],
        },
    )
    assert status == 400 and "image_embeds" in err["error"]["message"]


class PixelCheckingVLM(FakeVLM):
    """Decodes every pixel, as vLLM and the local engine do, and refuses (400, vLLM's error shape)
    an image that does not decode; the plain fake reads headers only."""

    async def chat(self, request: web.Request) -> web.StreamResponse:
        import base64
        import io

        import orjson
        from PIL import Image

        body = orjson.loads(await request.read())
        for m in body["messages"]:
            for p in m["content"] if isinstance(m.get("content"), list) else ():
                if p.get("type") == "image_url":
                    try:
                        Image.open(
                            io.BytesIO(base64.b64decode(p["image_url"]["url"].split(",", 1)[1]))
                        ).load()
                    except OSError as exc:
                        return web.json_response(
                            {
                                "error": {
                                    "message": f"cannot decode image: {exc}",
                                    "type": "BadRequestError",
                                    "code": 400,
                                }
                            },
                            status=400,
                        )
        return await super().chat(request)  # aiohttp keeps the body read above for this second read


async def test_an_image_whose_header_parses_but_pixels_do_not_is_the_engines_400(rig):
    """The gateway reads headers only (images.py says why): a truncated PNG gets past it, the engine
    refuses it, and the client gets that 400 in its protocol's shape, recorded as its own mistake."""
    broken = SHOTS[4][: len(SHOTS[4]) // 2]
    assert image_header(broken)[1:] == image_header(SHOTS[4])[1:]  # the header is intact
    r = await rig(fake=PixelCheckingVLM())
    ro = await r.rollout()
    base, key = ro["openai_base_url"], ro["api_key"]
    url = data_url(broken)
    chat = {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}],
    }
    resp = {"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": url}]}]}
    for path, body in (("/chat/completions", chat), ("/responses", resp)):
        got, err = await post(base + path, key, body)
        assert got == 400 and err["error"]["type"] == "invalid_request_error", (path, err)
        assert "cannot decode image" in err["error"]["message"]
    msgs = {
        "model": "m",
        "max_tokens": 8,
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": b64(broken)},
                    }
                ],
            }
        ],
    }
    got, err = await post(ro["anthropic_base_url"] + "/v1/messages", key, msgs)
    assert got == 400 and err["type"] == "error" and err["error"]["type"] == "invalid_request_error", err
    recs = await r.records(ro)
    assert len(recs) == 3 and all(
        rec.error is not None and rec.error.kind == "client_bad_request" for rec in recs
    )
    assert all(rec.images[0].sha256 == hashlib.sha256(broken).hexdigest() for rec in recs)
    await oai(ro).chat.completions.create(
        model="m", messages=[{"role": "user", "content": [chat_part(SHOTS[4])]}]
    )


# -- data URLs lifted out of the bytes (gateway/lifted.py) ---------------------------------------------
def tricky_bodies() -> list[bytes]:
    """Chat bodies where a data URL is not (only) an image part's URL, or is not plain base64."""
    shot, other = data_url(SHOTS[0]), data_url(SHOTS[1])
    head, tail = shot.split(",", 1)

    def body(*parts: Any, **extra: Any) -> bytes:
        import json

        return json.dumps(
            {"model": "m", **extra, "messages": [{"role": "user", "content": list(parts)}]}
        ).encode()

    img = chat_part
    return [
        body(img(SHOTS[0]), img(SHOTS[1]), img(SHOTS[0])),  # lifted: the plain path must agree
        body({"type": "text", "text": shot}, img(SHOTS[1])),  # a text that is a data URL
        body(img(SHOTS[1]), metadata={other: 1}),  # an object key that is one
        body({"type": "text", "text": 'say "' + shot + '"'}, img(SHOTS[0])),  # inside another string
        body(
            {"type": "text", "text": "openforgerl-lifted-0123456789abcdef-000000"}, img(SHOTS[0])
        ),  # a guessed key
        body(
            {"type": "image_url", "image_url": {"url": f"{head},{tail[:40]}!!{tail[40:]}"}}
        ),  # lenient base64 only
        body(
            {"type": "image_url", "image_url": {"url": head + "," + tail[:40] + "\n" + tail[40:]}}
        ),  # an escape (\n)
        body(img(SHOTS[0])).replace(b"image/png;", b"image/p\tng;"),  # a raw control character: not JSON
        body(img(SHOTS[0])).replace(tail[:40].encode(), tail[:40].encode() + b"\n"),  # the same in the base64
        body(img(SHOTS[0])).replace(b"image/png;base64", b"image/p\tng"),  # ... in a header that is refused
        body(img(SHOTS[0] + b"\0" * 5000)).replace(
            tail[:40].encode(), tail[:40].encode() + b"\n"
        ),  # ... too large
        body({"type": "image_url", "image_url": {"url": f"{head},{tail}\u00e9"}}),  # not ASCII
        body(
            img(SHOTS[0]), {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@@"}}
        ),  # a bad second
        body(
            {"type": "image_url", "image_url": {"url": other}}, img(SHOTS[0] + b"\0" * 5000)
        ),  # 413 on the second
        body(img(SHOTS[0]))[:-3],  # not JSON
        b'{"model": "m", "messages": [{"role": "user", "content": [{"type": '
        b'"image_url", "image_url": {"url": "data:image/png;base64,AA',
    ]


async def test_the_lifted_path_answers_exactly_as_the_plain_path(rig, monkeypatch):
    """Every body goes through the gateway twice: with image data URLs lifted out of the bytes, and with
    lifting off. Status, answer, what the engine got and what the record keeps must be the same."""
    import openforgerl.gateway.calls as calls

    outcomes: dict[bool, list[Any]] = {}
    for lifting in (True, False):
        if not lifting:
            monkeypatch.setattr(calls, "lift_data_urls", lambda raw: None)
        r = await rig(max_bytes=len(SHOTS[0]) + 100)
        ro = await r.rollout()
        got = []
        for raw in tricky_bodies():
            before = len(r.fake.bodies)
            async with (
                aiohttp.ClientSession() as s,
                s.post(
                    ro["openai_base_url"] + "/chat/completions",
                    data=raw,
                    headers={"Authorization": f"Bearer {ro['api_key']}", "Content-Type": "application/json"},
                ) as resp,
            ):
                answer = await resp.json()
            answer.pop("id", None), answer.pop("created", None)
            engine = r.fake.bodies[-1] if len(r.fake.bodies) > before else None
            got.append((resp.status, answer, engine, r.fake.images[-1] if engine is not None else None))
        recs = [
            (rec.request, rec.engine_request, rec.images, rec.prompt_token_ids) for rec in await r.records(ro)
        ]
        outcomes[lifting] = [got, recs]
    (lifted_calls, lifted_recs), (plain_calls, plain_recs) = outcomes[True], outcomes[False]
    for k, (a, b) in enumerate(zip(lifted_calls, plain_calls, strict=True)):
        assert a == b, k
    assert lifted_recs == plain_recs
    statuses = [status for status, *_ in lifted_calls]
    assert statuses.count(200) >= 6 and 400 in statuses and 413 in statuses  # both kinds of outcome were seen


async def test_image_data_urls_are_not_parsed_as_strings(rig, monkeypatch):
    """The lifted path is the one taken: the body the gateway parses holds no base64, and the engine
    still gets the client's bytes."""
    import openforgerl.gateway.calls as calls

    parsed: list[bytes] = []
    real = calls.parse_body
    monkeypatch.setattr(calls, "parse_body", lambda raw: parsed.append(raw) or real(raw))
    r = await rig()
    ro = await r.rollout()
    content = [{"type": "text", "text": "click"}, chat_part(SHOTS[0]), chat_part(SHOTS[1])]
    await oai(ro).chat.completions.create(model="m", messages=[{"role": "user", "content": content}])
    (rec,) = await r.records(ro)
    r.check(rec, SHOTS[:2])
    assert (
        len(parsed) == 1
        and b64(SHOTS[0])[:100].encode() not in parsed[0]
        and b"openforgerl-lifted-" in parsed[0]
    )
    assert r.fake.bodies[-1]["messages"][0]["content"][1]["image_url"]["url"] == data_url(SHOTS[0])
