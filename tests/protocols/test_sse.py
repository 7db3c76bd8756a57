"""The SSE decoder: split anywhere, CR/LF/CRLF, comments, multi-line data; agrees with openai's decoder."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from openai._streaming import SSEDecoder as OpenAIDecoder

from openforgerl.gateway.protocols.sse import SSEDecoder, comment, encode

STREAM = (
    b'event: a\r\ndata: {"x": "\xc3\xa9"}\r\n\r\n'
    b": keepalive\n\n"
    b"data: line1\ndata: line2\nid: 7\nretry: 100\n\n"
    b"event: b\rdata:nospace\r\r"
    b"data: [DONE]\n\n"
)


def events(dec: SSEDecoder, pieces: list[bytes]) -> list[tuple]:
    out = [ev for p in pieces for ev in dec.feed(p)] + dec.finish()
    return [(e.event, e.data, e.id, e.retry) for e in out]


def test_decodes_all_forms() -> None:
    assert events(SSEDecoder(), [STREAM]) == [
        ("a", '{"x": "é"}', None, None),
        (None, "line1\nline2", "7", 100),
        ("b", "nospace", "7", None),
        (None, "[DONE]", "7", None),
    ]


def test_every_split_point_gives_the_same_events() -> None:
    whole = events(SSEDecoder(), [STREAM])
    for i in range(len(STREAM) + 1):
        assert events(SSEDecoder(), [STREAM[:i], STREAM[i:]]) == whole, i
    assert events(SSEDecoder(), [bytes([b]) for b in STREAM]) == whole


def test_unterminated_last_event_flushed_by_finish() -> None:
    assert events(SSEDecoder(), [b"event: x\ndata: 1"]) == [("x", "1", None, None)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from([None, "message_start", "response.output_text.delta"]),
            st.dictionaries(st.text(max_size=5), st.text(max_size=20), max_size=3),
        ),
        max_size=6,
    ),
    st.lists(st.integers(min_value=0, max_value=400), max_size=5),
)
def test_encoder_round_trips_through_both_decoders(evs, cuts) -> None:
    body = b"".join(encode(data, event) for event, data in evs) + comment("hi\nthere")
    cuts = sorted(c for c in cuts if c <= len(body))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    dec = SSEDecoder()
    mine = [(e.event, e.json()) for p in pieces for e in dec.feed(p)] + [
        (e.event, e.json()) for e in dec.finish()
    ]
    theirs = [(e.event, e.json()) for e in OpenAIDecoder().iter_bytes(iter(pieces))]
    assert mine == theirs == [(event, data) for event, data in evs]
