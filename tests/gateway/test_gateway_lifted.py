"""Data URLs lifted out of a Chat body's bytes (`gateway/lifted.py`): the lean body parses to the same
document with keys where the URLs were, and putting them back gives the engine the same JSON."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from openforgerl.gateway.lifted import for_engine, lift_data_urls

URL = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGBgAAAABQABpfZFQAAAAABJRU5ErkJggg=="
)


def _body(*parts: Any) -> bytes:
    content = [{"type": "text", "text": "look"}, *parts]
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": content}]}).encode()


def _image(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def test_each_data_url_becomes_a_key_and_comes_back_as_the_same_bytes():
    raw = _body(_image(URL), _image(URL[:-4] + "AAA="))
    lifted = lift_data_urls(raw)
    assert lifted is not None and len(lifted.spans) == 2 and URL.encode() not in lifted.lean
    lean = orjson.loads(lifted.lean)
    keys = [p["image_url"]["url"] for p in lean["messages"][0]["content"][1:]]
    assert [lifted.string(k) for k in keys] == [
        json.dumps(URL).encode(),
        json.dumps(URL[:-4] + "AAA=").encode(),
    ]
    assert for_engine(lean, lifted, fragments=False) == orjson.loads(raw)
    assert orjson.dumps(for_engine(lean, lifted, fragments=True)) == orjson.dumps(orjson.loads(raw))
    assert lifted.splice(orjson.dumps(lean)) == orjson.dumps(orjson.loads(raw))  # the engine's bytes
    again = lift_data_urls(raw)
    assert again is not None and set(again.spans).isdisjoint(
        lifted.spans
    )  # a nonce per call: keys cannot be named


def test_a_payload_whose_keys_were_rewritten_is_spliced_the_exact_way():
    raw = _body(_image(URL), _image(URL))
    lifted = lift_data_urls(raw)
    assert lifted is not None
    lean = orjson.loads(lifted.lean)
    key = lean["messages"][0]["content"][1]["image_url"]["url"]
    lean["messages"][0]["content"].append({"type": "text", "text": key})  # a key twice: not spliced by search
    want = for_engine(lean, lifted, fragments=False)
    assert orjson.loads(lifted.splice(orjson.dumps(lean))) == want


def test_the_stored_request_is_the_lean_body_with_references():
    from openforgerl.gateway.images import Replacements

    raw = _body(_image(URL), _image(URL[:-4] + "AAA="))
    lifted = lift_data_urls(raw)
    assert lifted is not None
    replace = Replacements()
    for k, key in enumerate(lifted.spans):
        replace.add(key, 0, f"openforgerl-blob:sha256:{k:064x}")
    stored = orjson.loads(lifted.with_refs(replace))
    urls = [p["image_url"]["url"] for p in stored["messages"][0]["content"][1:]]
    assert urls == [f"openforgerl-blob:sha256:{k:064x}" for k in range(2)]
    assert stored["messages"][0]["content"][0] == {"type": "text", "text": "look"}


def test_what_is_not_a_plain_data_url_string_is_left_to_the_parser():
    assert lift_data_urls(_body({"type": "text", "text": "no image"})) is None
    assert lift_data_urls(_body(_image(URL.replace("iVBOR", "iV\\/BOR")))) is None  # an escape in the string
    assert lift_data_urls(_body(_image(URL + "\u00e9"))) is None  # not ASCII
    assert lift_data_urls(b'{"a": "data:image/png;base64,AAAA') is None  # unterminated
    quoted = _body({"type": "text", "text": 'he wrote "data:image/png;base64,AAAA" here'})
    assert lift_data_urls(quoted) is None  # its quotes are escaped: inside another string


_URLS = st.sampled_from([URL, "data:image/jpeg;base64,/9j/4AAQ", "data:image/gif;base64,R0lGODlh"])
_TEXT = st.text(alphabet=st.sampled_from('ab "\\/\n\u00e9'), max_size=12)  # quotes, escapes, UTF-8
_AROUND = st.builds(lambda a, url, b: a + url + b, _TEXT, _URLS, _TEXT)  # a URL inside other text
_LEAF = st.one_of(_URLS, _TEXT, _AROUND, st.integers(-(2**53), 2**53), st.none(), st.booleans())
_DOC = st.recursive(
    _LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_TEXT, _DOC, min_size=1, max_size=4), st.booleans())
def test_lifting_and_putting_back_gives_the_same_document(doc, compact):
    raw = orjson.dumps(doc) if compact else json.dumps(doc, ensure_ascii=False).encode()
    lifted = lift_data_urls(raw)
    if lifted is None:
        return
    assert all(orjson.loads(lifted.string(key)).startswith("data:image/") for key in lifted.spans)
    lean = orjson.loads(lifted.lean)
    assert for_engine(lean, lifted, fragments=False) == doc
    assert orjson.loads(orjson.dumps(for_engine(lean, lifted, fragments=True))) == doc
    assert orjson.loads(lifted.splice(orjson.dumps(lean))) == doc
