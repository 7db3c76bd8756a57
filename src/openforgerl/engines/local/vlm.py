"""Images for a Qwen3-VL model: decode, process, expand the pads, M-RoPE positions, training logprobs.

The local engine and the trainer both go through here, so the pixels, grids and prompt ids the
trainer recomputes are the ones the engine sampled from. What vLLM 0.32 does, and so what this does:

* an image part renders as `<|vision_start|><|image_pad|><|vision_end|>` (the model's chat template);
  the one `<|image_pad|>` of image k then becomes `t*h*w / merge**2` pads (`image_grid_thw[k]`), and
  those expanded ids are the `prompt_token_ids` (HF processor `input_ids`);
* pixels come from the HF Qwen2-VL image processor (PIL backend: torchvision-free) with the settings
  of the model directory's `preprocessor_config.json`, fixed server-side (no per-request kwargs);
* RGBA/LA/P images are composited on white before conversion to RGB (vLLM's `convert_image_mode`);
* only `data:` URLs are accepted: this engine does not fetch over the network (a 400 says so).

`vlm_logprobs` is the training-side forward: pure inputs (ids + the processed images), a tensor out.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

IMAGE_PART_TYPES = ("image_url", "input_image", "image")
MAX_IMAGES_PER_PROMPT = 8  # vLLM's --limit-mm-per-prompt '{"image": 8}' as vllm_cpu starts VL models
MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_IMAGE_PIXELS = 4096 * 4096


class ImageError(ValueError):
    """A request image the engine refuses (undecodable, too large, a URL it cannot fetch): a 400."""


@dataclass(frozen=True)
class ProcessedImages:
    """The images of one prompt, in prompt order, as the model consumes them."""

    pixel_values: torch.Tensor  # [sum(t*h*w), C*T*P*P]
    image_grid_thw: torch.Tensor  # [n_images, 3]
    tokens: tuple[int, ...]  # pads per image: t*h*w // merge**2

    def summary(self) -> list[dict[str, Any]]:
        """The `openforgerl_images` response field: one entry per image, in prompt order."""
        return [
            {"grid_thw": [int(v) for v in g], "tokens": n}
            for g, n in zip(self.image_grid_thw.tolist(), self.tokens, strict=True)
        ]


def is_image_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") in IMAGE_PART_TYPES


def image_url(part: dict[str, Any]) -> str:
    """The URL of an OpenAI `image_url` / Responses `input_image` part."""
    value = part.get("image_url", part.get("image"))
    if isinstance(value, dict):
        value = value.get("url")
    if not isinstance(value, str) or not value:
        raise ImageError("image part without a URL")
    return value


def message_images(messages: list[dict[str, Any]]) -> list[str]:
    """Image URLs in the order the chat template renders them (message order, then part order)."""
    urls = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            urls += [image_url(p) for p in content if is_image_part(p)]
    return urls


def _to_rgb(image: Any) -> Any:
    from PIL import Image

    if image.mode in ("RGBA", "LA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")


def decode_image(url: str) -> Any:
    """A `data:image/...;base64,` URL → RGB PIL image (ImageError for anything else)."""
    from PIL import Image, UnidentifiedImageError

    if url.startswith(("http://", "https://")):
        raise ImageError("the openforgerl engine does not fetch image URLs; send the image as a data: URL")
    if not url.startswith("data:") or ";base64," not in url:
        raise ImageError(f"unsupported image URL {url[:40]!r}: expected data:image/...;base64,...")
    payload = url.split(";base64,", 1)[1]
    if len(payload) * 3 // 4 > MAX_IMAGE_BYTES:
        raise ImageError(f"image larger than {MAX_IMAGE_BYTES} bytes")
    try:
        raw = base64.b64decode(payload, validate=False)
        image = Image.open(io.BytesIO(raw))
        if image.width * image.height > MAX_IMAGE_PIXELS:
            raise ImageError(f"image of {image.width}x{image.height} exceeds {MAX_IMAGE_PIXELS} pixels")
        image.load()
    except (binascii.Error, UnidentifiedImageError, OSError, Image.DecompressionBombError) as exc:
        raise ImageError(f"cannot decode image: {exc}") from exc
    return _to_rgb(image)


class VisionProcessor:
    """The model directory's image processor plus the token ids it needs (torchvision-free)."""

    def __init__(self, path: Path, config: Any) -> None:
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        settings = json.loads((path / "preprocessor_config.json").read_text())
        keep = (
            "patch_size",
            "merge_size",
            "temporal_patch_size",
            "size",
            "image_mean",
            "image_std",
            "resample",
            "do_rescale",
            "rescale_factor",
            "do_normalize",
            "do_convert_rgb",
        )
        self.settings = {k: settings[k] for k in keep if k in settings}
        self.image_processor = Qwen2VLImageProcessorPil(**self.settings)
        self.merge_size = int(self.settings.get("merge_size", 2))
        self.image_token_id = int(config.image_token_id)
        self.vision_start_token_id = int(config.vision_start_token_id)
        self.vision_end_token_id = int(config.vision_end_token_id)

    def identity(self) -> dict[str, Any]:
        """What a recorder needs to reproduce `pixel_values`/`image_grid_thw` bit for bit."""
        return {
            "image_processor": "Qwen2VLImageProcessorPil",
            **self.settings,
            "image_token_id": self.image_token_id,
            "vision_start_token_id": self.vision_start_token_id,
            "vision_end_token_id": self.vision_end_token_id,
        }

    def process(self, images: list[Any]) -> ProcessedImages:
        out = self.image_processor(images=images, return_tensors="pt")
        grid = out["image_grid_thw"].long()
        tokens = tuple(int(n) for n in (grid.prod(-1) // self.merge_size**2).tolist())
        return ProcessedImages(out["pixel_values"].float(), grid, tokens)

    def process_urls(self, urls: list[str]) -> ProcessedImages | None:
        if not urls:
            return None
        if len(urls) > MAX_IMAGES_PER_PROMPT:
            raise ImageError(
                f"at most {MAX_IMAGES_PER_PROMPT} images may be provided in one prompt, got {len(urls)}"
            )
        return self.process([decode_image(u) for u in urls])

    def expand(self, ids: list[int], images: ProcessedImages | None) -> list[int]:
        """Replace the k-th `<|image_pad|>` with `images.tokens[k]` pads."""
        n = ids.count(self.image_token_id)
        counts = images.tokens if images is not None else ()
        if n != len(counts):
            raise ImageError(f"the prompt renders {n} image placeholders for {len(counts)} images")
        out: list[int] = []
        it = iter(counts)
        for t in ids:
            out += [t] * next(it) if t == self.image_token_id else [t]
        return out


def rope_positions(
    model: Any, ids: list[int], image_grid_thw: torch.Tensor | None, image_token_id: int
) -> tuple[torch.Tensor, int]:
    """Qwen3-VL position ids [4, 1, L] (text row + 3 M-RoPE rows) and the decode offset (rope delta)."""
    input_ids = torch.tensor([ids], dtype=torch.long)
    text = torch.arange(len(ids), dtype=torch.long).view(1, 1, -1)
    if image_grid_thw is None:
        return text.expand(4, 1, -1), 0
    types = (input_ids == image_token_id).int()
    mrope, delta = model.model.get_rope_index(
        input_ids, mm_token_type_ids=types, image_grid_thw=image_grid_thw
    )
    return torch.cat([text, mrope], dim=0), int(delta.reshape(-1)[0])


def is_vision_model(config: Any) -> bool:
    return getattr(config, "vision_config", None) is not None


def vlm_logprobs(
    model: Any,
    prompt_ids: list[int],
    response_ids: list[int],
    pixel_values: torch.Tensor | None,
    image_grid_thw: torch.Tensor | None,
    *,
    image_token_id: int | None = None,
) -> torch.Tensor:
    """Per-token logprobs [len(response_ids)] of `response_ids` after `prompt_ids`, with the images.

    `prompt_ids`/`response_ids` are the engine's ids (pads already expanded); `pixel_values` and
    `image_grid_thw` cover every image of prompt+response in order (`VisionProcessor.process`), or
    None for a text-only sample. Differentiable (no `no_grad` here): the trainer calls it for the new
    policy and under `torch.no_grad()` for the old/ref policies.
    """
    token = int(image_token_id if image_token_id is not None else model.config.image_token_id)
    ids = list(prompt_ids) + list(response_ids)
    positions, _ = rope_positions(model, ids, image_grid_thw, token)
    kwargs: dict[str, Any] = {}
    if pixel_values is not None:
        kwargs = {"pixel_values": pixel_values, "image_grid_thw": image_grid_thw}
    input_ids = torch.tensor([ids], dtype=torch.long)
    logits = model(input_ids=input_ids, position_ids=positions, use_cache=False, **kwargs).logits[0]
    start = len(prompt_ids) - 1
    lp = torch.log_softmax(logits[start:-1].float(), dim=-1)
    return lp.gather(1, torch.tensor(response_ids, dtype=torch.long)[:, None])[:, 0]
