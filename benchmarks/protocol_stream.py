"""Per-chunk cost of the stream translators (gateway hot path). Not a test:
`python tests/protocols/bench_stream.py`.

Feeds a vLLM-shaped stream of N one-token text deltas (plus a tool call) through each translator
and prints microseconds per chunk, including SSE encoding. `--quick` runs fewer rounds.
"""

from __future__ import annotations

import sys
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "protocols"))

from protokit import CAPTURES, load_body, stream_chunks

from openforgerl.gateway.protocols import anthropic, responses


def main() -> None:
    quick = "--quick" in sys.argv
    rounds = 20 if quick else 200
    chunks = stream_chunks(
        content="x" * 128 * 3, calls=[("call_1", "exec_command", '{"cmd": "ls -la /tmp"}')]
    )
    codex = load_body(CAPTURES / "codex__turn2_request_with_tool_output.json.gz")
    claude = load_body(CAPTURES / "claude__turn2_request_with_tool_result.json.gz")

    def run_responses() -> None:
        s = responses.ResponsesStream(codex)
        for c in chunks:
            s.feed(c)
        s.finish()

    def run_anthropic() -> None:
        s = anthropic.AnthropicStream(claude)
        for c in chunks:
            s.feed(c)
        s.finish()

    def deltas_only(cls, request):  # steady state: a text item already open, one delta per chunk
        s = cls(request)
        s.feed(chunks[1])
        body = chunks[2:130]
        return lambda: [s.feed(c) for c in body]

    for name, fn in (
        ("responses (whole stream)", run_responses),
        ("anthropic (whole stream)", run_anthropic),
        ("responses (delta only)", deltas_only(responses.ResponsesStream, codex)),
        ("anthropic (delta only)", deltas_only(anthropic.AnthropicStream, claude)),
    ):
        best = (
            min(timeit.repeat(fn, number=rounds, repeat=5, timer=time.process_time)) / rounds
        )  # CPU time: the box is shared
        n = len(chunks) if "whole" in name else 128
        print(f"{name:28s} {best * 1e6 / n:6.2f} us/chunk  ({n} chunks, {best * 1e3:.2f} ms/stream)")


if __name__ == "__main__":
    main()
