"""Pixels for the trainer: a sample's image references -> `pixel_values` / `image_grid_thw`.

A multimodal `Sample` carries only references (`multi_modal_data["images"]`: sha256 + sizes + the
engine's grid/token count, see `trajectory/images.py`); the bytes are in the call log's blob store.
`SampleVision` reads them (`read_blob`, sync: the update runs in a worker thread), decodes them the way
the engine did and runs the model directory's image processor through the engine's own
`VisionProcessor` (`engines/local/vlm.py`), so the trainer sees the pixels the engine sampled from.

It refuses to guess: a missing blob, or a grid/token count that differs from what the engine recorded
(a different processor setting: the pad runs would not line up), raises `VisionInputError`.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from openforgerl.records import Sample

BlobReader = Callable[[str], bytes | None]


class VisionInputError(ValueError):
    """A sample's images cannot be turned into the inputs the engine used."""


def sample_images(sample: Sample) -> list[dict[str, Any]]:
    return list(sample.multi_modal_data.get("images", []))


class SampleVision:
    """`__call__(sample)` -> the engine's `ProcessedImages` for the sample's images (None: text only)."""

    def __init__(self, processor: Any, read_blob: BlobReader, *, cache_size: int = 256) -> None:
        self.processor = processor  # engines.local.vlm.VisionProcessor
        self.read_blob = read_blob
        self.cache: dict[tuple[str, ...], Any] = {}
        self.cache_size = cache_size

    @classmethod
    def for_model_dir(cls, path: Path, read_blob: BlobReader) -> SampleVision:
        from transformers import AutoConfig

        from openforgerl.engines.local.vlm import VisionProcessor

        return cls(VisionProcessor(path, AutoConfig.from_pretrained(path)), read_blob)

    @property
    def image_token_id(self) -> int:
        return int(self.processor.image_token_id)

    def __call__(self, sample: Sample) -> Any:
        images = sample_images(sample)
        if not images:
            return None
        key = tuple(str(i["sha256"]) for i in images)
        if key not in self.cache:
            if len(self.cache) >= self.cache_size:
                self.cache.pop(next(iter(self.cache)))
            self.cache[key] = self.processor.process([self._decode(i) for i in images])
        processed = self.cache[key]
        for k, (image, grid, tokens) in enumerate(
            zip(images, processed.image_grid_thw.tolist(), processed.tokens, strict=True)
        ):
            _check_recorded(k, image, [int(v) for v in grid], int(tokens))
        return processed

    def _decode(self, image: Mapping[str, Any]) -> Any:
        """Through the engine's own `decode_image` (same mode conversion), from the stored bytes."""
        from openforgerl.engines.local.vlm import decode_image

        sha = str(image["sha256"])
        data = self.read_blob(sha) if sha else None
        if data is None:
            raise VisionInputError(f"image {sha or image.get('url')!r} is not in the blob store")
        media = str(image.get("media_type") or "image/png")
        return decode_image(f"data:{media};base64,{base64.b64encode(data).decode()}")


def _check_recorded(k: int, image: Mapping[str, Any], grid: list[int], tokens: int) -> None:
    recorded_grid, recorded_tokens = image.get("grid_thw"), image.get("tokens")
    if recorded_grid is not None and list(recorded_grid) != grid:
        raise VisionInputError(f"image {k}: processor grid {grid} != engine's {list(recorded_grid)}")
    if recorded_tokens is not None and int(recorded_tokens) != tokens:
        raise VisionInputError(f"image {k}: processor gives {tokens} tokens, engine used {recorded_tokens}")
