"""Rows the veRL agent loop returns carry PIL images (veRL's `AgentLoopOutput.multi_modal_data`)."""

from __future__ import annotations

import hashlib
import io

import pytest
from PIL import Image

from openforgerl.export import ExportImageError
from openforgerl.train.verl.outputs import with_pil_images


def _png(color: tuple[int, int, int, int], mode: str = "RGBA") -> bytes:
    out = io.BytesIO()
    Image.new(mode, (32, 32), color).save(out, format="PNG")
    return out.getvalue()


def test_refs_become_rgb_pil_images_in_order_and_text_rows_are_untouched() -> None:
    blobs = {hashlib.sha256(b).hexdigest(): b for b in (_png((255, 0, 0, 255)), _png((0, 0, 0, 0)))}
    shas = list(blobs)
    mm = {"images": [{"sha256": s, "media_type": "image/png", "width": 32, "height": 32} for s in shas]}
    rows = [{"multi_modal_data": mm}, {"multi_modal_data": {}}]
    out = with_pil_images(rows, blobs.get)
    assert isinstance(out, list)
    images = out[0]["multi_modal_data"]["images"]
    assert [im.mode for im in images] == ["RGB", "RGB"]
    assert images[0].getpixel((0, 0)) == (255, 0, 0)
    assert images[1].getpixel((0, 0)) == (255, 255, 255), (
        "transparency composited on white, as the engine does"
    )
    assert out[1]["multi_modal_data"] == {}


def test_a_missing_blob_is_an_error_not_an_empty_image() -> None:
    row = {"multi_modal_data": {"images": [{"sha256": "ab" * 32, "media_type": "image/png"}]}}
    with pytest.raises(ExportImageError, match="not in the blob store"):
        with_pil_images(row, {}.get)
