"""The local engine serving a vision-language model (tiny-vl): images, expanded pads, M-RoPE decode,
the training-side logprob forward. Unmarked tests need no model; the `slow` ones load tiny-vl."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from openforgerl.engines.chat_format import ChatFormat, content_to_parts
from openforgerl.engines.local.model import TINY_VL_ASSETS
from openforgerl.engines.local.vlm import (
    ImageError,
    ProcessedImages,
    VisionProcessor,
    decode_image,
    message_images,
)


def png(size: tuple[int, int], colour: tuple[int, ...] = (200, 30, 30), mode: str = "RGB") -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new(mode, size, colour).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def part(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


# -- no model needed ---------------------------------------------------------------------------------
def test_http_urls_are_refused_with_a_reason():
    with pytest.raises(ImageError, match="data: URL"):
        decode_image("https://example.com/a.png")


@pytest.mark.parametrize(
    "url", ["data:image/png;base64,bm90IGFuIGltYWdl", "data:text/plain,hello", "file:///x.png"]
)
def test_undecodable_images_are_image_errors(url):
    with pytest.raises(ImageError):
        decode_image(url)


def test_rgba_is_composited_on_white():
    img = decode_image(png((4, 4), (0, 0, 0, 0), mode="RGBA"))
    assert img.mode == "RGB" and img.getpixel((0, 0)) == (255, 255, 255)


def test_images_are_listed_in_render_order():
    a, b, c = png((8, 8)), png((16, 8)), png((8, 16))
    messages = [
        {"role": "user", "content": [part(a), {"type": "text", "text": "x"}, part(b)]},
        {"role": "assistant", "content": "ok"},
        {"role": "tool", "tool_call_id": "1", "content": [part(c)]},
    ]
    assert message_images(messages) == [a, b, c]


def test_content_parts_keep_order_and_drop_urls():
    parts = content_to_parts([{"type": "text", "text": "a"}, part("data:,"), "b"])
    assert parts == [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]


@pytest.fixture(scope="module")
def vl_chat() -> ChatFormat:
    from openforgerl.engines.local.model import load_chat_format

    if not (TINY_VL_ASSETS / "tokenizer.json").exists():
        pytest.skip("tiny-vl assets not built")
    return load_chat_format(TINY_VL_ASSETS)


def test_template_renders_images_in_user_and_tool_messages(vl_chat):
    messages = [
        {"role": "user", "content": [part("data:,"), {"type": "text", "text": "Click OK."}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "computer_use", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "1", "content": [{"type": "text", "text": "done"}, part("data:,")]},
    ]
    text = vl_chat.render(messages)
    image = "<|vision_start|><|image_pad|><|vision_end|>"
    assert f"<|im_start|>user\n{image}Click OK.<|im_end|>" in text
    assert f"<tool_response>\ndone{image}\n</tool_response>" in text


def test_expand_replaces_each_pad_by_its_count():
    vp = VisionProcessor.__new__(VisionProcessor)
    vp.image_token_id = 9
    imgs = ProcessedImages(None, None, (2, 3))  # type: ignore[arg-type]
    assert vp.expand([1, 9, 2, 9, 3], imgs) == [1, 9, 9, 2, 9, 9, 9, 3]
    with pytest.raises(ImageError):
        vp.expand([1, 9, 2], imgs)


def test_tiny_vl_is_a_preset():
    from openforgerl.engines.local.model import is_multimodal_dir, resolve_model_path

    assert resolve_model_path("tiny-vl") == TINY_VL_ASSETS
    if (TINY_VL_ASSETS / "config.json").exists():
        assert is_multimodal_dir(TINY_VL_ASSETS)


def test_vllm_gets_the_torchvision_shim_and_image_limits_for_a_vl_dir(monkeypatch, tmp_path):
    from openforgerl.engines.local import vllm_cpu

    if not (TINY_VL_ASSETS / "config.json").exists():
        pytest.skip("tiny-vl assets not built")
    seen = {}

    class FakePopen:
        def __init__(self, cmd, **kw):
            seen["cmd"], seen["env"] = cmd, kw["env"]

    monkeypatch.setattr(vllm_cpu, "vllm_python", lambda: Path("/venv/bin/python"))
    monkeypatch.setattr(vllm_cpu.subprocess, "Popen", FakePopen)
    monkeypatch.setenv("OPENFORGERL_VLLM_VENV", "/venv")
    vllm_cpu.start_vllm(TINY_VL_ASSETS, 1234, tmp_path / "log", served_model_name="tiny-vl")
    cmd = seen["cmd"]
    assert cmd[cmd.index("--limit-mm-per-prompt") + 1] == '{"image": 8, "video": 0}'
    assert "--reasoning-parser" not in cmd and cmd[cmd.index("--served-model-name") + 1] == "tiny-vl"
    assert seen["env"]["PYTHONPATH"].split(":")[:2] == ["/venv/tv-shim", "/venv/tv"]


# -- on tiny-vl ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def vl_dir() -> Path:
    if not (TINY_VL_ASSETS / "model.safetensors").exists():
        pytest.skip("tiny-vl weights not built (scripts/build_tiny_vl.py)")
    return TINY_VL_ASSETS


@pytest.fixture
async def vl_engine(vl_dir):
    from openforgerl.engines.local import LocalEngine

    eng = LocalEngine.from_pretrained(str(vl_dir))
    yield eng
    eng.shutdown()


def _inputs(engine, urls: list[str], ask: str = "Click 'OK'.") -> tuple[list[int], ProcessedImages]:
    messages = [{"role": "user", "content": [*(part(u) for u in urls), {"type": "text", "text": ask}]}]
    vision = engine.loaded.vision
    images = vision.process_urls(message_images(messages))
    return vision.expand(engine.chat.prompt_ids(messages), images), images


@pytest.mark.slow
async def test_batched_images_of_different_sizes_match_one_at_a_time(vl_engine):
    from openforgerl.engines.local import SamplingParams

    inputs = [
        _inputs(vl_engine, [png((320, 192))]),
        _inputs(vl_engine, [png((640, 360), (30, 30, 200)), png((200, 300))]),
        _inputs(vl_engine, []),
    ]
    params = SamplingParams(max_tokens=16, temperature=0.0, logprobs=0, ignore_eos=True)
    alone = [await vl_engine.generate(p, params, im) for p, im in inputs]
    together = await asyncio.gather(*(vl_engine.generate(p, params, im) for p, im in inputs))
    for a, b in zip(alone, together, strict=True):
        assert a.token_ids == b.token_ids
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)


@pytest.mark.slow
async def test_recomputed_logprobs_match_the_engine(vl_engine):
    """The trainer's forward (pixels + grids) reproduces the sampled logprobs at step 0."""
    import torch

    from openforgerl.engines.local import SamplingParams
    from openforgerl.engines.local.vlm import vlm_logprobs

    prompt, images = _inputs(vl_engine, [png((640, 360), (46, 160, 67)), png((320, 192))])
    gen = await vl_engine.generate(
        prompt, SamplingParams(max_tokens=24, temperature=1.0, seed=7, logprobs=0), images
    )
    with torch.no_grad():
        lp = vlm_logprobs(
            vl_engine.loaded.model, prompt, gen.token_ids, images.pixel_values, images.image_grid_thw
        )
    assert lp.tolist() == pytest.approx(gen.logprobs, abs=1e-4)
    blind = vlm_logprobs(vl_engine.loaded.model, prompt, gen.token_ids, None, None).detach()
    assert not torch.allclose(blind, lp, atol=1e-3), "the images must matter"


