"""The image path's lookups, without a gateway: what `find_images` decodes, what it takes from the
cache of images already stored, and what `stored_copy` replaces.

The cache (`SeenImages`) finds a data URL by a short fingerprint and trusts a hit only when the whole
URL is equal, and the replacements are found by length and compared: both must tell apart strings
that share a length and every sampled character, which real screenshots rarely do and these do on
purpose.
"""

from __future__ import annotations

import base64
import hashlib
import struct
import zlib
from typing import Any

import pytest
from imgkit import data_url, screenshot

from openforgerl.gateway.errors import GatewayError
from openforgerl.gateway.images import (
    ImagePolicy,
    Replacements,
    SeenImages,
    find_images,
    fingerprint,
    stored_copy,
)
from openforgerl.records import BLOB_REF_PREFIX, ImageRef

POLICY = ImagePolicy()


def chat(*urls: str, text: str = "look") -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    parts += [{"type": "image_url", "image_url": {"url": u}} for u in urls]
    return {
        "model": "m",
        "messages": [
            {"role": "system", "content": "you are a GUI agent"},
            {"role": "user", "content": parts},
        ],
    }


def twins() -> tuple[bytes, bytes]:
    """Two PNGs of one size whose data URLs share their length and all three fingerprint samples:
    the bytes differ only a third of the way in (the end of a tEXt chunk's text)."""
    png = screenshot(160, 90, seed=3)
    text_len = 3000

    def with_text(fill: bytes) -> bytes:
        payload = b"note\0" + fill
        chunk = (
            struct.pack(">I", len(payload))
            + b"tEXt"
            + payload
            + struct.pack(">I", zlib.crc32(b"tEXt" + payload))
        )
        return png[:33] + chunk + png[33:]

    a = with_text(b"a" * text_len)
    b = with_text(b"a" * (text_len // 2) + b"b" + b"a" * (text_len // 2 - 1))
    return a, b


def test_twins_really_share_the_fingerprint() -> None:
    a, b = twins()
    assert a != b and fingerprint(data_url(a)) == fingerprint(data_url(b))


def test_a_cache_hit_needs_the_whole_url_equal() -> None:
    a, b = twins()
    seen = SeenImages()
    first = find_images(chat(data_url(a)), POLICY, seen)
    assert first is not None and len(first.blobs) == 1
    for url, ref in first.fresh:
        seen.add(url, ref)
    again = find_images(chat(data_url(a)), POLICY, seen)  # the same URL in a new body (a new str)
    assert again is not None and again.blobs == {} and again.fresh == []
    assert again.refs == first.refs
    other = find_images(chat(data_url(b)), POLICY, seen)  # same fingerprint, other bytes: decoded
    assert other is not None and list(other.blobs) == [hashlib.sha256(b).hexdigest()]
    assert other.refs[0].sha256 == hashlib.sha256(b).hexdigest() != first.refs[0].sha256


def test_the_cache_is_bounded_by_characters_oldest_out() -> None:
    urls = [f"data:image/png;base64,{i:04d}" + "A" * 1000 for i in range(4)]  # one length: room for three
    seen = SeenImages(max_chars=3 * len(urls[0]) + 10)
    ref = ImageRef(sha256="0" * 64, media_type="image/png", width=64, height=48)
    for url in urls[:3]:
        seen.add(url, ref)
    assert seen.get(urls[0]) is ref  # now the most recently used
    seen.add(urls[3], ref)  # over the bound: urls[1] is the oldest
    assert seen.get(urls[1]) is None
    assert all(seen.get(u) is ref for u in (urls[0], urls[2], urls[3]))
    seen.add("x" * (seen.max_chars + 1), ref)  # larger than the whole cache: never kept
    assert seen.get("x" * (seen.max_chars + 1)) is None


def test_replacements_match_whole_strings_of_the_same_length() -> None:
    url = "data:image/png;base64,QUJDREVGR0hJSktM"
    comma = url.index(",") + 1
    rep = Replacements()
    rep.add(url, comma, "REF")
    assert rep.get(url) == "REF" and rep.get(url[:5] + url[5:]) == "REF"  # an equal, distinct str
    assert rep.get(url[comma:]) == "REF"  # the bare base64 (Anthropic's source.data)
    assert rep.get(url[:-1] + "N") is None and rep.get(url[comma:-1] + "N") is None  # same length, other text
    assert rep.get("data:image/png;base64,QUJDREVGR0hJSktMTU") is None
    rep.add(url, comma, "REF")  # a resent image: no second entry
    assert sum(len(v) for v in rep._by_len.values()) == 2


def test_stored_copy_replaces_url_and_bare_base64_and_copies_only_changed_containers() -> None:
    shot = screenshot(64, 48, seed=9)
    url = data_url(shot)
    found = find_images(chat(url), POLICY)
    assert found is not None
    ref = BLOB_REF_PREFIX + hashlib.sha256(shot).hexdigest()
    body = chat(url)
    body["other"] = {"plain": "text", "source": {"type": "base64", "data": base64.b64encode(shot).decode()}}
    out = stored_copy(body, found.replace)
    assert out["messages"][1]["content"][1]["image_url"]["url"] == ref
    assert out["other"]["source"]["data"] == ref
    assert out["messages"][0] is body["messages"][0]  # untouched: the same object
    assert body["messages"][1]["content"][1]["image_url"]["url"] == url  # the engine's body is not changed


def test_base64_with_line_breaks_is_still_accepted_and_non_ascii_refused() -> None:
    shot = screenshot(64, 48, seed=4)
    mime = base64.encodebytes(
        shot
    ).decode()  # a newline every 76 characters: only the lenient decoder takes it
    assert "\n" in mime
    found = find_images(chat("data:image/png;base64," + mime), POLICY)
    assert found is not None and found.refs[0].sha256 == hashlib.sha256(shot).hexdigest()
    with pytest.raises(GatewayError) as err:
        find_images(chat("data:image/png;base64," + "\u00e9" * 8), POLICY)
    assert err.value.status == 400


def test_an_image_resent_within_one_prompt_is_stored_once() -> None:
    shot = screenshot(64, 48, seed=5)
    found = find_images(chat(data_url(shot), data_url(shot)), POLICY)
    assert found is not None and len(found.refs) == 2 and len(found.blobs) == 1
    assert found.refs[0].sha256 == found.refs[1].sha256
