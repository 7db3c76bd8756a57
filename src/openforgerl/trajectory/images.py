"""The image half of the prefix rule, and the pad-count check (pure; no I/O, no pixels).

A call's images are ``CallRecord.images``: the prompt's images in prompt order (``ImageRef``:
``sha256``, ``media_type``, ``width``, ``height``, ``grid_thw``, ``tokens``). Reconstruction only
compares their hashes and counts their tokens; pixels stay in the call log's blob store.

- **Prefix rule.** A call continues a chain iff its prompt ids start with the chain's ids *and* its
  image hashes start with the chain's image hashes, in order. Equal ids are not enough: two
  screenshots of the same size render the same pad run.
- **Pruning.** A chain image that is missing from the call's images (the harness dropped or replaced an
  old screenshot) is a break with cause ``image_pruned`` (``breaks.classify_break``).
- **Pad count.** A sample with images must hold exactly ``sum(image.tokens)`` ``<|image_pad|>`` ids
  (grid ``t*h*w / merge**2`` when ``tokens`` is not recorded). A mismatch is the classic multimodal
  failure (wrong processor settings, a truncated pad run): the rollout is dropped with reason
  ``image_tokens_mismatch``, never emitted as a silent sample. Unknown token counts or an unknown
  image token id skip the check.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

ImageDict = dict[str, Any]
"""One image as it travels in ``Sample.multi_modal_data["images"]`` (``ImageRef.model_dump()``)."""


def call_images(call: object) -> tuple[ImageDict, ...]:
    """The call's prompt images as plain dicts, in prompt order (empty for a text-only call)."""
    return tuple(image_dict(ref) for ref in getattr(call, "images", None) or ())


def image_dict(ref: object) -> ImageDict:
    """An ``ImageRef`` (or an already-plain mapping) as a dict with at least ``sha256``."""
    dump = getattr(ref, "model_dump", None)
    out: ImageDict = dict(dump(mode="json")) if callable(dump) else dict(ref)  # type: ignore[call-overload]
    if not isinstance(out.get("sha256"), str):
        raise ValueError(f"image reference without a sha256: {out!r}")
    return out


def image_keys(images: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """Identity of each image: its hash (a URL image the engine fetched, with no bytes: its URL)."""
    return tuple(str(image["sha256"]) or f"url:{image.get('url')}" for image in images)


def images_extend(keys: Sequence[str], prefix: Sequence[str]) -> bool:
    """True when ``keys`` starts with ``prefix`` (the image half of the prefix rule)."""
    return len(keys) >= len(prefix) and tuple(keys[: len(prefix)]) == tuple(prefix)


def image_pruned(chain_keys: Sequence[str], call_keys: Sequence[str]) -> bool:
    """Some image of the chain is no longer in the call's prompt (removed, or replaced by another)."""
    return bool(Counter(chain_keys) - Counter(call_keys))


def shares_image(chain_keys: Sequence[str], call_keys: Sequence[str]) -> bool:
    return bool(set(chain_keys) & set(call_keys))


def image_token_id(processor: Mapping[str, Any] | None, default: int | None) -> int | None:
    """The placeholder id to count: the recorded processor's ``image_token_id``, else ``default``."""
    value = (processor or {}).get("image_token_id")
    return int(value) if isinstance(value, int) else default


def expected_tokens(images: Sequence[Mapping[str, Any]], processor: Mapping[str, Any] | None) -> int | None:
    """Sum of the images' pad counts, or None when any one is unknown."""
    merge = int((processor or {}).get("merge_size", 2))
    total = 0
    for image in images:
        n = image_tokens(image, merge)
        if n is None:
            return None
        total += n
    return total


def image_tokens(image: Mapping[str, Any], merge: int) -> int | None:
    tokens = image.get("tokens")
    if isinstance(tokens, int):
        return tokens
    grid = image.get("grid_thw")
    if isinstance(grid, Sequence) and len(grid) == 3:
        return int(grid[0]) * int(grid[1]) * int(grid[2]) // (merge * merge)
    return None


def pad_mismatch(
    ids: Sequence[int],
    images: Sequence[Mapping[str, Any]],
    token_id: int | None,
    processor: Mapping[str, Any] | None = None,
) -> str | None:
    """``"<pads> pads for <tokens> image tokens"`` when they disagree, else None (or not checkable)."""
    if token_id is None:
        return None
    pads = sum(1 for t in ids if t == token_id)
    if not images:
        return None if pads == 0 else f"{pads} pads for 0 images"
    expected = expected_tokens(images, processor)
    if expected is None or expected == pads:
        return None
    return f"{pads} pads for {expected} image tokens"