@pytest.mark.slow
def test_gradients_reach_the_vision_tower(vl_dir):

    from openforgerl.engines.local.model import load_model
    from openforgerl.engines.local.vlm import vlm_logprobs

    loaded = load_model(str(vl_dir))
    model = loaded.model.train()
    images = loaded.vision.process_urls([png((320, 192))])
    messages = [{"role": "user", "content": [part(png((320, 192))), {"type": "text", "text": "Click."}]}]
    prompt = loaded.vision.expand(loaded.chat.prompt_ids(messages), images)
    vlm_logprobs(
        model, prompt, loaded.chat.encode("<tool_call>"), images.pixel_values, images.image_grid_thw
    ).sum().backward()
    visual = [p.grad for p in model.model.visual.parameters() if p.grad is not None]
    assert visual and any(g.abs().sum() > 0 for g in visual)


@pytest.fixture(scope="module")
def vl_server(vl_dir):
    from openforgerl.engines.local.background import BackgroundServer

    server = BackgroundServer.start(str(vl_dir))
    yield server
    server.close()


def _post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.mark.slow
def test_http_image_url_is_a_400_saying_why(vl_server):
    body = {
        "model": "tiny-vl",
        "max_tokens": 2,
        "messages": [
            {"role": "user", "content": [part("http://example.com/a.png"), {"type": "text", "text": "hi"}]}
        ],
    }
    status, data = _post(vl_server.url, body)
    assert status == 400 and "data: URL" in data["error"]["message"]


@pytest.mark.slow
def test_too_many_images_is_a_400(vl_server):
    body = {
        "model": "tiny-vl",
        "max_tokens": 2,
        "messages": [{"role": "user", "content": [part(png((32, 32)))] * 9}],
    }
    status, data = _post(vl_server.url, body)
    assert status == 400 and "at most 8" in data["error"]["message"]


@pytest.mark.slow
def test_response_reports_grid_and_pad_count(vl_server):
    body = {
        "model": "tiny-vl",
        "max_tokens": 4,
        "temperature": 0,
        "return_token_ids": True,
        "messages": [{"role": "user", "content": [part(png((640, 360))), {"type": "text", "text": "hi"}]}],
    }
    status, data = _post(vl_server.url, body)
    assert status == 200 and data["openforgerl_images"] == [{"grid_thw": [1, 10, 20], "tokens": 50}]
    assert data["prompt_token_ids"].count(4104) == 50


@pytest.mark.slow
def test_text_only_requests_still_work(vl_server):
    status, data = _post(
        vl_server.url,
        {
            "model": "tiny-vl",
            "max_tokens": 4,
            "return_token_ids": True,
            "messages": [{"role": "user", "content": "hello"}],
        },
    )
    assert status == 200 and "openforgerl_images" not in data and data["choices"][0]["token_ids"]
