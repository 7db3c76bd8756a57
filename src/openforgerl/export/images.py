"""Images in exported rows: references by default, inline bytes on request, PIL images for veRL.

A sample carries image *references* (``multi_modal_data = {"images": [ImageRef dict, ...]}``, pad-run
order, see ``trajectory/images.py``); the bytes are in the call log's blob store. Exported rows hold,
per image, one of three forms (``ImageMode``):

- ``ref`` (the default for Parquet/JSONL): the ``ImageRef`` fields plus ``blob_uri``
  (``openforgerl-blob:sha256:<hex>``, the gateway's reference form) and ``blob_store`` (the call log
  path; ``SQLiteCallStore(blob_store).read_blob(sha256)`` returns the bytes). Storage stays
  within the unique images' size: a screenshot resent on every call is one blob.
- ``inline`` (``--inline-images``): the same fields plus ``data``, the image file's bytes in base64,
  for a consumer without access to the call log.
- ``pil``: what veRL's ``AgentLoopOutput.multi_modal_data`` holds in memory: ``{"images":
  [PIL.Image, ...]}`` in RGB (veRL 0.9.1 re-runs its HF processor on them, collapsing each expanded
  pad run of ``input_ids``; ``AgentLoopWorker._compute_multi_modal_inputs``). ``pil_images`` turns
  either file form back into that.

Before any row is written, every sample's ``<|image_pad|>`` count must equal its images' token count
(``check_sample_images``; an ``ExportImageError`` otherwise): reconstruction already drops such
rollouts, so this is the last line, never a silent sample.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any

from openforgerl.records import BLOB_REF_PREFIX, Sample
from openforgerl.trajectory.images import image_token_id, pad_mismatch

BlobReader = Callable[[str], bytes | None]


class ImageMode(StrEnum):
    REF = "ref"
    INLINE = "inline"
    PIL = "pil"


class ExportImageError(ValueError):
    """A sample's images cannot be exported as they are (pad mismatch, a blob missing)."""


def check_sample_images(sample: Sample, default_token_id: int | None = None) -> None:
    """Raise when the sample's pad count disagrees with its images' tokens."""
    images = sample.multi_modal_data.get("images", [])
    processor = sample.extra_fields.get("image_processor")
    token = image_token_id(processor, default_token_id)
    problem = pad_mismatch([*sample.prompt_ids, *sample.response_ids], images, token, processor)
    if problem is not None:
        raise ExportImageError(f"rollout {sample.rollout_id} chain {sample.chain_index}: {problem}")


def export_multi_modal_data(
    mm: Mapping[str, Any], mode: ImageMode, read_blob: BlobReader | None, blob_store: str | None = None
) -> dict[str, Any]:
    """A sample's ``multi_modal_data`` in the row form ``mode`` asks for (``{}`` stays ``{}``)."""
    images = list(mm.get("images", []))
    if not images:
        return dict(mm)
    if mode is ImageMode.PIL:
        return {**mm, "images": pil_images({"images": images}, read_blob)}
    out = [_ref(image, blob_store) for image in images]
    if mode is ImageMode.INLINE:
        out = [{**ref, "data": base64.b64encode(_blob(ref, read_blob)).decode()} for ref in out]
    return {**mm, "images": out}


def _ref(image: Mapping[str, Any], blob_store: str | None) -> dict[str, Any]:
    sha = str(image["sha256"])
    return {**image, "blob_uri": f"{BLOB_REF_PREFIX}{sha}" if sha else None, "blob_store": blob_store}


def _blob(image: Mapping[str, Any], read_blob: BlobReader | None) -> bytes:
    if isinstance(image.get("data"), str):
        return base64.b64decode(image["data"])
    sha = str(image.get("sha256") or "")
    data = read_blob(sha) if read_blob is not None and sha else None
    if data is None:
        raise ExportImageError(f"image {sha or image.get('url')!r} is not in the blob store")
    return data


def pil_images(mm: Mapping[str, Any], read_blob: BlobReader | None = None) -> list[Any]:
    """RGB PIL images of a row's ``multi_modal_data`` (inline ``data``, else the blob store), decoded by
    the engine's own ``decode_image`` (same mode conversion: transparency composited on white)."""
    from PIL import Image

    from openforgerl.engines.local.vlm import decode_image

    out = []
    for image in mm.get("images", []):
        if isinstance(image, Image.Image):
            out.append(image)
            continue
        media = str(image.get("media_type") or "image/png")
        out.append(decode_image(f"data:{media};base64,{base64.b64encode(_blob(image, read_blob)).decode()}"))
    return out
